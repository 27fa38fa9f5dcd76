//! Parser for OpenFOAM solver logs (icoFoam, pisoFoam, ...), optionally with
//! `/usr/bin/time -v`, bash `time` or `time -p` output appended.
//!
//! OpenFOAM prints `ExecutionTime = X s  ClockTime = Y s` after every time
//! step: `ExecutionTime` is the process CPU time since start, `ClockTime` the
//! wall-clock time since start (whole seconds). Per-step times are the
//! differences between consecutive `ExecutionTime` lines, so the first step
//! (which also contains start-up costs) is reported separately and excluded
//! from the per-step statistics. OpenFOAM prints `ExecutionTime` with ~0.01 s
//! resolution, so per-step figures of very short steps are coarse.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::execution::parse_error::{
    ParseError, ensure_not_empty, find_marker, finite, parse_finite,
};

/// Process timing printed by `time` / `/usr/bin/time -v` after the solver.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProcessTiming {
    /// Elapsed wall-clock time in seconds (`real`).
    pub wall_seconds: f64,
    /// User CPU time in seconds (`user`).
    pub user_seconds: f64,
    /// System CPU time in seconds (`sys`).
    pub system_seconds: f64,
    /// Peak resident set size in bytes (only from `/usr/bin/time -v`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_resident_bytes: Option<u64>,
}

/// Result of one OpenFOAM solver run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OpenFOAMResult {
    /// Solver executable from the log banner (`Exec   : icoFoam`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solver: Option<String>,
    /// OpenFOAM build from the banner, e.g. `OPENFOAM=1912 patch=200626`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// Number of MPI ranks (`nProcs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u32>,
    /// True when the solver printed `End` (ran to completion).
    pub completed: bool,
    /// Number of time steps (number of `ExecutionTime` lines).
    pub time_steps: u32,
    /// Last simulated time reached (`Time = ...`), in simulation time units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_simulation_time: Option<f64>,
    /// Final `ExecutionTime`: CPU seconds used by the solver.
    pub execution_time_seconds: f64,
    /// Final `ClockTime`: wall-clock seconds (whole seconds).
    pub clock_time_seconds: f64,
    /// `ExecutionTime` of the first step (includes start-up), in seconds.
    pub first_step_execution_seconds: f64,
    /// Mean execution time per step after the first, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_execution_mean_seconds: Option<f64>,
    /// Shortest execution time of a step after the first, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_execution_min_seconds: Option<f64>,
    /// Longest execution time of a step after the first, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_execution_max_seconds: Option<f64>,
    /// Timing of the whole process, when `time` output is appended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_timing: Option<ProcessTiming>,
}

impl OpenFOAMResult {
    /// Short human summary, e.g. `0.07 s, 100 steps, 0.5 ms/step`.
    pub fn headline(&self) -> String {
        let mut s = format!(
            "{:.2} s, {} steps",
            self.execution_time_seconds, self.time_steps
        );
        if let Some(mean) = self.step_execution_mean_seconds {
            s = format!("{s}, {:.1} ms/step", mean * 1000.0);
        }
        if !self.completed {
            s = format!("{s} (incomplete)");
        }
        s
    }
}

/// `0m1.542s` / `1m2.5s` (bash) or `1.54` (`time -p`) → seconds.
fn bash_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    if let Some((m, rest)) = s.split_once('m') {
        let secs = rest.strip_suffix('s').unwrap_or(rest);
        let minutes: f64 = parse_finite(m)?;
        return finite(minutes * 60.0 + parse_finite(secs)?);
    }
    parse_finite(s.strip_suffix('s').unwrap_or(s))
}

/// `h:mm:ss` or `m:ss.ss` (GNU time) → seconds.
fn clock_duration(s: &str) -> Option<f64> {
    let mut total = 0.0;
    for part in s.trim().split(':') {
        total = total * 60.0 + parse_finite(part)?;
    }
    finite(total)
}

#[derive(Default)]
struct TimingParts {
    wall: Option<f64>,
    user: Option<f64>,
    sys: Option<f64>,
    max_rss_kib: Option<u64>,
}

