//! What the HTTP load tests drive: a fresh store (a SQLite file in a temporary directory,
//! or a Postgres schema of its own, dropped afterwards), one API key per user issued into
//! it the way `cortex token create` issues them, and the `cortex-mcp` binary serving it on
//! loopback with the settings the test chose.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use chrono::Utc;
use cortex_app::StoreSettings;
use cortex_app::engine::open_key_store;
use cortex_core::keys::{self, Scope};
use cortex_postgres::{PostgresConfig, PostgresStore};
use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::BoxError;

/// Keys written at once: the Postgres pool's size (SQLite takes them one at a time anyway).
const KEY_WRITERS: usize = 8;
/// Warnings and errors from the server's log kept for the report.
const KEPT_LOG_LINES: usize = 20;

/// Where the server keeps its memories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// A store of the run's own and the settings that point the server (and the key store)
/// at it.
#[derive(Debug)]
pub struct Store {
    env: Vec<(String, String)>,
    /// The SQLite file's directory, and the server's HOME on either backend.
    dir: tempfile::TempDir,
    postgres: Option<PostgresConfig>,
}

impl Store {
    /// A fresh store on `backend`; `tag` names the Postgres schema (`<tag>_<pid>`).
    pub async fn fresh(backend: Backend, url: Option<&str>, tag: &str) -> Result<Self, BoxError> {
        let dir = tempfile::tempdir()?;
        let home = dir.path().to_string_lossy().into_owned();
        let mut env = vec![("HOME".to_owned(), home.clone())];
        let postgres = match backend {
            Backend::Sqlite => {
                env.push(("CORTEX_DB_PATH".into(), format!("{home}/memory.db")));
                None
            }
            Backend::Postgres => {
                let url = url.ok_or("--load-backend postgres needs --postgres URL")?;
                let schema = format!("{tag}_{}", std::process::id());
                env.push(("CORTEX_DATABASE_URL".into(), url.to_owned()));
                env.push(("CORTEX_PG_SCHEMA".into(), schema.clone()));
                let config = PostgresConfig {
                    schema: Some(schema),
                    ..PostgresConfig::new(url)
                };
                // A schema left by a run of the same pid that crashed would not be fresh.
                drop_schema(&config).await?;
                Some(config)
            }
        };
        Ok(Self { env, dir, postgres })
    }

    /// The settings naming this store, for the server's environment.
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Issues one write key per user into the store, through the library path of
    /// `cortex token create`: the tokens, in `users`' order.
    pub async fn issue_keys(&self, users: &[String]) -> Result<Vec<String>, BoxError> {
        let lookup = |name: &str| {
            self.env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let settings = StoreSettings::from_lookup(&lookup)?;
        let store = open_key_store(&settings.storage).await?;
        let mut tokens = vec![String::new(); users.len()];
        let mut writers = JoinSet::new();
        for (i, user) in users.iter().enumerate() {
            if writers.len() >= KEY_WRITERS
                && let Some(done) = writers.join_next().await
            {
                let (at, token) = done??;
                tokens[at] = token;
            }
            let issued = keys::issue(user, Scope::Write, Some("cortex-perf"), None, Utc::now())?;
            let store = Arc::clone(&store);
            writers.spawn(async move {
                store.insert_key(&issued.stored).await?;
                Ok::<_, BoxError>((i, issued.token))
            });
        }
        while let Some(done) = writers.join_next().await {
            let (at, token) = done??;
            tokens[at] = token;
        }
        Ok(tokens)
    }

    /// Drops the Postgres schema (the SQLite directory goes with the value).
    pub async fn remove(self) -> Result<(), BoxError> {
        if let Some(config) = &self.postgres {
            drop_schema(config).await?;
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        match &self.postgres {
            Some(config) => format!("Postgres schema {}", config.schema_name()),
            None => format!("SQLite file {}/memory.db", self.dir.path().display()),
        }
    }
}

async fn drop_schema(config: &PostgresConfig) -> Result<(), BoxError> {
    let store = PostgresStore::connect(config.clone()).await?;
    store
        .pool()
        .get()
        .await?
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
            config.schema_name()
        ))
        .await?;
    Ok(())
}

/// The `cortex-mcp` to run: `explicit`, else the one beside this executable (cargo puts
/// both in the same target directory; a test binary sits one level further down).
pub fn server_binary(explicit: Option<&Path>) -> Result<PathBuf, BoxError> {
    if let Some(path) = explicit {
        return match path.is_file() {
            true => Ok(path.to_owned()),
            false => Err(format!("--mcp-binary {}: no such file", path.display()).into()),
        };
    }
    let exe = std::env::current_exe()?;
    let name = format!("cortex-mcp{}", std::env::consts::EXE_SUFFIX);
    let beside = exe.parent().map(|dir| dir.join(&name));
    let above = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join(&name));
    beside
        .into_iter()
        .chain(above)
        .find(|p| p.is_file())
        .ok_or_else(|| {
            let profile = if cfg!(debug_assertions) {
                ""
            } else {
                " --release"
            };
            format!(
                "no cortex-mcp beside {}: build it first: cargo build{profile} -p cortex-mcp \
                 (or pass --mcp-binary PATH)",
                exe.display()
            )
            .into()
        })
}

