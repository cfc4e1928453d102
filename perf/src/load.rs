//! `cortex-perf --load`: the HTTP server on loopback driven by N users x M sessions of
//! mixed memorize, recall, list and forget for a bounded time, every answer checked to
//! belong to its caller.
//!
//! Each user's memories start with the user's marker (its user id, `u00042`); a recall or
//! list answer holding a memory without the caller's marker is a cross-user answer. A
//! quarter of the recalls ask for another user's marker, the query most likely to surface
//! that user's memories if isolation broke. Client and server share the machine's cores,
//! so the latencies include the client's share of the CPU.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::sync::Barrier;

use crate::BoxError;
use crate::corpus;
use crate::mcp_client::{CallError, Http, Session};
use crate::served::{self, Backend, RssSampler, Server, Store, mib};
use crate::stats::Samples;

/// Consecutive failed calls after which a session stops (the server is likely gone).
const GIVE_UP_AFTER: u32 = 20;
/// Examples of errors and cross-user answers kept for the report.
const EXAMPLES: usize = 8;

/// What to run.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub users: usize,
    pub sessions: usize,
    pub window: Duration,
    /// How long after the load the server's memory is read again, for what the allocator
    /// returns once the sessions are gone.
    pub settle: Duration,
    pub backend: Backend,
    pub postgres: Option<String>,
    /// Hot standbys the server reads from (CORTEX_DATABASE_READ_URL), on Postgres only.
    pub read_url: Option<String>,
    pub binary: std::path::PathBuf,
}

/// The mixed tools, in the tallies' order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Memorize,
    Recall,
    List,
    Forget,
}

const OPS: [Op; 4] = [Op::Memorize, Op::Recall, Op::List, Op::Forget];

impl Op {
    fn tool(self) -> &'static str {
        match self {
            Op::Memorize => "memorize",
            Op::Recall => "recall",
            Op::List => "list_memories",
            Op::Forget => "forget",
        }
    }

    /// 30% memorize, 50% recall, 10% list, 10% forget (memorize while the session has
    /// nothing of its own to forget).
    fn pick(rng: &mut SmallRng, can_forget: bool) -> Self {
        match rng.random_range(0..100) {
            0..30 => Op::Memorize,
            30..80 => Op::Recall,
            80..90 => Op::List,
            _ if can_forget => Op::Forget,
            _ => Op::Memorize,
        }
    }
}

/// The user id and marker of user `i`.
pub fn marker(i: usize) -> String {
    format!("u{i:05}")
}

/// Whether `content` is a memory of the user with `marker`.
pub fn belongs(content: &str, marker: &str) -> bool {
    content.split_whitespace().next() == Some(marker)
}

/// The `(id, content)` of each memory in a recall or list answer.
pub fn memories(answer: &Value) -> Result<Vec<(String, String)>, CallError> {
    let list = answer["memories"]
        .as_array()
        .ok_or_else(|| CallError::Protocol(format!("no memories in {answer}")))?;
    list.iter()
        .map(|m| match (m["id"].as_str(), m["content"].as_str()) {
            (Some(id), Some(content)) => Ok((id.to_owned(), content.to_owned())),
            _ => Err(CallError::Protocol(format!(
                "a memory without id or content: {m}"
            ))),
        })
        .collect()
}

/// What one session (or all of them) saw.
#[derive(Debug, Default)]
pub struct Tally {
    latency: [Samples; 4],
    errors: [u64; 4],
    pub opened: Samples,
    pub closed: Samples,
    /// Sessions that could not be opened or closed.
    pub session_errors: u64,
    /// Recall and list answers holding another user's memory.
    pub cross_user: u64,
    /// Memories in recall and list answers, each checked.
    pub checked: u64,
    pub examples: Vec<String>,
}

impl Tally {
    pub fn example(&mut self, text: String) {
        if self.examples.len() < EXAMPLES {
            self.examples.push(text);
        }
    }

