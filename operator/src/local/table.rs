//! The results table printed at the end of a run.

/// One row: a run's name, what varied, its repetition, result, acceptance verdict and
/// duration.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub name: String,
    pub permutation: String,
    pub repetition: String,
    pub result: String,
    /// `accepted`, `REJECTED`, `no result` (failed, had criteria) or `-` (no criteria).
    pub verdict: String,
    pub seconds: f64,
}

/// Renders rows as an aligned plain-text table.
pub fn render(rows: &[Row]) -> String {
    let header = [
        "BENCHMARK",
        "PERMUTATION",
        "REP",
        "RESULT",
        "VERDICT",
        "TIME",
    ];
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.name.clone(),
                r.permutation.clone(),
                r.repetition.clone(),
                r.result.clone(),
                r.verdict.clone(),
                format!("{:.1}s", r.seconds),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 6]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut out = line(header);
    out.push('\n');
    for row in &cells {
        out.push_str(&line([
            &row[0], &row[1], &row[2], &row[3], &row[4], &row[5],
        ]));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align() {
        let rows = vec![
            Row {
                name: "a".into(),
                permutation: "streams=1".into(),
                repetition: "0".into(),
                result: "9.41 Gbit/s".into(),
                verdict: "accepted".into(),
                seconds: 10.04,
            },
            Row {
                name: "longer-name".into(),
                permutation: "streams=16".into(),
                repetition: "1".into(),
                result: "FAILED".into(),
                verdict: "no result".into(),
                seconds: 1.0,
            },
        ];
        let text = render(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        let result_column = lines[0].find("RESULT").unwrap();
        assert_eq!(lines[1].find("9.41").unwrap(), result_column);
        assert_eq!(lines[2].find("FAILED").unwrap(), result_column);
        let verdict_column = lines[0].find("VERDICT").unwrap();
        assert_eq!(lines[1].find("accepted").unwrap(), verdict_column);
        assert_eq!(lines[2].find("no result").unwrap(), verdict_column);
        assert!(lines[1].ends_with("10.0s"));
    }
}
