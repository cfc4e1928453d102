//! Durability under `kill -9`: a stream of memorize calls, the server SIGKILLed at a
//! random point while calls are in flight, restarted, and every acknowledged memory must
//! be there (same content) and recallable. On SQLite the file must also pass
//! `PRAGMA integrity_check` after each kill. Both backends; Postgres needs
//! `CORTEX_TEST_DATABASE_URL` (skip line without it, failure under CI).
//!
//! "Acknowledged" means the client received a successful `memorize` result carrying the
//! memory's id: that is the promise an agent relies on. Calls still in flight at the kill
//! may or may not have landed; those that did are counted, never required.

// Test helpers outside #[test] fns panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reliability;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use cortex_conformance::skip::test_database_url;
use reliability::{PgSchema, Reply, Rng, Server, integrity_check, sqlite_memories};
use serde_json::json;

const ROUNDS: usize = 5;
/// Calls kept in flight: the kill always lands with several outstanding.
const WINDOW: usize = 8;
/// Most calls sent in one round (the kill comes long before, at a random ack).
const MAX_SENT_PER_ROUND: usize = 400;

#[derive(Debug, Default)]
struct Tally {
    sent: usize,
    acked: usize,
    in_flight_at_kill: usize,
    committed_unacked: usize,
    lost: usize,
    errors: usize,
    recall_misses: usize,
}

enum Backend<'a> {
    Sqlite(&'a Path),
    Postgres,
}

/// Runs `ROUNDS` kill rounds and a final check against `env`; returns the figures.
fn kill_rounds(name: &str, env: &[(&str, String)], backend: &Backend<'_>) -> Tally {
    let mut rng = Rng::from_env_or_clock();
    let seed = rng.seed();
    let started = Instant::now();
    let mut tally = Tally::default();
    // Every content ever sent, and the acknowledged id of those that were acknowledged.
    let mut sent: HashSet<String> = HashSet::new();
    let mut acked: BTreeMap<String, String> = BTreeMap::new(); // id -> content
    let mut errors: Vec<String> = Vec::new();

    for round in 0..ROUNDS {
        let mut server = Server::start(format!("{name} round {round}"), env);
        // Memories from the previous rounds survive the restart.
        verify(&mut server, backend, &acked, &sent, &mut tally, round);

        let kill_after = rng.range(3, 80) as usize;
        let mut in_flight: HashMap<u64, String> = HashMap::new();
        let mut acked_this_round = 0usize;
        let mut sent_this_round = 0usize;
        loop {
            while in_flight.len() < WINDOW && sent_this_round < MAX_SENT_PER_ROUND {
                let content = format!(
                    "{name} round {round} call {sent_this_round}: the {} ledger holds {}",
                    rng.word(),
                    rng.word()
                );
                let id = server.call_async(
                    "memorize",
                    json!({"content": content, "kind": "fact", "tags": ["kill", format!("round-{round}")]}),
                );
                sent.insert(content.clone());
                in_flight.insert(id, content);
                sent_this_round += 1;
                tally.sent += 1;
            }
            let (id, reply) = server
                .next_reply(reliability::REPLY_TIMEOUT)
                .unwrap_or_else(|why| panic!("{name}: {why}\n{}", server.stderr_tail()));
            let Some(content) = in_flight.remove(&id) else {
                panic!("{name}: a reply to a request never sent: {reply}");
            };
            match Reply::from(reply) {
                Reply::Ok(out) => {
                    let memory_id = out["id"].as_str().expect("memorize returns an id");
                    assert_eq!(out["status"], "stored", "{out}");
                    acked.insert(memory_id.to_owned(), content);
                    acked_this_round += 1;
                    tally.acked += 1;
                }
                other => errors.push(format!("{other:?}")),
            }
            if acked_this_round >= kill_after || sent_this_round >= MAX_SENT_PER_ROUND {
                break;
            }
        }
        // Top the window up again so the kill lands on calls being served, after a
        // random pause of up to 3 ms.
        while in_flight.len() < WINDOW {
            let content = format!("{name} round {round} late call {}", rng.word());
            let id = server.call_async("memorize", json!({"content": content}));
            sent.insert(content.clone());
            in_flight.insert(id, content);
            tally.sent += 1;
        }
        thread::sleep(Duration::from_micros(rng.range(0, 3000)));
        server.kill();
        tally.in_flight_at_kill += in_flight.len();
    }

    // The last restart: everything acknowledged in any round is there and recallable,
    // and the server still stops cleanly.
    let mut server = Server::start(format!("{name} final"), env);
    verify(&mut server, backend, &acked, &sent, &mut tally, ROUNDS);
    let listed = server.list_all();
    tally.committed_unacked = listed.iter().filter(|m| !acked.contains_key(&m.id)).count();
    let status = server.finish();
    assert!(status.success(), "{name}: final shutdown: {status:?}");

    tally.errors = errors.len();
    eprintln!(
        "reliability {name}: rounds={ROUNDS} sent={} acknowledged={} in_flight_at_kill={} \
         committed_unacknowledged={} lost={} recall_misses={} errors={} elapsed={:.1}s seed={seed}",
        tally.sent,
        tally.acked,
        tally.in_flight_at_kill,
        tally.committed_unacked,
        tally.lost,
        tally.recall_misses,
        tally.errors,
        started.elapsed().as_secs_f64()
    );
    assert!(
        errors.is_empty(),
        "{name}: memorize calls failed before any kill: {errors:?}"
    );
    assert_eq!(tally.lost, 0, "{name}: acknowledged memories were lost");
    assert_eq!(
        tally.recall_misses, 0,
        "{name}: acknowledged memories not recallable"
    );
    assert!(
        tally.acked >= ROUNDS * 3,
        "{name}: too few acknowledged to mean anything"
    );
    tally
}

