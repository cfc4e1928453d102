//! `cortex-perf --cache-users N`: many users' recall indexes in one server, held under
//! `CORTEX_CACHE_MAX_BYTES`. Each user opens a session, memorizes a few memories, recalls
//! once (which builds that user's cached index) and closes the session, a few users at a
//! time. The server's resident memory and the cache's own figures (`/metrics`) are read
//! after every user has been through, once under the bound and once without one, so the
//! reader sees that the bound is what keeps memory down. Then the first user, whose
//! index the bound evicted long ago, recalls again: the answer must be that user's own.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde_json::{Value, json};

use crate::BoxError;
use crate::corpus;
use crate::load::{Tally, marker, memories};
use crate::mcp_client::Http;
use crate::served::{self, Backend, Memory, RssSampler, Server, Store, metric, mib, timeline_json};
use crate::stats::Samples;

/// What to run.
#[derive(Debug, Clone)]
pub struct CacheOptions {
    pub users: usize,
    /// Memories each user writes before its one recall.
    pub memories: usize,
    /// Users served at once.
    pub tasks: usize,
    /// `CORTEX_CACHE_MAX_BYTES` as the server reads it (`64MiB`).
    pub bound: String,
    /// Also run without a bound, for comparison.
    pub compare: bool,
    /// How long after the last user the server's memory is read again.
    pub settle: std::time::Duration,
    pub backend: Backend,
    pub postgres: Option<String>,
    pub binary: std::path::PathBuf,
}

/// What one user's pass measured and saw.
#[derive(Debug, Default)]
struct UserPass {
    tally: Tally,
    memorize: Samples,
    recall: Samples,
    memorize_errors: u64,
    recall_errors: u64,
    /// The user's first memory: its id and content.
    first: Option<(String, String)>,
}

impl UserPass {
    fn merge(&mut self, other: UserPass) {
        let UserPass {
            tally,
            memorize,
            recall,
            memorize_errors,
            recall_errors,
            first: _,
        } = other;
        self.tally.opened.extend(&tally.opened);
        self.tally.closed.extend(&tally.closed);
        self.tally.session_errors += tally.session_errors;
        self.tally.cross_user += tally.cross_user;
        self.tally.checked += tally.checked;
        for e in tally.examples {
            self.tally.example(e);
        }
        self.memorize.extend(&memorize);
        self.recall.extend(&recall);
        self.memorize_errors += memorize_errors;
        self.recall_errors += recall_errors;
    }

    fn errors(&self) -> u64 {
        self.memorize_errors + self.recall_errors + self.tally.session_errors
    }
}

/// User `user`'s pass: a session, `count` memorizes, one recall (checked), closed.
async fn one_user(http: &Http, user: usize, key: &str, count: usize, into: &mut UserPass) {
    let mark = marker(user);
    let opened = Instant::now();
    let mut session = match http.open(key).await {
        Ok(s) => s,
        Err(e) => {
            into.tally.session_errors += 1;
            into.tally.example(format!("initialize of {mark}: {e}"));
            return;
        }
    };
    into.tally.opened.push(opened.elapsed());
    let mut rng = SmallRng::seed_from_u64(user as u64);
    for _ in 0..count {
        let content = format!("{mark} {}", corpus::text(&mut rng));
        let started = Instant::now();
        match session.call("memorize", json!({"content": content})).await {
            Ok(answer) if answer["status"] == "stored" => {
                into.memorize.push(started.elapsed());
                if into.first.is_none() {
                    let id = answer["id"].as_str().unwrap_or_default().to_owned();
                    into.first = Some((id, content));
                }
            }
            other => {
                into.memorize_errors += 1;
                into.tally.example(format!("memorize of {mark}: {other:?}"));
            }
        }
    }
    let words: Vec<String> = corpus::text(&mut rng)
        .split_whitespace()
        .take(3)
        .map(str::to_owned)
        .collect();
    let query = format!("{mark} {}", words.join(" "));
    let started = Instant::now();
    let answer = session
        .call("recall", json!({"query": query, "limit": 10}))
        .await
        .and_then(|a| into.tally.check(&a, &mark, "recall").map(|()| a));
    match answer {
        Ok(_) => into.recall.push(started.elapsed()),
        Err(e) => {
            into.recall_errors += 1;
            into.tally.example(format!("recall of {mark}: {e}"));
        }
    }
    let closing = Instant::now();
    match session.close().await {
        Ok(()) => into.tally.closed.push(closing.elapsed()),
        Err(e) => {
            into.tally.session_errors += 1;
            into.tally.example(format!("close of {mark}: {e}"));
        }
    }
}