/// What the shell, `time` or mpirun print when the solver is stopped by a signal or
/// crashes: the steps before it do not describe a finished run.
const INTERRUPTED_MARKERS: &[&str] = &[
    "Command terminated by signal",
    "Command exited with non-zero status",
    "mpirun noticed",
    "Segmentation fault",
    "Killed",
    "Terminated",
];

/// Parses an OpenFOAM solver log.
pub fn parse(raw: &str) -> Result<OpenFOAMResult, ParseError> {
    ensure_not_empty(raw)?;
    if let Some((line, text)) = find_marker(raw, INTERRUPTED_MARKERS) {
        return Err(ParseError::ToolReportedError(format!(
            "line {line}: {text} (the solver did not finish)"
        )));
    }
    let mut solver = None;
    let mut build = None;
    let mut processes = None;
    let mut completed = false;
    let mut started = false;
    let mut sim_time = None;
    let mut exec_times: Vec<f64> = Vec::new();
    let mut clock = 0.0;
    let mut timing = TimingParts::default();
    let lines: Vec<&str> = raw.lines().collect();

    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if t.contains("FOAM FATAL") || t.starts_with("#0  Foam::error::printStack") {
            // Message: the following non-empty lines, up to a few.
            let detail: Vec<&str> = lines
                .iter()
                .skip(i + 1)
                .map(|l| l.trim())
                .skip_while(|l| l.is_empty())
                .take_while(|l| !l.is_empty())
                .take(4)
                .collect();
            let head = t.trim_start_matches("-->").trim().trim_end_matches(':');
            return Err(ParseError::ToolReportedError(format!(
                "line {}: {head}{}{}",
                i + 1,
                if detail.is_empty() { "" } else { ": " },
                detail.join(" ")
            )));
        }
        if t.starts_with("ExecutionTime =") {
            let cut_at_eof = i + 1 == lines.len() && !raw.ends_with('\n');
            if cut_at_eof && parse_execution_line(t).is_none() {
                break; // log cut mid-line
            }
            let (e, c) = parse_execution_line(t).ok_or_else(|| ParseError::Malformed {
                line: i + 1,
                message: format!("expected 'ExecutionTime = X s  ClockTime = Y s', found {t:?}"),
            })?;
            exec_times.push(e);
            clock = c;
        } else if let Some(v) = t.strip_prefix("Exec") {
            if let Some(v) = v.trim_start().strip_prefix(':') {
                solver.get_or_insert_with(|| v.trim().to_string());
            }
        } else if let Some(v) = t.strip_prefix("Build") {
            if let Some(v) = v.trim_start().strip_prefix(':') {
                build.get_or_insert_with(|| v.trim().to_string());
            }
        } else if let Some(v) = t.strip_prefix("nProcs") {
            if let Some(v) = v.trim_start().strip_prefix(':') {
                processes = v.trim().parse().ok();
            }
        } else if t == "Starting time loop" {
            started = true;
        } else if let Some(v) = t.strip_prefix("Time = ") {
            // Newer openfoam.org versions print "Time = 0.005s".
            let v = v.trim();
            sim_time = parse_finite(v.strip_suffix('s').unwrap_or(v)).or(sim_time);
        } else if t == "End" {
            completed = true;
        } else if let Some(v) = t.strip_prefix("real") {
            timing.wall = bash_duration(v).or(timing.wall);
        } else if let Some(v) = t.strip_prefix("user") {
            timing.user = bash_duration(v).or(timing.user);
        } else if let Some(v) = t.strip_prefix("sys") {
            timing.sys = bash_duration(v).or(timing.sys);
        } else if let Some(v) = t.strip_prefix("User time (seconds):") {
            timing.user = parse_finite(v.trim()).or(timing.user);
        } else if let Some(v) = t.strip_prefix("System time (seconds):") {
            timing.sys = parse_finite(v.trim()).or(timing.sys);
        } else if t.starts_with("Elapsed (wall clock) time") {
            // "Elapsed (wall clock) time (h:mm:ss or m:ss): 0:00.11"
            if let Some(v) = t.rsplit("): ").next() {
                timing.wall = clock_duration(v).or(timing.wall);
            }
        } else if let Some(v) = t.strip_prefix("Maximum resident set size (kbytes):") {
            timing.max_rss_kib = v.trim().parse().ok();
        }
    }

    let Some((&first, &last)) = exec_times.first().zip(exec_times.last()) else {
        return Err(if started {
            ParseError::Truncated {
                what: "the solver started its time loop but no 'ExecutionTime = ...' line follows"
                    .into(),
            }
        } else {
            ParseError::NotFound {
                what: "OpenFOAM solver time steps ('ExecutionTime = X s  ClockTime = Y s' lines)"
                    .into(),
            }
        });
    };
    let steps: Vec<f64> = exec_times
        .windows(2)
        .filter_map(|w| match w {
            // ExecutionTime has ~2 decimals: round away float noise
            // (0.08 - 0.07 = 0.010000000000000009).
            [a, b] => Some(((b - a).max(0.0) * 1e6).round() / 1e6),
            _ => None,
        })
        .collect();
    let (mean, min, max) = if steps.is_empty() {
        (None, None, None)
    } else {
        (
            finite(steps.iter().sum::<f64>() / steps.len() as f64),
            steps.iter().copied().reduce(f64::min),
            steps.iter().copied().reduce(f64::max),
        )
    };
    let process_timing = match (timing.wall, timing.user, timing.sys) {
        (Some(wall), Some(user), Some(sys)) => Some(ProcessTiming {
            wall_seconds: wall,
            user_seconds: user,
            system_seconds: sys,
            max_resident_bytes: timing.max_rss_kib.map(|k| k.saturating_mul(1024)),
        }),
        _ => None,
    };

    Ok(OpenFOAMResult {
        solver,
        build,
        processes,
        completed,
        time_steps: u32::try_from(exec_times.len()).unwrap_or(u32::MAX),
        final_simulation_time: sim_time,
        execution_time_seconds: last,
        clock_time_seconds: clock,
        first_step_execution_seconds: first,
        step_execution_mean_seconds: mean,
        step_execution_min_seconds: min,
        step_execution_max_seconds: max,
        process_timing,
    })
}