/// The server binary serving HTTP on a free loopback port, killed on drop.
#[derive(Debug)]
pub struct Server {
    child: Child,
    pub addr: String,
    /// The log's warnings and errors (the first few) and how many there were.
    problems: Arc<Mutex<(Vec<String>, usize)>>,
}

impl Server {
    /// Starts `binary` with only `env` (nothing of this process's environment: no
    /// provider key or store setting of the machine reaches it) and waits for its address.
    pub fn start(binary: &Path, env: &[(String, String)]) -> Result<Self, BoxError> {
        let mut child = Command::new(binary)
            .args(["--http", "127.0.0.1:0"])
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let stderr = child
            .stderr
            .take()
            .ok_or("the server's stderr is not piped")?;
        let problems = Arc::new(Mutex::new((Vec::new(), 0)));
        let (tx, rx) = mpsc::channel();
        let kept = Arc::clone(&problems);
        // Drained to the end, or the server would block on a full pipe.
        std::thread::spawn(move || {
            let mut startup = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let addr = rest.split('/').next().unwrap_or_default().to_owned();
                    let _ = tx.send(Ok(addr));
                } else if startup.len() < 50 {
                    startup.push(line.clone());
                }
                if line.contains("WARN") || line.contains("ERROR") {
                    let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                    kept.1 += 1;
                    if kept.0.len() < KEPT_LOG_LINES {
                        kept.0.push(line);
                    }
                }
            }
            let _ = tx.send(Err(startup.join("\n")));
        });
        let mut server = Self {
            child,
            addr: String::new(),
            problems,
        };
        server.addr = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(addr)) => addr,
            Ok(Err(log)) => {
                return Err(format!("the server exited before listening:\n{log}").into());
            }
            Err(_) => return Err("the server did not say where it listens within 60 s".into()),
        };
        Ok(server)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's resident memory now and at its peak.
    pub fn memory(&self) -> Memory {
        Memory::of(self.pid())
    }

    /// How many warnings and errors the server logged, and the first few.
    pub fn problems(&self) -> (usize, Vec<String>) {
        let kept = self.problems.lock().unwrap_or_else(PoisonError::into_inner);
        (kept.1, kept.0.clone())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process's resident memory, in bytes: now (`VmRSS`) and its peak (`VmHWM`). Zeros
/// where there is no /proc.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    pub rss: u64,
    pub peak: u64,
}

impl Memory {
    pub fn of(pid: u32) -> Self {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map(|s| Self::parse(&s))
            .unwrap_or_default()
    }

    fn parse(status: &str) -> Self {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse::<u64>().ok())
                .map_or(0, |kib| kib * 1024)
        };
        Self {
            rss: field("VmRSS:"),
            peak: field("VmHWM:"),
        }
    }
}

/// Samples a process's resident memory every second until stopped; the highest sample.
#[derive(Debug)]
pub struct RssSampler {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<(u64, Vec<(f64, u64)>)>,
}

