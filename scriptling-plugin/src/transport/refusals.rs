//! [`Refusals`]: what a server does when accepting a connection fails.

use std::time::{Duration, Instant};

/// Accept failures: backs off while they last (running out of file
/// handles fails every accept at once, so retrying at once would spin),
/// and reports them at most about once a second.
#[derive(Default)]
pub(crate) struct Refusals {
    backoff: Duration,
    last_report: Option<Instant>,
    unreported: u64,
}

impl Refusals {
    const FIRST: Duration = Duration::from_millis(5);
    const MOST: Duration = Duration::from_millis(500);
    const REPORT_EVERY: Duration = Duration::from_secs(1);

    /// Notes a failure (reporting it, or counting it for the next report)
    /// and returns how long to wait before accepting again.
    pub(crate) fn failed(&mut self, error: &std::io::Error) -> Duration {
        self.unreported += 1;
        if self.last_report.is_none_or(|at| at.elapsed() >= Self::REPORT_EVERY) {
            let times = if self.unreported == 1 { String::new() } else { format!(" ({} times)", self.unreported) };
            eprintln!("scriptling-plugin: accepting a connection failed{times}: {error}; backing off");
            self.last_report = Some(Instant::now());
            self.unreported = 0;
        }
        self.backoff = (self.backoff * 2).clamp(Self::FIRST, Self::MOST);
        self.backoff
    }

    /// An accept succeeded: the next failure starts from the shortest wait.
    pub(crate) fn recovered(&mut self) {
        self.backoff = Duration::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_failures_back_off_and_recover() {
        let mut refusals = Refusals::default();
        let error = std::io::Error::from_raw_os_error(24);
        let waits: Vec<Duration> = (0..10).map(|_| refusals.failed(&error)).collect();
        // 5 + 10 + ... + 500 ms: far from a spin, never more than half a second apart.
        assert_eq!(waits[0], Refusals::FIRST);
        assert!(waits.iter().sum::<Duration>() >= Duration::from_millis(1000), "{waits:?}");
        assert_eq!(*waits.last().unwrap(), Refusals::MOST);
        refusals.recovered();
        assert_eq!(refusals.failed(&error), Refusals::FIRST);
    }
}