/// `ExecutionTime = 0.07 s  ClockTime = 0 s` → (0.07, 0.0).
fn parse_execution_line(t: &str) -> Option<(f64, f64)> {
    let rest = t.strip_prefix("ExecutionTime =")?;
    let (exec, rest) = rest.split_once("ClockTime =")?;
    let exec = exec.trim().strip_suffix('s')?.trim();
    let clock = rest.trim().strip_suffix('s')?.trim();
    Some((parse_finite(exec)?, parse_finite(clock)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::parse_error::test_support::{
        approx, assert_round_trips, check_prefixes, corrupt, edits,
    };
    use proptest::prelude::*;

    const CAVITY: &str = include_str!("../../../testdata/openfoam/icofoam-cavity-time-v.log");
    const CAVITY80: &str =
        include_str!("../../../testdata/openfoam/icofoam-cavity80-bash-time.log");
    const FATAL: &str =
        include_str!("../../../testdata/openfoam/icofoam-missing-field-fatal-error.log");
    const ALL: &[&str] = &[CAVITY, CAVITY80, FATAL];

    #[test]
    fn cavity_with_gnu_time() {
        let r = parse(CAVITY).unwrap();
        assert_eq!(r.solver.as_deref(), Some("icoFoam"));
        assert_eq!(r.build.as_deref(), Some("OPENFOAM=1912 patch=200626"));
        assert_eq!(r.processes, Some(1));
        assert!(r.completed);
        assert_eq!(r.time_steps, 100);
        assert_eq!(r.final_simulation_time, Some(0.5));
        assert_eq!(r.execution_time_seconds, 0.08);
        assert_eq!(r.clock_time_seconds, 0.0);
        assert_eq!(r.first_step_execution_seconds, 0.01);
        approx(r.step_execution_mean_seconds.unwrap(), (0.08 - 0.01) / 99.0);
        assert_eq!(r.step_execution_min_seconds, Some(0.0));
        assert_eq!(r.step_execution_max_seconds, Some(0.01));
        assert_eq!(
            r.process_timing,
            Some(ProcessTiming {
                wall_seconds: 0.13,
                user_seconds: 0.11,
                system_seconds: 0.01,
                max_resident_bytes: Some(56032 * 1024),
            })
        );
        assert_eq!(r.headline(), "0.08 s, 100 steps, 0.7 ms/step");
        assert_round_trips(&r);
    }

    #[test]
    fn refined_cavity_with_bash_time() {
        let r = parse(CAVITY80).unwrap();
        assert_eq!(r.time_steps, 40);
        assert_eq!(r.final_simulation_time, Some(0.05));
        assert_eq!(r.execution_time_seconds, 1.5);
        assert_eq!(r.clock_time_seconds, 2.0);
        assert_eq!(r.first_step_execution_seconds, 0.06);
        approx(r.step_execution_mean_seconds.unwrap(), (1.5 - 0.06) / 39.0);
        assert_eq!(r.step_execution_min_seconds, Some(0.02));
        assert_eq!(r.step_execution_max_seconds, Some(0.06));
        assert_eq!(
            r.process_timing,
            Some(ProcessTiming {
                wall_seconds: 1.542,
                user_seconds: 1.501,
                system_seconds: 0.04,
                max_resident_bytes: None,
            })
        );
        assert_eq!(r.headline(), "1.50 s, 40 steps, 36.9 ms/step");
    }

    #[test]
    fn time_formats() {
        assert_eq!(bash_duration("\t1m2.500s"), Some(62.5));
        assert_eq!(bash_duration(" 1.54"), Some(1.54));
        assert_eq!(clock_duration("1:02:03.5"), Some(3723.5));
        assert_eq!(clock_duration("x:1"), None);
        let posix =
            format!("{CAVITY80}real 1.54\nuser 1.50\nsys 0.04\n").replace("real\t0m1.542s", "");
        assert_eq!(
            parse(&posix).unwrap().process_timing.unwrap().wall_seconds,
            1.54
        );
    }

    #[test]
    fn truncated_and_errors() {
        let cut = CAVITY80.find("Time = 0.025").unwrap();
        let r = parse(&CAVITY80[..cut]).unwrap();
        assert!(!r.completed);
        assert_eq!(r.time_steps, 19);
        assert_eq!(r.process_timing, None);
        assert!(r.headline().ends_with("(incomplete)"));
        // Cut in the middle of an ExecutionTime line: that line is ignored.
        let cut = CAVITY80.find("ExecutionTime = 0.1 s").unwrap() + 18;
        assert_eq!(parse(&CAVITY80[..cut]).unwrap().time_steps, 1);
        let cut = CAVITY80.find("ExecutionTime = 0.06").unwrap();
        assert!(matches!(
            parse(&CAVITY80[..cut]),
            Err(ParseError::Truncated { .. })
        ));
        assert!(matches!(parse("hello\n"), Err(ParseError::NotFound { .. })));
        let bad = CAVITY80.replacen("ExecutionTime = 0.1 s", "ExecutionTime = zero s", 1);
        assert!(matches!(parse(&bad), Err(ParseError::Malformed { .. })));
        let line = FATAL
            .lines()
            .position(|l| l.contains("FOAM FATAL ERROR"))
            .unwrap()
            + 1;
        assert_eq!(
            parse(FATAL).unwrap_err(),
            ParseError::ToolReportedError(format!(
                "line {line}: FOAM FATAL ERROR: cannot find file \"/tmp/cavbad/0/p\""
            ))
        );
    }

    #[test]
    fn every_prefix_is_handled() {
        for raw in ALL {
            check_prefixes(raw, parse, OpenFOAMResult::headline);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn corruption_never_panics(which in 0..ALL.len(), e in edits()) {
            let raw = corrupt(ALL[which], &e);
            if let Ok(r) = parse(&raw) {
                assert_round_trips(&r);
                let _ = r.headline();
            }
        }
    }
}