/// Every user through [`one_user`], `tasks` at a time; user 0's first memory.
async fn all_users(http: &Http, keys: Arc<Vec<String>>, opts: &CacheOptions, pid: u32) -> UserPass {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..opts.tasks {
        let (http, keys, next) = (http.clone(), Arc::clone(&keys), Arc::clone(&next));
        let count = opts.memories;
        workers.push(tokio::spawn(async move {
            let mut pass = UserPass::default();
            let mut first = None;
            loop {
                let user = next.fetch_add(1, Ordering::Relaxed);
                let Some(key) = keys.get(user) else { break };
                if user > 0 && user % 1_000 == 0 {
                    eprintln!(
                        "  {user} users in {:.0} s, server resident {:.1} MiB",
                        started.elapsed().as_secs_f64(),
                        mib(Memory::of(pid).rss)
                    );
                }
                let mut one = UserPass::default();
                one_user(&http, user, key, count, &mut one).await;
                if user == 0 {
                    first = one.first.take();
                }
                pass.merge(one);
            }
            pass.first = first;
            pass
        }));
    }
    let mut all = UserPass::default();
    for w in workers {
        match w.await {
            Ok(mut pass) => {
                let first = pass.first.take();
                all.merge(pass);
                all.first = all.first.take().or(first);
            }
            Err(e) => all.tally.example(format!("a worker failed: {e}")),
        }
    }
    all
}

/// User 0 recalls its first memory by its own text, long after its index was (with a
/// bound) evicted: whether the answer is right, and whether the index had to be rebuilt.
async fn evicted_user(
    http: &Http,
    key: &str,
    first: Option<&(String, String)>,
) -> Result<Value, BoxError> {
    let Some((id, content)) = first else {
        return Ok(json!({"right": false, "why": "user 0 memorized nothing"}));
    };
    let misses = |s: &str| metric(s, "cortex_cache_misses_total", &[]);
    let before = misses(&http.get("/metrics").await?);
    let mut session = http.open(key).await?;
    let answer = session
        .call("recall", json!({"query": content, "limit": 5}))
        .await?;
    session.close().await?;
    let after = misses(&http.get("/metrics").await?);
    let found = memories(&answer)?;
    let mark = marker(0);
    let foreign = found
        .iter()
        .filter(|(_, c)| !crate::load::belongs(c, &mark))
        .count();
    let top = found.first().map(|(i, _)| i == id).unwrap_or(false);
    Ok(json!({
        "right": top && foreign == 0, "top_is_its_first_memory": top,
        "returned": found.len(), "foreign": foreign, "index_rebuilt": after > before,
    }))
}

/// One pass: a fresh store and server with `bound` (none: no bound).
async fn pass(opts: &CacheOptions, bound: Option<&str>) -> Result<Value, BoxError> {
    let store = Store::fresh(opts.backend, opts.postgres.as_deref(), "cortex_cache").await?;
    let result = serve_pass(opts, bound, &store).await;
    store.remove().await?;
    result
}

async fn serve_pass(
    opts: &CacheOptions,
    bound: Option<&str>,
    store: &Store,
) -> Result<Value, BoxError> {
    let users: Vec<String> = (0..opts.users).map(marker).collect();
    let issuing = Instant::now();
    let keys = Arc::new(store.issue_keys(&users).await?);
    let keys_seconds = issuing.elapsed().as_secs_f64();
    let mut env = served::server_env(store, opts.tasks, 1);
    if let Some(bound) = bound {
        env.push(("CORTEX_CACHE_MAX_BYTES".into(), bound.to_owned()));
    }
    if opts.backend == Backend::Postgres {
        // The pushdown answers recall in SQL, with no cached index: turn it off so the
        // cache is what is measured.
        env.push(("CORTEX_PG_PUSHDOWN".into(), "0".into()));
    }
    let server = Server::start(&opts.binary, &env)?;
    let http = Http::new(&server.addr)?;
    http.get("/readyz").await?;
    let before = server.memory();
    eprintln!(
        "cache: {} users x {} memories, {} at a time, bound {} on {} ({} keys issued in \
         {keys_seconds:.1} s); server resident {:.1} MiB",
        opts.users,
        opts.memories,
        opts.tasks,
        bound.unwrap_or("none"),
        store.describe(),
        keys.len(),
        mib(before.rss),
    );
    let sampler = RssSampler::start(server.pid());
    let load_before = served::load_average();
    let started = Instant::now();
    let all = all_users(&http, Arc::clone(&keys), opts, server.pid()).await;
    let seconds = started.elapsed().as_secs_f64();
    let (sampled_peak, timeline) = sampler.finish().await;
    let after = server.memory();
    let cache = served::cache_figures(&http.get("/metrics").await?);
    tokio::time::sleep(opts.settle).await;
    let settled = server.memory();
    let key0 = keys.first().map(String::as_str).unwrap_or_default();
    let evicted = evicted_user(&http, key0, all.first.as_ref()).await?;
    let (logged, lines) = server.problems();
    let mut r = figures(opts, bound, &all, seconds);
    r["keys_seconds"] = json!(keys_seconds);
    r["resident_memory"] = json!({
        "before_mib": mib(before.rss), "after_mib": mib(after.rss),
        "settled_mib": mib(settled.rss), "settled_after_s": opts.settle.as_secs_f64(),
        "peak_sampled_mib": mib(sampled_peak), "peak_hwm_mib": mib(after.peak),
        "growth_mib": mib(after.rss.saturating_sub(before.rss)),
    });
    r["resident_timeline"] = timeline_json(&timeline);
    r["load_average"] = json!([load_before, served::load_average()]);
    r["cache"] = cache;
    r["evicted_user"] = evicted;
    r["server_log_warnings"] = json!(logged);
    r["server_log_examples"] = json!(lines);
    Ok(r)
}

