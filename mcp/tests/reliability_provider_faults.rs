//! The server against a fault-injecting embedding provider: a local mock speaking the
//! OpenAI-compatible `/embeddings` API (and Gemini's `batchEmbedContents`), scripted per
//! request to answer 429 with Retry-After, 5xx, hang past `CORTEX_PROVIDER_TIMEOUT_SECS`,
//! send garbage, the wrong dimension, non-finite or all-zero vectors.
//!
//! For each fault: retries happen as `providers/src/retry.rs` documents (counted on the
//! mock: retryable statuses and timeouts up to `CORTEX_PROVIDER_MAX_ATTEMPTS`, a provider's
//! wait honoured unless it passes the 30 s backoff cap or `CORTEX_PROVIDER_RETRY_BUDGET_SECS`,
//! everything else at once); a transient fault followed by success succeeds; a permanent
//! one is a tool error with a clear message; nothing is written (the SQLite rows are
//! identical before and after); and the server stays up (the next good call succeeds).

// Test helpers outside #[test] fns panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reliability;

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use reliability::{Reply, Server, sqlite_dump};
use serde_json::{Value, json};

const DIM: usize = 8;
const GEMINI_KEY: &str = "gemini-key-never-shown-7c41e2";
const OPENAI_KEY: &str = "sk-openai-key-never-shown-93ab";