    fn merge(&mut self, other: Tally) {
        for i in 0..OPS.len() {
            self.latency[i].extend(&other.latency[i]);
            self.errors[i] += other.errors[i];
        }
        self.opened.extend(&other.opened);
        self.closed.extend(&other.closed);
        self.session_errors += other.session_errors;
        self.cross_user += other.cross_user;
        self.checked += other.checked;
        for e in other.examples {
            self.example(e);
        }
    }

    fn calls(&self) -> u64 {
        (0..OPS.len())
            .map(|i| self.latency[i].len() as u64 + self.errors[i])
            .sum()
    }

    fn errors(&self) -> u64 {
        self.errors.iter().sum::<u64>() + self.session_errors
    }

    /// Checks a recall or list answer of `marker`'s user.
    pub fn check(&mut self, answer: &Value, marker: &str, tool: &str) -> Result<(), CallError> {
        let found = memories(answer)?;
        self.checked += found.len() as u64;
        let foreign: Vec<_> = found.iter().filter(|(_, c)| !belongs(c, marker)).collect();
        if let Some((id, content)) = foreign.first() {
            self.cross_user += 1;
            let content: String = content.chars().take(60).collect();
            self.example(format!(
                "cross-user: {tool} of {marker} returned {} foreign memories, e.g. {id} {content:?}",
                foreign.len()
            ));
        }
        Ok(())
    }
}

/// One session's state: its user, the memories it wrote and may forget.
struct Worker {
    user: usize,
    users: usize,
    marker: String,
    own: Vec<String>,
    rng: SmallRng,
    tally: Tally,
}

impl Worker {
    fn request(&mut self, op: Op) -> Value {
        let words = |rng: &mut SmallRng, n: usize| {
            corpus::text(rng)
                .split_whitespace()
                .take(n)
                .collect::<Vec<_>>()
                .join(" ")
        };
        match op {
            Op::Memorize => {
                json!({"content": format!("{} {}", self.marker, corpus::text(&mut self.rng))})
            }
            Op::Recall => {
                let other = (self.user + 1 + self.rng.random_range(0..self.users.max(2) - 1))
                    % self.users.max(1);
                let about = match self.rng.random_range(0..4) {
                    0 | 1 => format!("{} ", self.marker),
                    2 => format!("{} ", marker(other)),
                    _ => String::new(),
                };
                json!({"query": format!("{about}{}", words(&mut self.rng, 3)), "limit": 10})
            }
            Op::List => json!({"limit": 20}),
            Op::Forget => {
                let at = self.rng.random_range(0..self.own.len());
                json!({"memory_id": self.own.swap_remove(at)})
            }
        }
    }

    /// Whether `answer` is right for `op`'s `request`; recall and list answers are checked
    /// for other users' memories.
    fn check(&mut self, op: Op, request: &Value, answer: &Value) -> Result<(), CallError> {
        match op {
            Op::Memorize => match (answer["id"].as_str(), answer["status"].as_str()) {
                (Some(id), Some("stored")) => {
                    self.own.push(id.to_owned());
                    Ok(())
                }
                _ => Err(CallError::Protocol(format!("memorize answered {answer}"))),
            },
            Op::Recall | Op::List => self.tally.check(answer, &self.marker, op.tool()),
            Op::Forget => match answer["forgotten"] == request["memory_id"] {
                true => Ok(()),
                false => Err(CallError::Protocol(format!(
                    "forget {} answered {answer}",
                    request["memory_id"]
                ))),
            },
        }
    }

    async fn run(&mut self, session: &mut Session, deadline: Instant) {
        let mut failing = 0;
        while Instant::now() < deadline && failing < GIVE_UP_AFTER {
            let op = Op::pick(&mut self.rng, !self.own.is_empty());
            let request = self.request(op);
            let started = Instant::now();
            let answer = session.call(op.tool(), request.clone()).await;
            let took = started.elapsed();
            let i = op as usize;
            match answer.and_then(|a| self.check(op, &request, &a)) {
                Ok(()) => {
                    self.tally.latency[i].push(took);
                    failing = 0;
                }
                Err(e) => {
                    self.tally.errors[i] += 1;
                    failing += 1;
                    let text = format!("{} of {}: {e}", op.tool(), self.marker);
                    self.tally.example(text);
                }
            }
        }
    }
}

