//! Open-loop arrival schedules: when each request of an iteration is due.
//!
//! Intervals between arrivals are drawn up front from a seeded generator, so one seed
//! gives the same schedule every run, whatever the server does. The load generator
//! measures latency from these scheduled times, not from when it managed to send:
//! a client that falls behind (or a full concurrency cap) then shows up as latency
//! and as schedule lag instead of quietly lowering the offered load (coordinated
//! omission).
//!
//! - `constant`: every interval is exactly 1 / rate;
//! - `poisson`: exponential intervals with mean 1 / rate (coefficient of variation 1);
//! - `gamma`: gamma intervals with shape = burstiness and mean 1 / rate, as vLLM's
//!   `--burstiness`: burstiness 1 is Poisson, below 1 burstier, above 1 more regular
//!   (coefficient of variation 1 / √burstiness).

use std::time::Duration;

use crate::rng::Rng;

/// How arrivals are spread in time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrivals {
    Constant,
    Poisson,
    /// Gamma intervals with this shape (the burstiness factor), > 0.
    Gamma(f64),
}

/// An endless sequence of arrival offsets from the start of an iteration.
#[derive(Clone, Debug)]
pub struct Schedule {
    arrivals: Arrivals,
    mean_interval: f64,
    rng: Rng,
    /// Seconds since the start of the next arrival.
    next: f64,
    /// A replayed trace's offsets, and the index of the next one and the step between
    /// them (a lane of the open loop takes every `step`th request).
    replay: Option<(std::sync::Arc<[Duration]>, usize, usize)>,
}

impl Schedule {
    /// Arrivals at `rate` per second (> 0); the first is due at once.
    pub fn new(arrivals: Arrivals, rate: f64, seed: u64) -> Self {
        Self {
            arrivals,
            mean_interval: 1.0 / rate,
            rng: Rng::derive(seed, 0x5C4E_D01E),
            next: 0.0,
            replay: None,
        }
    }

    /// A trace's own schedule: requests `first`, `first + step`, ... of `offsets`;
    /// past the end, the last offset.
    pub fn replay(offsets: std::sync::Arc<[Duration]>, first: usize, step: usize) -> Self {
        Self {
            replay: Some((offsets, first, step.max(1))),
            ..Self::new(Arrivals::Constant, 1.0, 0)
        }
    }

    /// The offset of the next arrival from the iteration's start.
    pub fn next_offset(&mut self) -> Duration {
        if let Some((offsets, next, step)) = &mut self.replay {
            let due = offsets
                .get(*next)
                .or(offsets.last())
                .copied()
                .unwrap_or_default();
            *next += *step;
            return due;
        }
        let due = self.next;
        self.next += self.interval();
        Duration::from_secs_f64(due.min(1e9))
    }

    fn interval(&mut self) -> f64 {
        match self.arrivals {
            Arrivals::Constant => self.mean_interval,
            Arrivals::Poisson => self.rng.exponential(self.mean_interval),
            Arrivals::Gamma(shape) => gamma(&mut self.rng, shape) * self.mean_interval / shape,
        }
    }
}

/// A gamma(shape, 1) draw: Marsaglia and Tsang's method, boosted for shape < 1.
fn gamma(rng: &mut Rng, shape: f64) -> f64 {
    if shape < 1.0 {
        let u = 1.0 - rng.unit(); // (0, 1]
        return gamma(rng, shape + 1.0) * u.powf(1.0 / shape);
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = rng.normal();
        let v = 1.0 + c * x;
        if v <= 0.0 {
            continue;
        }
        let v = v * v * v;
        let u = 1.0 - rng.unit();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Mean and coefficient of variation of `n` intervals, seconds.
    fn moments(arrivals: Arrivals, rate: f64, n: usize) -> (f64, f64) {
        let mut schedule = Schedule::new(arrivals, rate, 11);
        let offsets: Vec<f64> = (0..=n)
            .map(|_| schedule.next_offset().as_secs_f64())
            .collect();
        let intervals: Vec<f64> = offsets.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = intervals.iter().sum::<f64>() / n as f64;
        let variance = intervals.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        (mean, variance.sqrt() / mean)
    }

    #[test]
    fn constant_arrivals_are_evenly_spaced_from_zero() {
        let mut schedule = Schedule::new(Arrivals::Constant, 4.0, 1);
        let offsets: Vec<Duration> = (0..4).map(|_| schedule.next_offset()).collect();
        assert_eq!(
            offsets,
            [0, 250, 500, 750].map(Duration::from_millis).to_vec()
        );
    }

    #[test]
    fn poisson_has_the_mean_rate_and_unit_cv() {
        let (mean, cv) = moments(Arrivals::Poisson, 50.0, 100_000);
        assert!((mean - 0.02).abs() < 0.0003, "mean interval {mean}");
        assert!((cv - 1.0).abs() < 0.02, "CV {cv}");
    }

    #[test]
    fn gamma_cv_is_one_over_root_shape_at_the_same_mean() {
        for shape in [0.25, 0.5, 1.0, 4.0, 16.0] {
            let (mean, cv) = moments(Arrivals::Gamma(shape), 10.0, 100_000);
            assert!(
                (mean - 0.1).abs() < 0.1 * 0.02,
                "shape {shape}: mean interval {mean}"
            );
            let expected = 1.0 / f64::sqrt(shape);
            assert!(
                (cv - expected).abs() < 0.04 * expected,
                "shape {shape}: CV {cv}, expected {expected}"
            );
        }
    }

    #[test]
    fn a_seed_gives_the_same_schedule() {
        let draw = |seed| {
            let mut s = Schedule::new(Arrivals::Gamma(0.5), 100.0, seed);
            (0..50).map(|_| s.next_offset()).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
    }
}
