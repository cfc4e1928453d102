//! Several `cortex-mcp` processes on one SQLite file at once, as when a user runs two MCP
//! hosts (or one host with two sessions) on the default `~/.cortex/memory.db`.
//!
//! Two tests. In the first, processes share a file one of them created earlier: each
//! writes its own memories while recalling the others'. Nothing may be lost, no call may
//! fail (in particular, no "database is locked" may reach a client), and a memory another
//! process has acknowledged must be visible to recall and list at once. In the second,
//! processes open one new file at the same moment (two sessions of a host starting on
//! first use), many times over: every first call must succeed.

// Test helpers outside #[test] fns panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reliability;

use std::collections::HashSet;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Instant;

use reliability::{Reply, Rng, Server, integrity_check, sqlite_memories};
use serde_json::json;

const PROCESSES: usize = 4;
const WRITES_PER_PROCESS: usize = 60;

/// A memory some process has acknowledged.
#[derive(Debug, Clone)]
struct Written {
    process: usize,
    id: String,
    content: String,
}

#[derive(Debug, Default)]
struct Outcome {
    errors: Vec<String>,
    /// Reads in one process that missed a memory another had already acknowledged.
    stale_reads: Vec<String>,
    cross_recalls: usize,
    cross_lists: usize,
}

#[test]
fn processes_sharing_one_sqlite_file_lose_nothing_and_see_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let env = [
        ("CORTEX_DB_PATH", db.to_str().unwrap().to_owned()),
        ("CORTEX_EMBED_PROVIDER", "fake".to_owned()),
        ("CORTEX_USER_ID", "shared-user".to_owned()),
    ];
    let seed = Rng::from_env_or_clock().seed();
    let started = Instant::now();
    let written: Arc<Mutex<Vec<Written>>> = Arc::default();
    let outcome: Arc<Mutex<Outcome>> = Arc::default();
    // The file exists, in WAL mode, before the processes share it; the race to create it
    // is the next test's.
    let mut first = Server::start("creator", &env);
    first.ok("list_memories", json!({}));
    assert!(first.finish().success());
    // Every process has done its handshake before any makes the first call.
    let barrier = Arc::new(Barrier::new(PROCESSES));

    let workers: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let env = env.clone();
            let written = written.clone();
            let outcome = outcome.clone();
            let barrier = barrier.clone();
            thread::spawn(move || {
                let mut rng = Rng::new(seed.wrapping_add(p as u64 * 7919));
                let mut server = Server::start(format!("process {p}"), &env);
                barrier.wait();
                for i in 0..WRITES_PER_PROCESS {
                    let content = format!(
                        "process {p} write {i}: the {} holds {}",
                        rng.word(),
                        rng.word()
                    );
                    match server.call("memorize", json!({"content": content})) {
                        Reply::Ok(out) => {
                            let id = out["id"].as_str().expect("an id").to_owned();
                            written.lock().unwrap().push(Written {
                                process: p,
                                id,
                                content,
                            });
                        }
                        other => outcome
                            .lock()
                            .unwrap()
                            .errors
                            .push(format!("process {p} memorize {i}: {other:?}")),
                    }

                    // A memory another process acknowledged before this point.
                    let others: Vec<Written> = written
                        .lock()
                        .unwrap()
                        .iter()
                        .filter(|w| w.process != p)
                        .cloned()
                        .collect();
                    if let Some(target) = (!others.is_empty())
                        .then(|| &others[rng.range(0, others.len() as u64 - 1) as usize])
                    {
                        let reply =
                            server.call("recall", json!({"query": target.content, "limit": 10}));
                        let mut out = outcome.lock().unwrap();
                        out.cross_recalls += 1;
                        match reply {
                            Reply::Ok(found) => {
                                if !reliability::memories(&found)
                                    .iter()
                                    .any(|m| m.id == target.id)
                                {
                                    out.stale_reads.push(format!(
                                        "process {p} recall missed {} from process {}",
                                        target.id, target.process
                                    ));
                                }
                            }
                            other => out.errors.push(format!("process {p} recall: {other:?}")),
                        }
                    }
                    // Every tenth write, a full list must hold everything acknowledged
                    // by anyone before it was sent.
                    if i % 10 == 9 {
                        let before: Vec<Written> = written.lock().unwrap().clone();
                        let listed: HashSet<String> =
                            server.list_all().into_iter().map(|m| m.id).collect();
                        let mut out = outcome.lock().unwrap();
                        out.cross_lists += 1;
                        for w in before.iter().filter(|w| !listed.contains(&w.id)) {
                            out.stale_reads.push(format!(
                                "process {p} list missed {} from process {}",
                                w.id, w.process
                            ));
                        }
                    }
                }
                // Locking trouble shows in the log even when retried away: count it.
                let locked_logs = server
                    .stderr_lines()
                    .iter()
                    .filter(|l| l.to_lowercase().contains("locked") || l.contains("busy"))
                    .cloned()
                    .collect::<Vec<_>>();
                (server, locked_logs)
            })
        })
        .collect();

    let mut servers = Vec::new();
    let mut locked_logs = Vec::new();
    for worker in workers {
        let (server, logs) = worker.join().expect("a worker panicked");
        servers.push(server);
        locked_logs.extend(logs);
    }

    let written = written.lock().unwrap().clone();
    let outcome = std::mem::take(&mut *outcome.lock().unwrap());
    let total = PROCESSES * WRITES_PER_PROCESS;
    let ids: HashSet<&str> = written.iter().map(|w| w.id.as_str()).collect();

    // Every process now sees exactly every acknowledged memory, with its content.
    let mut final_view_mismatches = Vec::new();
    for server in &mut servers {
        let listed = server.list_all();
        let listed_ids: HashSet<&str> = listed.iter().map(|m| m.id.as_str()).collect();
        if listed_ids != ids {
            final_view_mismatches.push(format!(
                "{} lists {} memories, {} acknowledged",
                server.label,
                listed.len(),
                ids.len()
            ));
        }
    }
    let rows = sqlite_memories(&db);
    let lost: Vec<&Written> = written
        .iter()
        .filter(|w| rows.get(&w.id) != Some(&w.content))
        .collect();
    let check = integrity_check(&db);
    for server in servers {
        let label = server.label.clone();
        let status = server.finish();
        assert!(status.success(), "{label} exit: {status:?}");
    }

    let locked_errors = outcome
        .errors
        .iter()
        .filter(|e| e.to_lowercase().contains("locked"))
        .count();
    eprintln!(
        "reliability multiprocess_sqlite: processes={PROCESSES} writes={total} acknowledged={} \
         lost={} rows={} errors={} locked_errors={locked_errors} locked_log_lines={} \
         cross_recalls={} cross_lists={} stale_reads={} elapsed={:.1}s seed={seed}",
        written.len(),
        lost.len(),
        rows.len(),
        outcome.errors.len(),
        locked_logs.len(),
        outcome.cross_recalls,
        outcome.cross_lists,
        outcome.stale_reads.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        outcome.errors.is_empty(),
        "calls failed while processes shared the file: {:?}",
        outcome.errors
    );
    assert_eq!(written.len(), total, "every write acknowledged");
    assert_eq!(ids.len(), total, "distinct ids");
    assert!(
        lost.is_empty(),
        "acknowledged but not in the file: {lost:?}"
    );
    assert_eq!(rows.len(), total, "nothing extra in the file");
    assert!(
        outcome.stale_reads.is_empty(),
        "a process missed another's acknowledged write: {:?}",
        outcome.stale_reads
    );
    assert!(
        final_view_mismatches.is_empty(),
        "{final_view_mismatches:?}"
    );
    assert!(
        outcome.cross_recalls > total / 2,
        "the cross-process reads ran"
    );
    assert_eq!(check, "ok", "integrity_check");
}