/// One session of user `user`: opened, then (once every session is open) the mix until
/// the window ends, then closed.
async fn session(
    http: Http,
    (user, users): (usize, usize),
    key: String,
    seed: u64,
    start: Arc<Barrier>,
    window: Duration,
) -> Tally {
    let mut worker = Worker {
        user,
        users,
        marker: marker(user),
        own: Vec::new(),
        rng: SmallRng::seed_from_u64(seed),
        tally: Tally::default(),
    };
    let opened = Instant::now();
    let session = http.open(&key).await;
    let took = opened.elapsed();
    start.wait().await;
    let mut session = match session {
        Ok(s) => s,
        Err(e) => {
            worker.tally.session_errors += 1;
            worker
                .tally
                .example(format!("initialize of {}: {e}", worker.marker));
            return worker.tally;
        }
    };
    worker.tally.opened.push(took);
    worker.run(&mut session, Instant::now() + window).await;
    let closing = Instant::now();
    match session.close().await {
        Ok(()) => worker.tally.closed.push(closing.elapsed()),
        Err(e) => {
            worker.tally.session_errors += 1;
            worker
                .tally
                .example(format!("close of {}: {e}", worker.marker));
        }
    }
    worker.tally
}

/// Runs the load test; the report, whose `errors` and `cross_user` must be 0.
pub async fn run(opts: &LoadOptions) -> Result<Value, BoxError> {
    if opts.read_url.is_some() && opts.backend != Backend::Postgres {
        return Err(
            "--load-read-url names standbys of --postgres: use --load-backend postgres".into(),
        );
    }
    let store = Store::fresh(opts.backend, opts.postgres.as_deref(), "cortex_load").await?;
    let result = drive(opts, &store).await;
    store.remove().await?;
    result
}

async fn drive(opts: &LoadOptions, store: &Store) -> Result<Value, BoxError> {
    let users: Vec<String> = (0..opts.users).map(marker).collect();
    let issuing = Instant::now();
    let keys = store.issue_keys(&users).await?;
    let keys_seconds = issuing.elapsed().as_secs_f64();
    let mut env = served::server_env(store, opts.users * opts.sessions, opts.sessions);
    if let Some(urls) = &opts.read_url {
        env.push(("CORTEX_DATABASE_READ_URL".into(), urls.clone()));
    }
    let server = Server::start(&opts.binary, &env)?;
    let http = Http::new(&server.addr)?;
    // Builds the engine (store opened, embedder set up): start-up is over after this.
    http.get("/readyz").await?;
    let before = server.memory();
    eprintln!(
        "load: {} users x {} sessions for {:.0} s on {} ({} keys issued in {keys_seconds:.2} s); \
         server {} pid {} at {}, resident {:.1} MiB; the rate limit and session caps are set \
         out of the way: {}",
        opts.users,
        opts.sessions,
        opts.window.as_secs_f64(),
        store.describe(),
        keys.len(),
        opts.binary.display(),
        server.pid(),
        server.addr,
        mib(before.rss),
        served::limits_note(&env),
    );
    let start = Arc::new(Barrier::new(opts.users * opts.sessions + 1));
    let mut tasks = Vec::new();
    for (user, key) in keys.iter().enumerate() {
        for s in 0..opts.sessions {
            tasks.push(tokio::spawn(session(
                http.clone(),
                (user, opts.users),
                key.clone(),
                (user * 1_000 + s) as u64,
                Arc::clone(&start),
                opts.window,
            )));
        }
    }
    start.wait().await;
    let load_before = served::load_average();
    let began = Instant::now();
    let open = server.memory();
    let sampler = RssSampler::start(server.pid());
    let mut tally = Tally::default();
    for t in tasks {
        tally.merge(t.await?);
    }
    let seconds = began.elapsed().as_secs_f64();
    let (sampled_peak, timeline) = sampler.finish().await;
    let after = server.memory();
    let metrics = http.get("/metrics").await.unwrap_or_default();
    tokio::time::sleep(opts.settle).await;
    let settled = server.memory();
    let memory = json!({
        "timeline": served::timeline_json(&timeline),
        "settled_mib": mib(settled.rss), "settled_after_s": opts.settle.as_secs_f64(),
        "cache": served::cache_figures(&metrics),
        "load_average_before": load_before, "load_average_after": served::load_average(),
        "before_mib": mib(before.rss), "sessions_open_mib": mib(open.rss),
        "after_mib": mib(after.rss), "peak_sampled_mib": mib(sampled_peak),
        "peak_hwm_mib": mib(after.peak),
    });
    let report = report(opts, &tally, seconds, memory, &server, &metrics);
    print_report(&report, &tally);
    Ok(json!({"keys_seconds": keys_seconds, "limits": served::limits_note(&env), "run": report}))
}