impl RssSampler {
    pub fn start(pid: u32) -> Self {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut samples = Vec::new();
            let mut highest = 0;
            loop {
                let rss = Memory::of(pid).rss;
                highest = highest.max(rss);
                samples.push((started.elapsed().as_secs_f64(), rss));
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = stopped.changed() => break,
                }
            }
            (highest, samples)
        });
        Self { stop, task }
    }

    /// The highest resident memory sampled, and every sample (seconds, bytes).
    pub async fn finish(self) -> (u64, Vec<(f64, u64)>) {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

/// Resident-memory samples as `[seconds, MiB]` pairs.
pub fn timeline_json(samples: &[(f64, u64)]) -> Value {
    samples
        .iter()
        .map(|(t, rss)| json!([(t * 10.0).round() / 10.0, (mib(*rss) * 10.0).round() / 10.0]))
        .collect()
}

/// The settings every load test gives the server: keys, the fake embedder (no model, no
/// network), and limits high enough that the test measures the server, not its limiter.
pub fn server_env(store: &Store, sessions: usize, user_sessions: usize) -> Vec<(String, String)> {
    let mut env = store.env().to_vec();
    let set = [
        ("CORTEX_HTTP_AUTH", "keys".to_owned()),
        ("CORTEX_EMBED_PROVIDER", "fake".to_owned()),
        ("CORTEX_HTTP_USER_RPS", "100000".to_owned()),
        ("CORTEX_HTTP_USER_BURST", "1000000".to_owned()),
        ("CORTEX_HTTP_MAX_SESSIONS", (sessions + 16).to_string()),
        (
            "CORTEX_HTTP_USER_MAX_SESSIONS",
            (user_sessions + 4).to_string(),
        ),
        ("RUST_LOG", "info,rmcp=warn".to_owned()),
    ];
    env.extend(set.into_iter().map(|(k, v)| (k.to_owned(), v)));
    env
}

/// The limits a run set, for its report.
pub fn limits_note(env: &[(String, String)]) -> Value {
    let mut note = serde_json::Map::new();
    for (k, v) in env {
        if k.starts_with("CORTEX_HTTP_")
            || k.starts_with("CORTEX_CACHE")
            || k == "CORTEX_PG_PUSHDOWN"
        {
            note.insert(k.clone(), json!(v));
        }
    }
    Value::Object(note)
}

/// The sum of the series of `name` whose labels include `labels`, in a Prometheus text
/// scrape (0 when there is none).
pub fn metric(scrape: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| {
            let (series_name, rest) = series.split_once('{').unwrap_or((series, ""));
            series_name == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|(_, value)| value.trim().parse::<f64>().ok())
        .sum()
}

/// The cache's figures from a scrape of `/metrics`.
pub fn cache_figures(scrape: &str) -> Value {
    let m = |name: &str| metric(scrape, name, &[]);
    json!({
        "bytes_mib": m("cortex_cache_bytes") / f64::from(1 << 20),
        // Counts, read back from the text as the integers they are.
        "users": m("cortex_cache_users") as u64,
        "hits": m("cortex_cache_hits_total") as u64,
        "misses": m("cortex_cache_misses_total") as u64,
        "evictions": m("cortex_cache_evictions_total") as u64,
    })
}

/// Where the server's Postgres reads were served, with hot standbys: the count of each
/// route and skip reason, and the share that fell back to the primary (the wait ran out, no
/// standby served, or the standby failed mid-read). All zero without standbys.
pub fn read_routes(scrape: &str) -> Value {
    // Each value of `label` with its series' count.
    let by = |series: &str, label: &str, values: &[&str]| -> serde_json::Map<String, Value> {
        values
            .iter()
            .map(|&v| {
                (
                    v.to_owned(),
                    json!(metric(scrape, series, &[(label, v)]) as u64),
                )
            })
            .collect()
    };
    let routes = by(
        cortex_postgres::READS_SERIES,
        "route",
        &cortex_postgres::ROUTES,
    );
    let skips = by(
        cortex_postgres::SKIPS_SERIES,
        "reason",
        &cortex_postgres::SKIP_REASONS,
    );
    let total: u64 = routes.values().filter_map(Value::as_u64).sum();
    let fallback: u64 = routes
        .iter()
        .filter(|(route, _)| route.starts_with("primary"))
        .filter_map(|(_, n)| n.as_u64())
        .sum();
    json!({
        "total": total, "routes": routes, "skips": skips,
        "fallback_share": if total == 0 { 0.0 } else { fallback as f64 / total as f64 },
    })
}

/// The machine's 1-minute load average (NaN where there is no /proc): other work on a
/// shared machine shows here, and moves every figure.
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resident_memory_is_read_from_proc_status() {
        let status = "Name:\tcortex-mcp\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n";
        let m = Memory::parse(status);
        assert_eq!(m.rss, 100 << 20);
        assert_eq!(m.peak, 200 << 20);
        assert_eq!(Memory::parse(""), Memory::default());
        assert!(Memory::of(std::process::id()).rss > 0);
    }

    #[test]
    fn series_are_summed_by_name_and_labels() {
        let scrape = "# TYPE cortex_tool_calls_total counter\n\
            cortex_tool_calls_total{tool=\"recall\",outcome=\"ok\"} 7\n\
            cortex_tool_calls_total{tool=\"forget\",outcome=\"error\"} 2\n\
            cortex_tool_calls_total_other 100\n\
            cortex_cache_bytes 1.5e3\n";
        assert_eq!(metric(scrape, "cortex_tool_calls_total", &[]), 9.0);
        assert_eq!(
            metric(scrape, "cortex_tool_calls_total", &[("outcome", "error")]),
            2.0
        );
        assert_eq!(metric(scrape, "cortex_cache_bytes", &[]), 1500.0);
        assert_eq!(metric(scrape, "cortex_cache_users", &[]), 0.0);
    }

    #[test]
    fn reads_that_fell_back_to_the_primary_are_a_share_of_all_routes() {
        let scrape = "cortex_pg_reads_total{route=\"replica\"} 6\n\
            cortex_pg_reads_total{route=\"replica_waited\"} 2\n\
            cortex_pg_reads_total{route=\"primary_wait_expired\"} 1\n\
            cortex_pg_reads_total{route=\"primary_no_replica\"} 1\n\
            cortex_pg_replica_skips_total{reason=\"lagging\"} 3\n";
        let reads = read_routes(scrape);
        assert_eq!(reads["total"], 10);
        assert_eq!(reads["routes"]["replica_waited"], 2);
        assert_eq!(reads["skips"]["lagging"], 3);
        assert_eq!(reads["skips"]["down"], 0);
        assert!((reads["fallback_share"].as_f64().unwrap() - 0.2).abs() < 1e-9);
        assert_eq!(read_routes("")["fallback_share"], 0.0);
    }

    #[test]
    fn a_missing_server_binary_says_how_to_build_it() {
        let err = server_binary(Some(Path::new("/nonexistent/cortex-mcp")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("--mcp-binary"), "{err}");
    }
}
