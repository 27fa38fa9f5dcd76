//! What an MPIPingPong rank runs (`perfsweep mpi-tool mpi-pingpong --tool T --maxlog N`):
//! the first tool of the spec's choice its worker has, with the same message sizes.

use super::ToolChoice;
use super::parse::Tool;
use crate::kinds::mpi::{Invocation, RankProbe};

/// The rank's invocation, from the wrapper's arguments and what the rank finds.
pub fn invocation(args: &[String], probe: &RankProbe<'_>) -> Result<Invocation, String> {
    let mut choice = ToolChoice::Auto;
    let mut maxlog = None;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--tool" => {
                choice = [ToolChoice::Auto, ToolChoice::Imb, ToolChoice::NetPipe]
                    .into_iter()
                    .find(|c| c.as_arg() == value)
                    .ok_or_else(|| format!("unknown --tool {value:?}: auto, IMB or NetPIPE"))?;
            }
            "--maxlog" => {
                maxlog = Some(
                    value
                        .parse::<u32>()
                        .ok()
                        .filter(|m| (1..=30).contains(m))
                        .ok_or_else(|| format!("--maxlog {value:?}: a whole number, 1 to 30"))?,
                );
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let maxlog = maxlog.ok_or("--maxlog is required")?;
    let tool = choice
        .candidates()
        .iter()
        .copied()
        .find(|tool| (probe.has_program)(tool.program()))
        .ok_or_else(|| {
            let names: Vec<&str> = choice.candidates().iter().map(|t| t.program()).collect();
            format!("none of {} is on PATH", names.join(", "))
        })?;
    Ok(match tool {
        Tool::Imb => imb(maxlog),
        Tool::NetPipe => netpipe(maxlog),
    })
}

/// `IMB-MPI1 PingPong -msglog 0:<maxlog>`: message sizes 0 and 2^0 … 2^maxlog bytes
/// (IMB's `-msglog [minlog:]maxlog`; the zero-byte size is always included).
fn imb(maxlog: u32) -> Invocation {
    let mut args = vec![
        "PingPong".to_owned(),
        "-msglog".to_owned(),
        format!("0:{maxlog}"),
    ];
    // IMB allocates -mem GiB per rank (1 by default) for its buffers: a send and a
    // receive buffer of the largest message must fit.
    if maxlog >= 29 {
        let gib = (1u64 << (maxlog + 1)) as f64 / f64::from(1u32 << 30) + 0.5;
        args.extend(["-mem".to_owned(), format!("{gib}")]);
    }
    Invocation::of(Tool::Imb.program(), args)
}

/// `NPopenmpi -p 0 -l 1 -u 2^maxlog`: from 1 byte to 2^maxlog, each power of two and
/// the size halfway to the next, without NetPIPE's ±3-byte perturbations (which triple
/// the run for sizes no application picks). NetPIPE prints its table on standard error
/// and writes it to a file on rank 0's worker; the wrapper passes the former on.
fn netpipe(maxlog: u32) -> Invocation {
    let upper = 1u64 << maxlog;
    let mut invocation = Invocation::of(
        Tool::NetPipe.program(),
        [
            "-p".to_owned(),
            "0".to_owned(),
            "-l".to_owned(),
            "1".to_owned(),
            "-u".to_owned(),
            upper.to_string(),
            "-o".to_owned(),
            "np.out".to_owned(),
        ],
    );
    invocation.preamble = vec![format!("{}{upper} bytes", super::netpipe::PREAMBLE)];
    invocation.stderr_is_output = true;
    invocation
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(has: &'static [&'static str]) -> impl Fn(&[&str]) -> Result<Invocation, String> {
        move |args: &[&str]| {
            let has_program = |p: &str| has.contains(&p);
            let probe = RankProbe {
                rank: 0,
                world_size: 2,
                local_size: 1,
                memory_bytes: 1 << 30,
                has_program: &has_program,
            };
            let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
            invocation(&args, &probe)
        }
    }

    #[test]
    fn auto_prefers_imb_and_falls_back_to_netpipe() {
        let both = probe(&["IMB-MPI1", "NPopenmpi"]);
        let run = both(&["--tool", "auto", "--maxlog", "20"]).expect("IMB");
        assert_eq!(run.program, "IMB-MPI1");
        assert_eq!(run.args, ["PingPong", "-msglog", "0:20"]);
        let debian = probe(&["NPopenmpi"]);
        let run = debian(&["--tool", "auto", "--maxlog", "20"]).expect("NetPIPE");
        assert_eq!(run.program, "NPopenmpi");
        assert_eq!(
            run.args,
            ["-p", "0", "-l", "1", "-u", "1048576", "-o", "np.out"]
        );
        assert!(run.stderr_is_output);
        assert_eq!(
            run.preamble,
            [format!("{}1048576 bytes", super::super::netpipe::PREAMBLE)]
        );
    }

    #[test]
    fn a_named_tool_is_never_swapped_for_another() {
        let debian = probe(&["NPopenmpi"]);
        assert_eq!(
            debian(&["--tool", "IMB", "--maxlog", "4"]),
            Err("none of IMB-MPI1 is on PATH".to_owned())
        );
        let imb_only = probe(&["IMB-MPI1"]);
        assert!(imb_only(&["--tool", "NetPIPE", "--maxlog", "4"]).is_err());
        assert_eq!(
            probe(&[])(&["--maxlog", "4"]),
            Err("none of IMB-MPI1, NPopenmpi is on PATH".to_owned())
        );
    }

    #[test]
    fn the_largest_imb_messages_get_enough_memory() {
        let run = probe(&["IMB-MPI1"])(&["--tool", "IMB", "--maxlog", "30"]).expect("IMB");
        assert_eq!(run.args[3..], ["-mem", "2.5"]);
    }

    #[test]
    fn bad_arguments_are_refused() {
        let any = probe(&["IMB-MPI1"]);
        assert!(any(&["--tool", "ib"]).is_err());
        assert!(any(&["--maxlog", "31"]).is_err());
        assert!(any(&["--maxlog"]).is_err());
        assert!(any(&["--tool", "IMB"]).is_err());
    }
}