fn latency_row(samples: &Samples, errors: u64) -> Value {
    json!({
        "calls": samples.len() as u64 + errors, "errors": errors,
        "p50_ms": samples.p50(), "p99_ms": samples.percentile_ms(99.0),
    })
}

fn report(
    opts: &LoadOptions,
    tally: &Tally,
    seconds: f64,
    memory: Value,
    server: &Server,
    metrics: &str,
) -> Value {
    let mut tools = serde_json::Map::new();
    for (i, op) in OPS.iter().enumerate() {
        let mut row = latency_row(&tally.latency[i], tally.errors[i]);
        // The server's own time in the tool (its histogram's mean): the rest of what the
        // client saw is HTTP, queueing for a core, and the client itself.
        let labels = [("tool", op.tool())];
        let sum = served::metric(metrics, "cortex_tool_call_seconds_sum", &labels);
        let count = served::metric(metrics, "cortex_tool_call_seconds_count", &labels);
        row["server_mean_ms"] = json!(sum * 1e3 / count);
        tools.insert(op.tool().to_owned(), row);
    }
    let (logged, lines) = server.problems();
    let server_calls = served::metric(metrics, "cortex_tool_calls_total", &[]);
    let server_failed = served::metric(metrics, "cortex_tool_calls_total", &[("outcome", "error")])
        + served::metric(
            metrics,
            "cortex_tool_calls_total",
            &[("outcome", "invalid")],
        );
    json!({
        "backend": opts.backend.as_str(), "users": opts.users, "sessions_per_user": opts.sessions,
        "window_s": opts.window.as_secs_f64(), "seconds": seconds,
        "tools": tools,
        "initialize": latency_row(&tally.opened, 0), "close": latency_row(&tally.closed, 0),
        "calls": tally.calls(), "calls_per_s": tally.calls() as f64 / seconds,
        "errors": tally.errors(), "cross_user": tally.cross_user,
        "memories_checked": tally.checked, "examples": tally.examples,
        "reads": served::read_routes(metrics),
        "server_counted_calls": server_calls, "server_counted_failures": server_failed,
        "resident_memory": memory,
        "server_log_warnings": logged, "server_log_examples": lines,
    })
}

