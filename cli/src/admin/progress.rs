//! Progress on stderr: a bar when stderr is a terminal, a plain line now and then when it
//! is a file or a pipe (where a bar's redraws would be noise).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Plain lines at most this often.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    what: &'static str,
    done: AtomicU64,
    total: Option<u64>,
    last: std::sync::Mutex<Instant>,
}

impl Progress {
    /// Progress over `total` items (unknown when `None`) called `what`.
    pub fn new(what: &'static str, total: Option<u64>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match total {
                Some(n) => ProgressBar::new(n),
                None => ProgressBar::new_spinner(),
            };
            let template = match total {
                Some(_) => "{msg} {wide_bar} {pos}/{len} ({eta})",
                None => "{msg} {spinner} {pos}",
            };
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style);
            }
            bar.set_message(what);
            bar
        });
        Self {
            bar,
            what,
            done: AtomicU64::new(0),
            total,
            last: std::sync::Mutex::new(Instant::now()),
        }
    }

    pub fn inc(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        match &self.bar {
            Some(bar) => bar.inc(n),
            None => {
                let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() >= PLAIN_EVERY {
                    *last = Instant::now();
                    match self.total {
                        Some(total) => eprintln!("{}: {done}/{total}", self.what),
                        None => eprintln!("{}: {done}", self.what),
                    }
                }
            }
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
