//! What an HPCC rank runs (`perfsweep mpi-tool hpcc …`): `hpcc` in its worker's
//! directory, rank 0 first writing `hpccinf.txt` with the problem the spec gave or one
//! sized from what the rank finds (memory, ranks), and printing `hpccoutf.txt` when hpcc
//! has finished (hpcc writes its results there, on the worker).
//!
//! The sizing follows HPL's own tuning advice (HPL's TUNING, hpcc's README): the matrix
//! of N×N doubles takes a fraction of the memory of every node of the run; N is a
//! multiple of NB; the P×Q grid is as square as the ranks allow, with P ≤ Q.

use super::RankArgs;
use crate::execution::plan::PlanFile;
use crate::kinds::mpi::{Invocation, RankProbe};

/// The program.
pub const PROGRAM: &str = "hpcc";
/// The input file hpcc reads from its working directory.
pub const INPUT: &str = "hpccinf.txt";
/// The output file hpcc appends to in its working directory.
pub const OUTPUT: &str = "hpccoutf.txt";
/// The line rank 0 prints before the output file.
pub const PREAMBLE: &str = "# perfsweep: hpcc's hpccoutf.txt follows";

/// The block size when the spec gives none: HPL's tuning advice is 32–256 and larger
/// for optimized BLAS; 192 suits OpenBLAS on current CPUs, and small problems (tests)
/// take HPCC's example's 80 so that N spans a few blocks.
pub fn default_nb(n: u64) -> u64 {
    if n < 4000 { 80 } else { 192 }
}

/// N from memory: the largest multiple of `nb` whose N×N matrix of doubles fits in
/// `fraction` of `total_memory_bytes`, at least one block.
pub fn n_for_memory(total_memory_bytes: u64, fraction: f64, nb: u64) -> u64 {
    let doubles = total_memory_bytes as f64 * fraction / 8.0;
    let n = doubles.sqrt().floor() as u64;
    (n / nb * nb).max(nb)
}

/// The squarest grid of `ranks`: P the largest divisor at most √ranks, Q = ranks / P.
pub fn grid(ranks: u32) -> (u32, u32) {
    let ranks = ranks.max(1);
    let p = (1..=ranks)
        .take_while(|p| p * p <= ranks)
        .filter(|p| ranks.is_multiple_of(*p))
        .last()
        .unwrap_or(1);
    (p, ranks / p)
}

/// The problem a run solves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Problem {
    pub n: u64,
    pub nb: u64,
    pub p: u32,
    pub q: u32,
}

/// The problem of `args` on the ranks `probe` describes; an error says what does not fit.
pub fn problem(args: &RankArgs, probe: &RankProbe<'_>) -> Result<Problem, String> {
    let ranks = probe.world_size.max(1);
    let (p, q) = match (args.p, args.q) {
        (Some(p), Some(q)) if p * q == ranks => (p, q),
        (Some(p), Some(q)) => {
            return Err(format!(
                "the process grid P×Q = {p}×{q} = {} does not match the {ranks} ranks the run has",
                p * q
            ));
        }
        _ => grid(ranks),
    };
    // Nodes of the run: ranks are spread evenly (the hostfile gives every worker the same
    // slots), so this node's share of them tells how many nodes there are.
    let nodes = u64::from(ranks.div_ceil(probe.local_size.max(1)));
    let (n, nb) = match (args.n, args.nb) {
        (Some(n), nb) => (n, nb.unwrap_or_else(|| default_nb(n))),
        (None, nb) => {
            let nb = nb.unwrap_or(192);
            (
                n_for_memory(
                    probe.memory_bytes.saturating_mul(nodes),
                    args.memory_fraction,
                    nb,
                ),
                nb,
            )
        }
    };
    Ok(Problem { n, nb, p, q })
}

/// `hpccinf.txt` for a problem: HPL's settings as in hpcc's example input
/// (`_hpccinf.txt`), with one N, NB and grid.
pub fn input_file(problem: Problem) -> String {
    let Problem { n, nb, p, q } = problem;
    format!(
        "HPLinpack benchmark input file\n\
         Innovative Computing Laboratory, University of Tennessee\n\
         HPL.out      output file name (if any)\n\
         8            device out (6=stdout,7=stderr,file)\n\
         1            # of problems sizes (N)\n\
         {n}         Ns\n\
         1            # of NBs\n\
         {nb}           NBs\n\
         0            PMAP process mapping (0=Row-,1=Column-major)\n\
         1            # of process grids (P x Q)\n\
         {p}            Ps\n\
         {q}            Qs\n\
         16.0         threshold\n\
         1            # of panel fact\n\
         2            PFACTs (0=left, 1=Crout, 2=Right)\n\
         1            # of recursive stopping criterium\n\
         4            NBMINs (>= 1)\n\
         1            # of panels in recursion\n\
         2            NDIVs\n\
         1            # of recursive panel fact.\n\
         1            RFACTs (0=left, 1=Crout, 2=Right)\n\
         1            # of broadcast\n\
         1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)\n\
         1            # of lookahead depth\n\
         1            DEPTHs (>=0)\n\
         2            SWAP (0=bin-exch,1=long,2=mix)\n\
         64           swapping threshold\n\
         0            L1 in (0=transposed,1=no-transposed) form\n\
         0            U  in (0=transposed,1=no-transposed) form\n\
         1            Equilibration (0=no,1=yes)\n\
         8            memory alignment in double (> 0)\n\
         ##### This line (no. 32) is ignored (it serves as a separator). ######\n\
         0                      \t\tNumber of additional problem sizes for PTRANS\n\
         1200 10000 30000        \tvalues of N\n\
         0                       \tnumber of additional blocking sizes for PTRANS\n\
         40 9 8 13 13 20 16 32 64       \tvalues of NB\n"
    )
}