fn print_report(r: &Value, tally: &Tally) {
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    println!(
        "\nload, {}: {} users x {} sessions, {:.1} s",
        r["backend"].as_str().unwrap_or("?"),
        r["users"],
        r["sessions_per_user"],
        f(&r["seconds"])
    );
    println!(
        "| tool | calls | p50 ms | p99 ms | server mean ms | errors |\n|---|---:|---:|---:|---:|---:|"
    );
    for op in OPS {
        let row = &r["tools"][op.tool()];
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {} |",
            op.tool(),
            row["calls"],
            f(&row["p50_ms"]),
            f(&row["p99_ms"]),
            f(&row["server_mean_ms"]),
            row["errors"]
        );
    }
    let m = &r["resident_memory"];
    println!(
        "throughput {:.0} calls/s ({} calls; the server counted {}); errors {} (sessions: {}); \
         cross-user answers {} of {} memories checked\n\
         session open p50 {:.2} ms, close p50 {:.2} ms\n\
         server resident memory: before {:.1} MiB, sessions open {:.1}, after {:.1}, {:.0} s \
         later {:.1}, peak {:.1} (sampled each second; VmHWM {:.1}); the index cache holds \
         {:.1} MiB for {} users\n\
         machine load average (1 min) {:.2} at the start, {:.2} at the end",
        f(&r["calls_per_s"]),
        r["calls"],
        r["server_counted_calls"],
        r["errors"],
        tally.session_errors,
        r["cross_user"],
        r["memories_checked"],
        tally.opened.p50(),
        tally.closed.p50(),
        f(&m["before_mib"]),
        f(&m["sessions_open_mib"]),
        f(&m["after_mib"]),
        f(&m["settled_after_s"]),
        f(&m["settled_mib"]),
        f(&m["peak_sampled_mib"]),
        f(&m["peak_hwm_mib"]),
        f(&m["cache"]["bytes_mib"]),
        m["cache"]["users"],
        f(&m["load_average_before"]),
        f(&m["load_average_after"]),
    );
    let reads = &r["reads"];
    if reads["total"].as_f64().is_some_and(|n| n > 0.0) {
        println!(
            "Postgres reads with standbys: {} by where served {}, {:.2}% fell back to the \
             primary; standbys passed over {}",
            reads["total"],
            reads["routes"],
            f(&reads["fallback_share"]) * 100.0,
            reads["skips"],
        );
    }
    for e in &tally.examples {
        println!("  example: {e}");
    }
    if let Some(n) = r["server_log_warnings"].as_u64().filter(|&n| n > 0) {
        println!("  the server logged {n} warnings or errors, e.g.:");
        for line in r["server_log_examples"].as_array().into_iter().flatten() {
            println!("    {}", line.as_str().unwrap_or_default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memory_belongs_to_the_user_whose_marker_starts_it() {
        assert!(belongs("u00042 kalo mine", "u00042"));
        assert!(!belongs("u00043 kalo mine", "u00042"));
        assert!(!belongs("kalo u00042", "u00042"));
        assert!(!belongs("u000421 kalo", "u00042"));
    }

    #[test]
    fn an_answer_with_another_users_memory_counts_once() {
        let mut tally = Tally::default();
        let answer = json!({"memories": [
            {"id": "a", "content": "u00001 x"}, {"id": "b", "content": "u00002 y"},
            {"id": "c", "content": "u00002 z"}]});
        tally.check(&answer, "u00001", "recall").unwrap();
        assert_eq!((tally.cross_user, tally.checked), (1, 3));
        assert!(
            tally.examples[0].contains("2 foreign"),
            "{:?}",
            tally.examples
        );
        let own = json!({"memories": [{"id": "a", "content": "u00001 x"}]});
        tally.check(&own, "u00001", "list_memories").unwrap();
        assert_eq!((tally.cross_user, tally.checked), (1, 4));
        assert!(tally.check(&json!({"x": 1}), "u00001", "recall").is_err());
    }

    #[test]
    fn the_mix_is_mostly_recall_and_forgets_only_what_it_wrote() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut counts = [0usize; 4];
        for _ in 0..10_000 {
            counts[Op::pick(&mut rng, true) as usize] += 1;
        }
        assert!(counts[Op::Recall as usize] > 4_500 && counts[Op::Forget as usize] > 800);
        let never = (0..1_000).all(|_| Op::pick(&mut rng, false) != Op::Forget);
        assert!(never);
    }
}
