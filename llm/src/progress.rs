//! Progress lines: how a long-running tool tells the user (and the controller) where it
//! is, for example `iteration 2/6: D(100,100) concurrency 8`.
//!
//! A tool prints `perfsweep-progress: <text>` lines on standard error; the agent's
//! output carries them into the pod log, where the controller reads the latest into
//! `status.progress` on the reconciles it does anyway, and the local backend echoes them
//! as they arrive.

/// What starts a progress line.
pub const PREFIX: &str = "perfsweep-progress: ";

/// Longest progress text kept (status fields are for humans, not logs).
pub const MAX_CHARS: usize = 200;

/// The progress line for `text`.
pub fn line(text: &str) -> String {
    format!("{PREFIX}{text}")
}

/// The text of `line` if it is a progress line, bounded to [`MAX_CHARS`].
pub fn parse(line: &str) -> Option<String> {
    // A pod log may prefix timestamps; the marker may follow them.
    let at = line.find(PREFIX)?;
    let text = line[at + PREFIX.len()..].trim();
    (!text.is_empty()).then(|| text.chars().take(MAX_CHARS).collect())
}

/// The latest progress text in `log`.
pub fn latest(log: &str) -> Option<String> {
    log.lines().rev().find_map(parse)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_progress_line_wins_and_is_bounded() {
        let log = format!(
            "starting\n{}\nnoise\n{}\n{PREFIX}\n",
            line("iteration 1/3: concurrency 1"),
            line("iteration 2/3: concurrency 2: 40 requests")
        );
        assert_eq!(
            latest(&log).as_deref(),
            Some("iteration 2/3: concurrency 2: 40 requests")
        );
        assert_eq!(latest("no progress here"), None);
        let long = line(&"x".repeat(1000));
        assert_eq!(parse(&long).map(|t| t.len()), Some(MAX_CHARS));
        assert_eq!(
            parse(&format!("2026-11-22T02:00:00Z {}", line("a"))).as_deref(),
            Some("a")
        );
    }
}
