//! Where reads may go besides the primary: the hot standbys of `CORTEX_DATABASE_READ_URL`,
//! how long a read waits for one to replay its user's own last write
//! (`CORTEX_PG_READ_WAIT_MS`), and how far behind one may fall before it is skipped
//! (`CORTEX_PG_REPLICA_MAX_LAG_MS`).

use std::fmt;
use std::time::Duration;

use cortex_core::error::StoreError;

use crate::redact::redact_url;

/// How long a read waits for its replica to replay the user's own last write before it
/// reads from the primary instead. A healthy streaming standby replays a commit within a
/// few milliseconds of the primary flushing it; one that has not in 200 ms is held up (a
/// replay conflict with a long standby query, a burst of WAL, a slow disk), and the
/// primary answers a read in a few milliseconds: waiting longer costs the user more than
/// it saves the primary. It is about one hosted embedding call, which a recall makes
/// anyway.
pub const DEFAULT_READ_WAIT: Duration = Duration::from_millis(200);

/// A replica further behind the primary than this is skipped until it catches up. A
/// healthy one is milliseconds behind; a second means it is stalled, and bounds how stale
/// a read may be for writes this process did not make (another server's). Above the read
/// wait, so that a replica merely slow to replay a burst is waited for, not dropped.
pub const DEFAULT_MAX_LAG: Duration = Duration::from_secs(1);

/// How often the prober reads the primary's WAL position and each replica's replay
/// position: the lag is known to within this, and a down replica is noticed within this
/// plus [`DEFAULT_PROBE_TIMEOUT`].
pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_millis(500);

/// A replica that does not answer the prober's one-row query in this long is down: a
/// healthy server answers it in well under a millisecond.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The longest `CORTEX_PG_READ_WAIT_MS` and `CORTEX_PG_REPLICA_MAX_LAG_MS` (a minute): a
/// longer wait is no better than reading from the primary, a longer lag no bound at all.
const MAX_MILLIS: u64 = 60_000;

/// Hot standbys that serve reads (none by default: every read goes to the primary).
/// `Debug` redacts the URLs' passwords.
#[derive(Clone, PartialEq, Eq)]
pub struct ReadReplicas {
    /// One URL per standby (`postgres://...`, or libpq key=value text when there is one).
    pub urls: Vec<String>,
    /// How long a read waits for the replica it goes to to replay its user's last write
    /// made through this handle; past it the read goes to the primary. Zero checks once.
    pub read_wait: Duration,
    /// A replica whose replay is further behind the primary than this is skipped.
    pub max_lag: Duration,
    /// How often the prober measures the lag and checks the replicas are up.
    pub probe_interval: Duration,
    /// How long a probe may take before the replica it asked counts as down.
    pub probe_timeout: Duration,
}

impl Default for ReadReplicas {
    fn default() -> Self {
        Self {
            urls: Vec::new(),
            read_wait: DEFAULT_READ_WAIT,
            max_lag: DEFAULT_MAX_LAG,
            probe_interval: DEFAULT_PROBE_INTERVAL,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
        }
    }
}

impl fmt::Debug for ReadReplicas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self.urls.iter().map(|u| redact_url(u)).collect();
        f.debug_struct("ReadReplicas")
            .field("urls", &urls)
            .field("read_wait", &self.read_wait)
            .field("max_lag", &self.max_lag)
            .field("probe_interval", &self.probe_interval)
            .field("probe_timeout", &self.probe_timeout)
            .finish()
    }
}

impl ReadReplicas {
    /// The standbys of `urls` (see [`split_urls`]) with the default bounds.
    pub fn new(urls: &str) -> Self {
        Self {
            urls: split_urls(urls),
            ..Self::default()
        }
    }

    /// Whether there is no replica: every read goes to the primary.
    pub fn is_empty(&self) -> bool {
        self.urls.is_empty()
    }

    /// `CORTEX_DATABASE_READ_URL`, `CORTEX_PG_READ_WAIT_MS` and
    /// `CORTEX_PG_REPLICA_MAX_LAG_MS` through `get` (as
    /// [`PostgresConfig::from_lookup`](crate::PostgresConfig::from_lookup) reads the rest);
    /// each URL is checked as connecting would, without connecting.
    pub(crate) fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, StoreError> {
        let mut replicas = match get("CORTEX_DATABASE_READ_URL") {
            Some(urls) => Self::new(&urls),
            None => Self::default(),
        };
        for url in &replicas.urls {
            crate::tls::parse_named(url, "CORTEX_DATABASE_READ_URL")?;
        }
        if let Some(ms) = get("CORTEX_PG_READ_WAIT_MS").filter(|v| !v.trim().is_empty()) {
            replicas.read_wait = millis("CORTEX_PG_READ_WAIT_MS", &ms)?;
        }
        if let Some(ms) = get("CORTEX_PG_REPLICA_MAX_LAG_MS").filter(|v| !v.trim().is_empty()) {
            replicas.max_lag = millis("CORTEX_PG_REPLICA_MAX_LAG_MS", &ms)?;
            if replicas.max_lag.is_zero() {
                return Err(StoreError::Config(
                    "CORTEX_PG_REPLICA_MAX_LAG_MS must be at least 1".into(),
                ));
            }
        }
        Ok(replicas)
    }
}

