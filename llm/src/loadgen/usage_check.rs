//! Server-reported token counts against the run's tokenizer: how often they differ and
//! by what ratio, per iteration. Chat templates and a BOS token make the server's input
//! count a few tokens higher than the prompt's; a different tokenizer shows as a ratio
//! away from 1.

use crate::report::result::{CountCheck, UsageCheck};

/// One direction's comparisons.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    compared: u64,
    mismatched: u64,
    ratio_sum: f64,
}

impl Tally {
    /// Compares the server's count with the tokenizer's (ignored when the tokenizer
    /// counted nothing: no ratio).
    pub fn add(&mut self, server: u64, tokenizer: u64) {
        if tokenizer == 0 {
            return;
        }
        self.compared += 1;
        if server != tokenizer {
            self.mismatched += 1;
        }
        self.ratio_sum += server as f64 / tokenizer as f64;
    }

    pub fn merge(&mut self, other: &Tally) {
        self.compared += other.compared;
        self.mismatched += other.mismatched;
        self.ratio_sum += other.ratio_sum;
    }

    fn report(&self) -> Option<CountCheck> {
        (self.compared > 0).then(|| CountCheck {
            compared: self.compared,
            mismatched_percent: 100.0 * self.mismatched as f64 / self.compared as f64,
            mean_ratio: self.ratio_sum / self.compared as f64,
        })
    }
}

/// Input and output comparisons of an iteration.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UsageTallies {
    pub input: Tally,
    pub output: Tally,
}

impl UsageTallies {
    pub fn merge(&mut self, other: &UsageTallies) {
        self.input.merge(&other.input);
        self.output.merge(&other.output);
    }

    /// The iteration's report, when anything was compared.
    pub fn report(&self) -> Option<UsageCheck> {
        let (input, output) = (self.input.report(), self.output.report());
        (input.is_some() || output.is_some()).then_some(UsageCheck { input, output })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mismatches_and_ratios_are_reported() {
        let mut tallies = UsageTallies::default();
        assert_eq!(tallies.report(), None);
        tallies.input.add(110, 100);
        tallies.input.add(100, 100);
        tallies.input.add(5, 0);
        let mut other = UsageTallies::default();
        other.output.add(64, 64);
        tallies.merge(&other);
        let report = tallies.report().expect("compared");
        let input = report.input.expect("input compared");
        assert_eq!(input.compared, 2);
        assert!((input.mismatched_percent - 50.0).abs() < 1e-9);
        assert!((input.mean_ratio - 1.05).abs() < 1e-9);
        let output = report.output.expect("output compared");
        assert_eq!(
            (
                output.compared,
                output.mismatched_percent,
                output.mean_ratio
            ),
            (1, 0.0, 1.0)
        );
    }
}