/// What the clients measured and saw in one pass.
fn figures(opts: &CacheOptions, bound: Option<&str>, all: &UserPass, seconds: f64) -> Value {
    let bound_bytes = bound.and_then(cortex_app::config::parse_bytes);
    json!({
        "backend": opts.backend.as_str(), "users": opts.users, "memories_per_user": opts.memories,
        "tasks": opts.tasks, "bound": bound, "bound_mib": bound_bytes.map(|b| mib(b as u64)),
        "seconds": seconds, "users_per_s": opts.users as f64 / seconds,
        "memorize": {"calls": all.memorize.len() as u64 + all.memorize_errors,
                     "p50_ms": all.memorize.p50(), "p99_ms": all.memorize.percentile_ms(99.0)},
        "first_recall": {"calls": all.recall.len() as u64 + all.recall_errors,
                         "p50_ms": all.recall.p50(), "p99_ms": all.recall.percentile_ms(99.0)},
        "errors": all.errors(), "cross_user": all.tally.cross_user,
        "memories_checked": all.tally.checked, "examples": all.tally.examples,
    })
}

fn print_pass(r: &Value) {
    let f = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    let m = &r["resident_memory"];
    let c = &r["cache"];
    let e = &r["evicted_user"];
    println!(
        "| {} | {} | {:.0} s | {:.2} / {:.2} | {:.2} / {:.2} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {} | {} / {} |",
        r["bound"].as_str().unwrap_or("none"),
        r["users"],
        f(&r["seconds"]),
        f(&r["memorize"]["p50_ms"]),
        f(&r["memorize"]["p99_ms"]),
        f(&r["first_recall"]["p50_ms"]),
        f(&r["first_recall"]["p99_ms"]),
        f(&m["before_mib"]),
        f(&m["after_mib"]),
        f(&m["settled_mib"]),
        f(&m["peak_sampled_mib"]),
        f(&c["bytes_mib"]),
        c["users"],
        c["evictions"],
        r["errors"],
        r["cross_user"],
        e["right"],
        e["index_rebuilt"],
    );
}

/// Runs the pass under the bound, and (with `compare`) one without; the report, whose
/// `errors` and `cross_user` must be 0 and whose evicted user must be answered right.
pub async fn run(opts: &CacheOptions) -> Result<Value, BoxError> {
    let mut passes = vec![pass(opts, Some(&opts.bound)).await?];
    if opts.compare {
        passes.push(pass(opts, None).await?);
    }
    println!(
        "\ncache, {}: {} users x {} memories, {} at a time",
        opts.backend.as_str(),
        opts.users,
        opts.memories,
        opts.tasks
    );
    println!(
        "| bound | users | took | memorize p50 / p99 ms | first recall p50 / p99 ms | resident before MiB | after | settled | peak | cache MiB | cached users | evictions | errors | cross-user | user 0 right / rebuilt |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for p in &passes {
        print_pass(p);
    }
    for p in &passes {
        let at = |i: usize| p["load_average"][i].as_f64().unwrap_or(f64::NAN);
        println!(
            "  bound {}: machine load average (1 min) {:.2} at the start, {:.2} at the end; \
             keys issued in {:.1} s",
            p["bound"].as_str().unwrap_or("none"),
            at(0),
            at(1),
            p["keys_seconds"].as_f64().unwrap_or(f64::NAN)
        );
        for e in p["examples"].as_array().into_iter().flatten() {
            println!("  example: {}", e.as_str().unwrap_or_default());
        }
        if let Some(n) = p["server_log_warnings"].as_u64().filter(|&n| n > 0) {
            println!("  the server logged {n} warnings or errors, e.g.:");
            for line in p["server_log_examples"].as_array().into_iter().flatten() {
                println!("    {}", line.as_str().unwrap_or_default());
            }
        }
    }
    Ok(json!({ "passes": passes }))
}

/// The failures in a report: errors, cross-user answers, a wrong answer for the evicted
/// user.
pub fn failures(report: &Value) -> u64 {
    report["passes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let wrong = u64::from(p["evicted_user"]["right"] != true);
            p["errors"].as_u64().unwrap_or(1) + p["cross_user"].as_u64().unwrap_or(1) + wrong
        })
        .sum()
}