/// Checks, after a kill and restart, that every acknowledged memory is stored with its
/// exact content and found by recalling that content, and that nothing else appeared.
fn verify(
    server: &mut Server,
    backend: &Backend<'_>,
    acked: &BTreeMap<String, String>,
    sent: &HashSet<String>,
    tally: &mut Tally,
    round: usize,
) {
    let label = server.label.clone();
    if let Backend::Sqlite(path) = backend
        && path.exists()
    {
        let check = integrity_check(path);
        assert_eq!(check, "ok", "{label}: integrity_check after the kill");
        let rows = sqlite_memories(path);
        for (id, content) in acked {
            match rows.get(id) {
                Some(stored) => assert_eq!(stored, content, "{label}: content of {id}"),
                None => {
                    panic!("{label}: acknowledged memory {id} ({content:?}) is not in the file")
                }
            }
        }
    }

    let listed = server.list_all();
    let by_id: HashMap<&str, &str> = listed
        .iter()
        .map(|m| (m.id.as_str(), m.content.as_str()))
        .collect();
    let mut lost = Vec::new();
    for (id, content) in acked {
        match by_id.get(id.as_str()) {
            Some(stored) => assert_eq!(stored, content, "{label}: content of {id}"),
            None => lost.push(id.clone()),
        }
    }
    // Nothing that was never sent, and nothing twice.
    let mut seen = HashSet::new();
    for memory in &listed {
        assert!(
            sent.contains(&memory.content),
            "{label}: a memory nobody sent: {memory:?}"
        );
        assert!(
            seen.insert(memory.content.as_str()),
            "{label}: stored twice: {memory:?}"
        );
    }
    tally.lost = tally.lost.max(lost.len());
    assert!(
        lost.is_empty(),
        "{label}: {} acknowledged memories lost after the kill: {lost:?}",
        lost.len()
    );

    // Recall each memory acknowledged in the round just killed by its exact content.
    if round > 0 {
        let tag = format!("round {} call", round - 1);
        let late_tag = format!("round {} late call", round - 1);
        for (id, content) in acked {
            if (content.contains(&tag) || content.contains(&late_tag))
                && !server.recall_finds(content, id, 10)
            {
                tally.recall_misses += 1;
                eprintln!("{label}: recall of {content:?} did not return {id}");
            }
        }
    }
}

#[test]
fn sqlite_survives_kill_9_mid_stream() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("kill.db");
    let env = [
        ("CORTEX_DB_PATH", db.to_str().unwrap().to_owned()),
        ("CORTEX_EMBED_PROVIDER", "fake".to_owned()),
        ("CORTEX_USER_ID", "kill-tester".to_owned()),
    ];
    kill_rounds("kill9_sqlite", &env, &Backend::Sqlite(&db));
}

#[test]
fn postgres_survives_kill_9_mid_stream() {
    let Some(url) = test_database_url() else {
        return;
    };
    let schema = PgSchema::fresh(&url, "kill");
    let mut env = schema.env();
    env.push(("CORTEX_EMBED_PROVIDER", "fake".to_owned()));
    env.push(("CORTEX_USER_ID", "kill-tester".to_owned()));
    kill_rounds("kill9_postgres", &env, &Backend::Postgres);
}
