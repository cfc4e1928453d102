//! Latency samples and their percentiles.

use std::time::{Duration, Instant};

/// Wall-clock samples of one measured operation.
#[derive(Debug, Default, Clone)]
pub struct Samples(Vec<Duration>);

impl Samples {
    pub fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.0.push(start.elapsed());
        out
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn push(&mut self, d: Duration) {
        self.0.push(d);
    }

    pub fn extend(&mut self, other: &Samples) {
        self.0.extend_from_slice(&other.0);
    }

    /// The `p`-th percentile (0-100), in milliseconds.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
        sorted[rank].as_secs_f64() * 1e3
    }

    pub fn p50(&self) -> f64 {
        self.percentile_ms(50.0)
    }

    pub fn p95(&self) -> f64 {
        self.percentile_ms(95.0)
    }

    pub fn min_ms(&self) -> f64 {
        self.0
            .iter()
            .min()
            .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
    }
}

/// Resident set size of this process, in bytes (Linux; 0 elsewhere).
pub fn rss_bytes() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}