/// The standbys' URLs in `value`: `postgres://` (or `postgresql://`) URLs separated by
/// commas, blanks around them ignored. A comma inside a URL stays in it (libpq's
/// multi-host form, `postgres://h1,h2/db`): a new URL starts only where a scheme does.
/// Text without a scheme is one entry (libpq key=value settings name one server).
pub fn split_urls(value: &str) -> Vec<String> {
    // A stray comma at either end separates nothing.
    let value = value.trim().trim_matches(',').trim();
    if value.is_empty() {
        return Vec::new();
    }
    let mut starts: Vec<usize> = Vec::new();
    for (i, _) in value.match_indices(',') {
        let rest = value[i + 1..].trim_start();
        if rest.starts_with("postgres://") || rest.starts_with("postgresql://") {
            starts.push(i);
        }
    }
    let mut urls = Vec::with_capacity(starts.len() + 1);
    let mut from = 0;
    for comma in starts {
        urls.push(value[from..comma].trim().to_owned());
        from = comma + 1;
    }
    urls.push(value[from..].trim().to_owned());
    urls.retain(|u| !u.is_empty());
    urls
}

fn millis(variable: &str, value: &str) -> Result<Duration, StoreError> {
    let ms: u64 = value.trim().parse().map_err(|_| {
        StoreError::Config(format!(
            "{variable} must be a whole number of milliseconds; got {value:?}"
        ))
    })?;
    if ms > MAX_MILLIS {
        return Err(StoreError::Config(format!(
            "{variable} must be at most {MAX_MILLIS} (a minute); got {ms}"
        )));
    }
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(vars: &[(&str, &str)]) -> Result<ReadReplicas, StoreError> {
        let vars: HashMap<&str, &str> = vars.iter().copied().collect();
        ReadReplicas::from_lookup(|k| vars.get(k).map(|v| (*v).to_owned()))
    }

    #[test]
    fn urls_split_where_a_url_begins() {
        assert!(split_urls("").is_empty());
        assert!(split_urls("  ").is_empty());
        assert_eq!(split_urls("postgres://u@a/db"), ["postgres://u@a/db"]);
        assert_eq!(
            split_urls(" postgres://u@a/db , postgresql://u:p@b:5433/db?sslmode=disable "),
            [
                "postgres://u@a/db",
                "postgresql://u:p@b:5433/db?sslmode=disable"
            ]
        );
        // libpq's multi-host URL is one entry; so is key=value text.
        assert_eq!(
            split_urls("postgres://u@a,b/db,postgres://u@c/db"),
            ["postgres://u@a,b/db", "postgres://u@c/db"]
        );
        assert_eq!(
            split_urls("host=a,b dbname=db user=u"),
            ["host=a,b dbname=db user=u"]
        );
        assert_eq!(split_urls("postgres://u@a/db, "), ["postgres://u@a/db"]);
    }

    #[test]
    fn the_settings_are_read_and_checked() {
        let none = read(&[]).unwrap();
        assert!(none.is_empty());
        assert_eq!(none.read_wait, DEFAULT_READ_WAIT);
        assert_eq!(none.max_lag, DEFAULT_MAX_LAG);
        let set = read(&[
            (
                "CORTEX_DATABASE_READ_URL",
                "postgres://u:s3cret@r1/db,postgres://u:s3cret@r2/db",
            ),
            ("CORTEX_PG_READ_WAIT_MS", "0"),
            ("CORTEX_PG_REPLICA_MAX_LAG_MS", "2500"),
        ])
        .unwrap();
        assert_eq!(set.urls.len(), 2);
        assert_eq!(set.read_wait, Duration::ZERO);
        assert_eq!(set.max_lag, Duration::from_millis(2500));
        let shown = format!("{set:?}");
        assert!(
            !shown.contains("s3cret") && shown.contains("***"),
            "{shown}"
        );
        let bad = |vars: &[(&str, &str)]| read(vars).unwrap_err().to_string();
        assert!(bad(&[("CORTEX_PG_READ_WAIT_MS", "soon")]).contains("CORTEX_PG_READ_WAIT_MS"));
        assert!(bad(&[("CORTEX_PG_READ_WAIT_MS", "60001")]).contains("at most 60000"));
        assert!(bad(&[("CORTEX_PG_REPLICA_MAX_LAG_MS", "0")]).contains("at least 1"));
        let wrong = bad(&[("CORTEX_DATABASE_READ_URL", "mysql://u:s3cret@r/db")]);
        assert!(wrong.contains("CORTEX_DATABASE_READ_URL"), "{wrong}");
        assert!(!wrong.contains("s3cret"), "{wrong}");
    }
}
