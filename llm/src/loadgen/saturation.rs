//! Saturation search: the highest load (concurrency or request rate) at which an
//! iteration still meets the service level objectives.
//!
//! Doubling from `start` until an iteration misses the objectives (or `max` passes),
//! then bisection between the highest passing and the lowest failing load until they
//! are adjacent (concurrency) or within `precision` of each other (rates), in at most
//! `max_probes` iterations. It assumes meeting the objectives is monotone in load,
//! which is what a server's queueing makes it, up to noise near the knee.

/// The state of one search.
#[derive(Clone, Debug)]
pub struct Search {
    start: f64,
    max: f64,
    /// Loads are whole numbers (concurrency).
    integer: bool,
    /// Relative gap at which a rate search stops.
    precision: f64,
    probes_left: u32,
    highest_passing: Option<f64>,
    lowest_failing: Option<f64>,
}

impl Search {
    /// `start` ≤ `max`, both > 0; `max_probes` ≥ 1.
    pub fn new(start: f64, max: f64, integer: bool, precision: f64, max_probes: u32) -> Self {
        let round = |x: f64| if integer { x.round().max(1.0) } else { x };
        Self {
            start: round(start),
            max: round(max.max(start)),
            integer,
            precision: precision.max(1e-6),
            probes_left: max_probes,
            highest_passing: None,
            lowest_failing: None,
        }
    }

    /// The next load to probe; `None` when the search is over.
    pub fn next(&self) -> Option<f64> {
        if self.probes_left == 0 {
            return None;
        }
        match (self.highest_passing, self.lowest_failing) {
            (None, None) => Some(self.start),
            // Even the smallest load misses the objectives.
            (None, Some(_)) => None,
            (Some(pass), None) => (pass < self.max).then(|| {
                let doubled = (pass * 2.0).min(self.max);
                if self.integer {
                    doubled.round()
                } else {
                    doubled
                }
            }),
            (Some(pass), Some(fail)) => {
                let mid = if self.integer {
                    f64::midpoint(pass, fail).floor()
                } else {
                    f64::midpoint(pass, fail)
                };
                let close = if self.integer {
                    fail - pass <= 1.0
                } else {
                    fail <= pass * (1.0 + self.precision)
                };
                (!close && mid > pass && mid < fail).then_some(mid)
            }
        }
    }

    /// What the iteration at `load` showed.
    pub fn record(&mut self, load: f64, meets_slo: bool) {
        self.probes_left = self.probes_left.saturating_sub(1);
        if meets_slo {
            if self.highest_passing.is_none_or(|p| load > p) {
                self.highest_passing = Some(load);
            }
        } else if self.lowest_failing.is_none_or(|f| load < f) {
            self.lowest_failing = Some(load);
        }
    }

    /// The highest load that met the objectives so far.
    pub fn highest_passing(&self) -> Option<f64> {
        self.highest_passing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search against a server that meets the objectives up to `knee`.
    fn run(mut search: Search, knee: f64) -> (Option<f64>, Vec<f64>) {
        let mut probes = Vec::new();
        while let Some(load) = search.next() {
            probes.push(load);
            search.record(load, load <= knee);
            assert!(probes.len() < 100, "runaway search: {probes:?}");
        }
        (search.highest_passing(), probes)
    }

    #[test]
    fn concurrency_doubles_then_bisects_to_the_knee() {
        let (found, probes) = run(Search::new(1.0, 1024.0, true, 0.0, 20), 37.0);
        assert_eq!(found, Some(37.0));
        assert_eq!(
            probes,
            [
                1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 48.0, 40.0, 36.0, 38.0, 37.0
            ]
        );
    }

    #[test]
    fn rates_stop_within_the_precision() {
        let (found, probes) = run(Search::new(2.0, 1000.0, false, 0.05, 30), 83.3);
        let found = found.expect("a passing rate");
        assert!((83.3 / 1.05..=83.3).contains(&found), "{found} {probes:?}");
    }

    #[test]
    fn the_probe_budget_bounds_the_search_and_keeps_the_best_so_far() {
        let (found, probes) = run(Search::new(1.0, 1024.0, true, 0.0, 5), 37.0);
        assert_eq!(probes.len(), 5);
        assert_eq!(found, Some(16.0));
    }

    #[test]
    fn failing_at_the_start_or_passing_at_the_max_ends_the_search() {
        assert_eq!(
            run(Search::new(4.0, 64.0, true, 0.0, 10), 2.0),
            (None, vec![4.0])
        );
        let (found, probes) = run(Search::new(4.0, 50.0, true, 0.0, 10), 1000.0);
        assert_eq!(found, Some(50.0));
        assert_eq!(probes, [4.0, 8.0, 16.0, 32.0, 50.0]);
    }
}