/// What the mock does with one request.
#[derive(Debug, Clone)]
enum Act {
    /// A well-formed answer with one vector per input.
    Good,
    /// This status, these headers and this body.
    Answer(u16, Vec<(&'static str, String)>, String),
    /// Waits this long, then answers well (the client has long given up).
    Hang(Duration),
}

fn status(code: u16, body: Value) -> Act {
    Act::Answer(code, Vec::new(), body.to_string())
}

fn raw(code: u16, body: &str) -> Act {
    Act::Answer(code, Vec::new(), body.to_owned())
}

#[derive(Debug)]
struct Hit {
    at: Instant,
    path: String,
    body: String,
    auth: String,
}

#[derive(Debug, Default)]
struct MockState {
    script: VecDeque<Act>,
    hits: Vec<Hit>,
}

type Shared = Arc<Mutex<MockState>>;

/// The mock provider on 127.0.0.1, on a runtime of its own.
struct Mock {
    state: Shared,
    base: String,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Mock {
    fn start() -> Mock {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let state: Shared = Arc::default();
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(state.clone());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Mock {
            state,
            base,
            runtime: Some(runtime),
        }
    }

    fn script(&self, acts: Vec<Act>) {
        let mut state = self.state.lock().unwrap();
        state.script = acts.into();
        state.hits.clear();
    }

    fn hits(&self) -> Vec<(Instant, String, String, String)> {
        self.state
            .lock()
            .unwrap()
            .hits
            .iter()
            .map(|h| (h.at, h.path.clone(), h.body.clone(), h.auth.clone()))
            .collect()
    }

    fn unused(&self) -> usize {
        self.state.lock().unwrap().script.len()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

async fn answer(
    State(state): State<Shared>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let text = String::from_utf8_lossy(&body).into_owned();
    let auth = ["authorization", "x-goog-api-key"]
        .iter()
        .filter_map(|h| headers.get(*h).and_then(|v| v.to_str().ok()))
        .collect::<Vec<_>>()
        .join(" ");
    let act = {
        let mut state = state.lock().unwrap();
        state.hits.push(Hit {
            at: Instant::now(),
            path: uri.path().to_owned(),
            body: text.clone(),
            auth,
        });
        state.script.pop_front().unwrap_or(Act::Good)
    };
    let (code, extra, body) = match act {
        Act::Good => (200, Vec::new(), good_answer(uri.path(), &text)),
        Act::Answer(code, headers, body) => (code, headers, body),
        Act::Hang(wait) => {
            tokio::time::sleep(wait).await;
            (200, Vec::new(), good_answer(uri.path(), &text))
        }
    };
    let mut response = Response::builder()
        .status(StatusCode::from_u16(code).unwrap())
        .header("content-type", "application/json");
    for (name, value) in extra {
        response = response.header(name, value);
    }
    response.body(Body::from(body)).unwrap()
}

/// A well-formed answer to an OpenAI `/embeddings` or a Gemini `batchEmbedContents`
/// request: one deterministic, non-zero vector per input text (shared words, similar
/// vectors), so recall works through the mock.
fn good_answer(path: &str, request: &str) -> String {
    let request: Value = serde_json::from_str(request).unwrap_or(Value::Null);
    if path.ends_with(":batchEmbedContents") {
        let texts: Vec<String> = request["requests"]
            .as_array()
            .map(|rs| {
                rs.iter()
                    .map(|r| {
                        r["content"]["parts"][0]["text"]
                            .as_str()
                            .unwrap_or("")
                            .to_owned()
                    })
                    .collect()
            })
            .unwrap_or_default();
        let embeddings: Vec<Value> = texts.iter().map(|t| json!({"values": vector(t)})).collect();
        json!({"embeddings": embeddings}).to_string()
    } else {
        let texts: Vec<String> = request["input"]
            .as_array()
            .map(|i| {
                i.iter()
                    .map(|t| t.as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default();
        let data: Vec<Value> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": vector(t)}))
            .collect();
        json!({"object": "list", "data": data, "usage": {"prompt_tokens": 3, "total_tokens": 3}})
            .to_string()
    }
}

fn vector(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; DIM];
    for word in text.split_whitespace() {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in word.to_lowercase().bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        v[(h % DIM as u64) as usize] += 1.0;
    }
    if v.iter().all(|x| *x == 0.0) {
        v[0] = 1.0;
    }
    v
}

/// One OpenAI-shaped answer carrying this single embedding.
fn openai_vector(values: &str) -> Act {
    raw(
        200,
        &format!(
            r#"{{"object":"list","data":[{{"object":"embedding","index":0,"embedding":{values}}}]}}"#
        ),
    )
}

/// What a scenario must end in.
#[derive(Debug)]
enum Expect {
    /// Success after exactly this many requests.
    Success(usize),
    /// A tool error after exactly this many requests, whose text has every fragment.
    Failure(usize, &'static [&'static str]),
}

struct Scenario {
    name: &'static str,
    tool: &'static str,
    script: Vec<Act>,
    expect: Expect,
    /// Shortest gap between the first and second request (a provider-requested wait).
    waited_at_least: Option<Duration>,
}

fn scenario(name: &'static str, script: Vec<Act>, expect: Expect) -> Scenario {
    Scenario {
        name,
        tool: "memorize",
        script,
        expect,
        waited_at_least: None,
    }
}

#[derive(Debug, Default)]
struct Figures {
    scenarios: usize,
    requests: usize,
    retried_successes: usize,
    failures_reported: usize,
    unexpected: Vec<String>,
}

/// Runs each scenario against `server`, checking requests, reply, store and liveness.
fn run(
    provider: &str,
    server: &mut Server,
    mock: &Mock,
    db: &Path,
    secret: &str,
    scenarios: Vec<Scenario>,
    figures: &mut Figures,
) {
    for (n, s) in scenarios.into_iter().enumerate() {
        let label = format!("{provider}: {}", s.name);
        let rows_before = sqlite_dump(db);
        let listed_before = server.list_all();
        let content = format!("scenario {n} {} memory", s.name);
        let args = match s.tool {
            "recall" => json!({"query": content}),
            _ => json!({"content": content}),
        };
        let expected_unused = match &s.expect {
            Expect::Success(requests) | Expect::Failure(requests, _) => {
                s.script.len().saturating_sub(*requests)
            }
        };
        mock.script(s.script);
        let reply = server.call(s.tool, args);
        let hits = mock.hits();
        figures.scenarios += 1;
        figures.requests += hits.len();
        let mut problems = Vec::new();
        for (_, path, body, auth) in &hits {
            if !body.contains(&content) {
                problems.push(format!("a request to {path} without the text: {body}"));
            }
            if !auth.contains(secret) {
                problems.push(format!("a request to {path} without the key"));
            }
        }
        if let (Some(least), [first, second, ..]) = (s.waited_at_least, hits.as_slice()) {
            // A lower bound only: the client must have slept what the provider asked.
            let gap = second.0 - first.0;
            if gap < least {
                problems.push(format!("retried after {gap:?}, asked to wait {least:?}"));
            }
        }
        let want_requests = match &s.expect {
            Expect::Success(requests) | Expect::Failure(requests, _) => *requests,
        };
        if hits.len() != want_requests {
            problems.push(format!(
                "{} requests reached the provider, expected {want_requests}",
                hits.len()
            ));
        }
        if mock.unused() != expected_unused {
            problems.push(format!("{} scripted answers left unused", mock.unused()));
        }
        match (&s.expect, &reply) {
            (Expect::Success(requests), Reply::Ok(out)) => {
                if *requests > 1 {
                    figures.retried_successes += 1;
                }
                if s.tool == "memorize" {
                    let id = out["id"].as_str().unwrap_or_default();
                    let after = server.list_all();
                    if after.len() != listed_before.len() + 1 || after[0].id != id {
                        problems.push(format!("memorize succeeded but {id} is not listed first"));
                    }
                }
            }
            (Expect::Failure(_, fragments), Reply::ToolError(text)) => {
                figures.failures_reported += 1;
                for fragment in *fragments {
                    if !text.contains(fragment) {
                        problems.push(format!("the error lacks {fragment:?}: {text}"));
                    }
                }
                if text.contains(secret) {
                    problems.push(format!("the error shows the API key: {text}"));
                }
                if sqlite_dump(db) != rows_before {
                    problems.push("the store changed after a failed call".into());
                }
                if server.list_all() != listed_before {
                    problems.push("list_memories changed after a failed call".into());
                }
                // The server is still up: a good call (the mock answers well by
                // default) succeeds.
                if !server.is_alive() {
                    problems.push("the server exited".into());
                } else if let reply @ (Reply::ToolError(_) | Reply::RpcError(_)) =
                    server.call("recall", json!({"query": "baseline memory"}))
                {
                    problems.push(format!("the next good call failed: {reply:?}"));
                }
            }
            (expect, reply) => problems.push(format!("expected {expect:?}, got {reply:?}")),
        }
        if problems.is_empty() {
            let said = reply
                .error_text()
                .map_or_else(String::new, |text| format!(": {text}"));
            eprintln!("  ok   {label}: {} request(s){said}", hits.len());
        } else {
            eprintln!("  FAIL {label}: {problems:?}");
            figures
                .unexpected
                .push(format!("{label}: {}", problems.join("; ")));
        }
    }
}

/// Settings shared by every server here. The attempt timeout is 10 s (a loaded CI machine
/// never makes a good localhost answer that slow) except where a test is about hangs.
fn base_env(db: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("CORTEX_DB_PATH", db.to_str().unwrap().to_owned()),
        ("CORTEX_EMBED_DIM", DIM.to_string()),
        ("CORTEX_PROVIDER_TIMEOUT_SECS", "10".into()),
        ("CORTEX_PROVIDER_MAX_ATTEMPTS", "3".into()),
        ("CORTEX_PROVIDER_RETRY_BUDGET_SECS", "30".into()),
        ("CORTEX_USER_ID", "fault-tester".into()),
    ]
}

fn openai_env(db: &Path, mock: &Mock) -> Vec<(&'static str, String)> {
    let mut env = base_env(db);
    env.extend([
        ("CORTEX_EMBED_PROVIDER", "openai".to_owned()),
        ("CORTEX_EMBED_MODEL", "mock-embed".to_owned()),
        ("CORTEX_OPENAI_BASE_URL", format!("{}/v1", mock.base)),
        ("OPENAI_API_KEY", OPENAI_KEY.to_owned()),
    ]);
    env
}

fn openai_scenarios() -> Vec<Scenario> {
    use Expect::{Failure, Success};
    let unavailable = || {
        status(
            503,
            json!({"error": {"message": "overloaded", "type": "server_error"}}),
        )
    };
    let provider_failed: &[&str] = &["embedding provider failed", "Nothing was changed"];
    vec![
        Scenario {
            waited_at_least: Some(Duration::from_millis(950)),
            ..scenario(
                "429 with Retry-After 1, then success",
                vec![Act::Answer(
                    429,
                    vec![("retry-after", "1".into())],
                    json!({"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}})
                        .to_string(),
                )],
                Success(2),
            )
        },
        scenario(
            "503 then 500, then success",
            vec![unavailable(), raw(500, "internal error")],
            Success(3),
        ),
        scenario(
            "502 on every attempt",
            vec![raw(502, "bad gateway"); 3],
            Failure(3, &["embedding provider failed", "502", "gave up after 3 attempts", "Nothing was changed"]),
        ),
        scenario(
            "429 asking for 31 s, past the 30 s backoff cap",
            vec![Act::Answer(429, vec![("retry-after", "31".into())], "{}".into())],
            Failure(1, &["429", "beyond the retry limit", "Nothing was changed"]),
        ),
        scenario(
            "429 insufficient_quota (not retried)",
            vec![status(
                429,
                json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}),
            )],
            Failure(1, &["429", "exceeded your current quota", "Nothing was changed"]),
        ),
        scenario(
            "400 (not retried)",
            vec![status(400, json!({"error": {"message": "input is invalid", "code": "invalid_request"}}))],
            Failure(1, &["400", "input is invalid", "Nothing was changed"]),
        ),
        scenario(
            "401 (not retried)",
            vec![status(401, json!({"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}))],
            Failure(1, &["401", "Incorrect API key", "Nothing was changed"]),
        ),
        scenario(
            "garbage body",
            vec![raw(200, "<html><body>Gateway says hi</body></html>")],
            Failure(1, &["embedding provider failed", "cannot decode"]),
        ),
        scenario("empty body", vec![raw(200, "")], Failure(1, &["cannot decode"])),
        scenario(
            "truncated JSON",
            vec![raw(200, r#"{"object":"list","data":[{"index":0,"embedding":[0.1,0.2"#)],
            Failure(1, &["cannot decode"]),
        ),
        scenario(
            "NaN literals",
            vec![openai_vector("[NaN,NaN,NaN,NaN,NaN,NaN,NaN,NaN]")],
            Failure(1, &["embedding provider failed"]),
        ),
        scenario(
            "values overflowing f32 (infinite)",
            vec![openai_vector("[1e39,0,0,0,0,0,0,0]")],
            Failure(1, &["embedding provider failed", "not finite"]),
        ),
        scenario(
            "wrong dimension",
            vec![openai_vector("[0.1,0.2,0.3,0.4,0.5]")],
            Failure(1, &["embedding provider failed", "expected dimension 8, got 5"]),
        ),
        scenario(
            "all-zero vector",
            vec![openai_vector("[0,0,0,0,0,0,0,0]")],
            Failure(1, &["embedding provider failed", "all zeros"]),
        ),
        scenario(
            "no vectors",
            vec![status(200, json!({"object": "list", "data": []}))],
            Failure(1, &["expected 1 vectors, got 0"]),
        ),
        scenario(
            "an error envelope with status 200",
            vec![status(200, json!({"error": {"message": "model not loaded"}}))],
            Failure(1, &["embedding provider failed"]),
        ),
        scenario(
            "a wrong index",
            vec![status(200, json!({"data": [{"index": 3, "embedding": [1, 0, 0, 0, 0, 0, 0, 0]}]}))],
            Failure(1, &["embedding provider failed", "indices"]),
        ),
        Scenario {
            tool: "recall",
            ..scenario(
                "recall while the provider is down",
                vec![unavailable(), unavailable(), unavailable()],
                Failure(3, provider_failed),
            )
        },
        Scenario {
            tool: "recall",
            ..scenario("recall after one 503", vec![unavailable()], Success(2))
        },
    ]
}

#[test]
fn openai_compatible_provider_faults() {
    let started = Instant::now();
    let mock = Mock::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("faults.db");
    let mut server = Server::start("openai faults", &openai_env(&db, &mock));
    let mut figures = Figures::default();

    mock.script(Vec::new());
    server.ok(
        "memorize",
        json!({"content": "baseline memory kept through every fault"}),
    );
    assert_eq!(mock.hits().len(), 1, "one request per memorize");
    let (_, path, body, _) = &mock.hits()[0];
    assert_eq!(path, "/v1/embeddings");
    let request: Value = serde_json::from_str(body).unwrap();
    assert_eq!(request["model"], "mock-embed", "{request}");

    run(
        "openai",
        &mut server,
        &mock,
        &db,
        OPENAI_KEY,
        openai_scenarios(),
        &mut figures,
    );

    // The server is up after all of it: a good write and a recall that finds it.
    mock.script(Vec::new());
    let out = server.ok("memorize", json!({"content": "written after every fault"}));
    let id = out["id"].as_str().unwrap().to_owned();
    assert!(server.recall_finds("written after every fault", &id, 10));
    let status = server.finish();
    assert!(status.success(), "{status:?}");
    report("provider_faults_openai", &figures, started);
}

/// A provider that accepts the connection and never answers, with a 1 s
/// `CORTEX_PROVIDER_TIMEOUT_SECS`: each attempt is cut at the timeout and retried.
#[test]
fn a_hanging_provider_is_timed_out_and_retried() {
    let started = Instant::now();
    let mock = Mock::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("hang.db");
    let mut env = openai_env(&db, &mock);
    env.retain(|(k, _)| *k != "CORTEX_PROVIDER_TIMEOUT_SECS");
    env.push(("CORTEX_PROVIDER_TIMEOUT_SECS", "1".into()));
    let mut server = Server::start("hang", &env);
    mock.script(Vec::new());
    server.ok("memorize", json!({"content": "baseline memory"}));
    let mut figures = Figures::default();
    let hang = || Act::Hang(Duration::from_secs(3));
    let scenarios = vec![
        scenario(
            "a hang past the timeout, then success",
            vec![hang()],
            Expect::Success(2),
        ),
        scenario(
            "a hang on every attempt",
            vec![hang(), hang(), hang()],
            Expect::Failure(
                3,
                &[
                    "embedding provider failed",
                    "timed out",
                    "gave up after 3 attempts",
                ],
            ),
        ),
        Scenario {
            tool: "recall",
            ..scenario(
                "recall while the provider hangs",
                vec![hang(), hang(), hang()],
                Expect::Failure(3, &["embedding provider failed", "timed out"]),
            )
        },
    ];
    run(
        "openai hang",
        &mut server,
        &mock,
        &db,
        OPENAI_KEY,
        scenarios,
        &mut figures,
    );
    assert!(server.finish().success());
    report("provider_faults_hang", &figures, started);
}

/// The retry budget, with a server whose `CORTEX_PROVIDER_RETRY_BUDGET_SECS` is 2.
#[test]
fn retry_budget_caps_a_provider_requested_wait() {
    let started = Instant::now();
    let mock = Mock::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("budget.db");
    let mut env = openai_env(&db, &mock);
    env.retain(|(k, _)| *k != "CORTEX_PROVIDER_RETRY_BUDGET_SECS");
    env.push(("CORTEX_PROVIDER_RETRY_BUDGET_SECS", "2".into()));
    let mut server = Server::start("budget", &env);
    mock.script(Vec::new());
    server.ok("memorize", json!({"content": "baseline memory"}));
    let mut figures = Figures::default();
    let scenarios = vec![
        scenario(
            "429 asking for 5 s with a 2 s budget",
            vec![Act::Answer(
                429,
                vec![("retry-after", "5".into())],
                "{}".into(),
            )],
            Expect::Failure(
                1,
                &[
                    "429",
                    "retry time budget of 2s spent",
                    "Nothing was changed",
                ],
            ),
        ),
        scenario(
            "503 without a hint: our own backoff fits the budget",
            vec![raw(503, "")],
            Expect::Success(2),
        ),
    ];
    run(
        "openai budget",
        &mut server,
        &mock,
        &db,
        OPENAI_KEY,
        scenarios,
        &mut figures,
    );
    assert!(server.finish().success());
    report("provider_faults_budget", &figures, started);
}

#[test]
fn gemini_provider_faults() {
    let started = Instant::now();
    let mock = Mock::start();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gemini.db");
    let mut env = base_env(&db);
    env.extend([
        ("CORTEX_EMBED_PROVIDER", "gemini".to_owned()),
        ("CORTEX_EMBED_MODEL", "mock-gemini-embed".to_owned()),
        ("CORTEX_GEMINI_BASE_URL", format!("{}/v1beta", mock.base)),
        ("GEMINI_API_KEY", GEMINI_KEY.to_owned()),
    ]);
    let mut server = Server::start("gemini faults", &env);
    mock.script(Vec::new());
    server.ok("memorize", json!({"content": "baseline memory"}));
    let (_, path, _, _) = &mock.hits()[0];
    assert!(
        path.ends_with("mock-gemini-embed:batchEmbedContents"),
        "{path}"
    );

    let mut figures = Figures::default();
    let retry_info = json!({"error": {
        "code": 429,
        "message": "Resource has been exhausted",
        "status": "RESOURCE_EXHAUSTED",
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}]
    }});
    let scenarios = vec![
        Scenario {
            waited_at_least: Some(Duration::from_millis(950)),
            ..scenario(
                "429 with RetryInfo 1s in the body, then success",
                vec![status(429, retry_info)],
                Expect::Success(2),
            )
        },
        scenario(
            "503 on every attempt",
            vec![
                status(
                    503,
                    json!({"error": {"code": 503, "message": "The model is overloaded", "status": "UNAVAILABLE"}})
                );
                3
            ],
            Expect::Failure(
                3,
                &[
                    "embedding provider failed",
                    "overloaded",
                    "gave up after 3 attempts",
                ],
            ),
        ),
        scenario(
            "wrong dimension",
            vec![status(200, json!({"embeddings": [{"values": [0.5, 0.5]}]}))],
            Expect::Failure(
                1,
                &["embedding provider failed", "expected dimension 8, got 2"],
            ),
        ),
        scenario(
            "garbage body",
            vec![raw(200, "Service Unavailable")],
            Expect::Failure(1, &["cannot decode"]),
        ),
    ];
    run(
        "gemini",
        &mut server,
        &mock,
        &db,
        GEMINI_KEY,
        scenarios,
        &mut figures,
    );
    assert!(server.finish().success());
    report("provider_faults_gemini", &figures, started);
}

fn report(name: &str, figures: &Figures, started: Instant) {
    eprintln!(
        "reliability {name}: scenarios={} provider_requests={} retried_successes={} \
         failures_reported={} unexpected={} elapsed={:.1}s",
        figures.scenarios,
        figures.requests,
        figures.retried_successes,
        figures.failures_reported,
        figures.unexpected.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        figures.unexpected.is_empty(),
        "{name}: scenarios that did not behave as documented:\n{}",
        figures.unexpected.join("\n")
    );
}