/// Processes that open one new file at once. Each trial starts `PROCESSES` servers, then
/// sends each its first call (which creates, switches to WAL and migrates the file) at the
/// same moment. Repeated because the race is narrow: one failing open in a few trials.
#[test]
fn processes_opening_one_new_file_at_once_all_succeed() {
    const TRIALS: usize = 40;
    let started = Instant::now();
    let mut errors = Vec::new();
    for trial in 0..TRIALS {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("new.db");
        let env = [
            ("CORTEX_DB_PATH", db.to_str().unwrap().to_owned()),
            ("CORTEX_EMBED_PROVIDER", "fake".to_owned()),
            ("CORTEX_USER_ID", "racer".to_owned()),
        ];
        let mut servers: Vec<Server> = (0..PROCESSES)
            .map(|p| Server::start(format!("trial {trial} process {p}"), &env))
            .collect();
        let ids: Vec<u64> = servers
            .iter_mut()
            .enumerate()
            .map(|(p, server)| {
                server.call_async(
                    "memorize",
                    json!({"content": format!("first write of process {p}")}),
                )
            })
            .collect();
        let mut acknowledged = 0;
        for (server, id) in servers.iter_mut().zip(ids) {
            match Reply::from(server.wait(id)) {
                Reply::Ok(_) => acknowledged += 1,
                other => errors.push(format!("{}: {other:?}", server.label)),
            }
        }
        // A failed first call is retried by the next one (the engine build is not cached
        // when it fails): the store must hold exactly the acknowledged writes.
        let rows = sqlite_memories(&db);
        assert_eq!(
            rows.len(),
            acknowledged,
            "trial {trial}: rows vs acknowledged"
        );
        assert_eq!(integrity_check(&db), "ok", "trial {trial}");
        for server in servers {
            assert!(server.finish().success());
        }
    }
    let locked = errors.iter().filter(|e| e.contains("locked")).count();
    eprintln!(
        "reliability multiprocess_new_file: trials={TRIALS} processes={PROCESSES} opens={} \
         errors={} locked_errors={locked} lost=0 elapsed={:.1}s",
        TRIALS * PROCESSES,
        errors.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        errors.is_empty(),
        "first calls failed while processes opened one new file at once:\n{}",
        errors.join("\n")
    );
}