/// The rank's invocation.
pub fn invocation(args: &[String], probe: &RankProbe<'_>) -> Result<Invocation, String> {
    let args = RankArgs::from_args(args)?;
    let mut invocation = Invocation::of(PROGRAM, []);
    if probe.rank == 0 {
        let problem = problem(&args, probe)?;
        invocation.input_files = vec![PlanFile {
            path: INPUT.into(),
            contents: input_file(problem),
        }];
        invocation.preamble = vec![PREAMBLE.into()];
        invocation.output_files = vec![OUTPUT.into()];
    }
    Ok(invocation)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(rank: u32, world_size: u32, local_size: u32, memory_bytes: u64) -> RankProbe<'static> {
        RankProbe {
            rank,
            world_size,
            local_size,
            memory_bytes,
            has_program: &|_| true,
        }
    }

    fn args(text: &[&str]) -> RankArgs {
        RankArgs::from_args(&text.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>())
            .expect("valid")
    }

    #[test]
    fn the_grid_is_as_square_as_the_ranks_allow() {
        assert_eq!(grid(1), (1, 1));
        assert_eq!(grid(2), (1, 2));
        assert_eq!(grid(4), (2, 2));
        assert_eq!(grid(6), (2, 3));
        assert_eq!(grid(7), (1, 7));
        assert_eq!(grid(64), (8, 8));
        assert_eq!(grid(96), (8, 12));
    }

    #[test]
    fn n_fills_the_fraction_of_every_nodes_memory_in_whole_blocks() {
        // 16 GiB at 0.5: 8 GiB of doubles, √(2^30) = 32768 = 170 blocks of 192 + 128.
        assert_eq!(n_for_memory(16 << 30, 0.5, 192), 32640);
        let matrix = 32640u64 * 32640 * 8;
        assert!(matrix <= 8 << 30 && (32640u64 + 192) * (32640 + 192) * 8 > 8 << 30);
        // Eight ranks on two nodes of 16 GiB each: twice the memory.
        let problem = problem(
            &args(&["--memory-fraction", "0.5"]),
            &probe(0, 8, 4, 16 << 30),
        )
        .expect("fits");
        assert_eq!(problem.n, n_for_memory(32 << 30, 0.5, 192));
        assert_eq!((problem.p, problem.q), (2, 4));
        // Tiny memory still gives one block.
        assert_eq!(n_for_memory(1024, 0.5, 192), 192);
    }

    #[test]
    fn given_sizes_win_and_a_grid_must_match_the_ranks() {
        let given = problem(
            &args(&["--n", "1000", "--p", "1", "--q", "2"]),
            &probe(0, 2, 2, 1 << 30),
        )
        .expect("fits");
        assert_eq!(
            given,
            Problem {
                n: 1000,
                nb: 80,
                p: 1,
                q: 2
            }
        );
        assert_eq!(
            problem(
                &args(&["--n", "1000", "--p", "2", "--q", "2"]),
                &probe(0, 2, 2, 1 << 30)
            ),
            Err("the process grid P×Q = 2×2 = 4 does not match the 2 ranks the run has".into())
        );
    }

    #[test]
    fn rank_zero_writes_the_input_and_prints_the_output_others_only_run() {
        let args: Vec<String> = ["--n", "1000", "--nb", "100"].map(str::to_owned).to_vec();
        let first = invocation(&args, &probe(0, 4, 4, 1 << 30)).expect("runs");
        assert_eq!(first.program, "hpcc");
        assert_eq!(first.output_files, [OUTPUT]);
        let input = &first.input_files[0].contents;
        assert_eq!(first.input_files[0].path, INPUT);
        let line = |i: usize| {
            input
                .lines()
                .nth(i)
                .unwrap_or_default()
                .split_whitespace()
                .next()
        };
        // hpcc reads N, NB, P and Q from lines 6, 8, 11 and 12.
        assert_eq!(
            [line(5), line(7), line(10), line(11)],
            [Some("1000"), Some("100"), Some("2"), Some("2")]
        );
        assert_eq!(input.lines().count(), 36);
        let other = invocation(&args, &probe(3, 4, 4, 1 << 30)).expect("runs");
        assert!(other.input_files.is_empty() && other.output_files.is_empty());
    }
}
