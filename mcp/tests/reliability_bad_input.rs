//! The bad-input table: for every tool and every argument, values an agent (or a broken
//! client) might send — wrong types, null, empty and blank strings, strings past the
//! documented limits, NUL, malformed ids and dates, nested objects — each sent to the
//! `cortex-mcp` binary over stdio against a seeded SQLite store.
//!
//! Every call must be answered with an error, never a success, a crash or a hang; the
//! store's rows must be identical (record for record, every table) before and after each
//! one; and the server must still serve a good call at the end. Argument-level refusals
//! must be tool results with `isError: true` (docs/CONFIGURATION.md: "never a protocol
//! error"); a malformed `tools/call` itself (unknown tool, arguments not an object) may be
//! a JSON-RPC error. Documented leniencies (limits clamped to 1..=1000, blank dates as
//! unbounded, null optional arguments) are checked to succeed without writing. Lines that
//! are not JSON at all (lone surrogate escapes, invalid UTF-8, truncation, nesting past
//! serde's limit, a line over 16 MiB) must not disturb the server; whether they are
//! answered is reported. Unknown extra arguments are refused with a message naming the
//! stray argument and a valid one, and change nothing.

// Test helpers outside #[test] fns panic on failure by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod reliability;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use cortex_core::records::{EntityEdge, EntityRole, EntityUpsert, Event};
use cortex_core::{engine::CortexMemory, enrichment_store::EnrichmentStore, memory::MemoryKind};
use cortex_providers::FakeProvider;
use cortex_sqlite::SqliteStore;
use reliability::{Reply, Server, sqlite_dump};
use serde_json::{Value, json};

const USER: &str = "table-tester";

/// How a row must be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// A tool result with `isError: true`.
    ToolError,
    /// Any error: a tool error or a JSON-RPC error.
    AnyError,
    /// A success that changes nothing (a documented leniency of a read-only tool).
    Lenient,
}

#[derive(Debug)]
struct Row {
    label: String,
    /// The argument the row is about; a good error message names it.
    field: &'static str,
    /// The `params` of a `tools/call`, or a whole message when `whole` is set.
    params: Value,
    whole: bool,
    want: Want,
}

fn args(tool: &str, field: &'static str, label: &str, arguments: Value, want: Want) -> Row {
    Row {
        label: format!("{tool}.{field}: {label}"),
        field,
        params: json!({"name": tool, "arguments": arguments}),
        whole: false,
        want,
    }
}

/// Wrong JSON types for a string argument (null is separate: it means "absent").
fn non_strings() -> Vec<(&'static str, Value)> {
    vec![
        ("integer", json!(42)),
        ("float", json!(4.2)),
        ("boolean", json!(true)),
        ("empty array", json!([])),
        ("array of string", json!(["text"])),
        ("empty object", json!({})),
        ("nested object", json!({"a": {"b": [1, {"c": null}]}})),
    ]
}

/// Wrong JSON types and out-of-range numbers for a `limit`.
fn bad_limits() -> Vec<(&'static str, Value)> {
    vec![
        ("numeric string", json!("10")),
        ("word", json!("many")),
        ("fraction", json!(4.5)),
        ("float with integral value", json!(1000.0)),
        ("boolean", json!(false)),
        ("array", json!([10])),
        ("object", json!({"value": 10})),
        ("u64 past i64::MAX", json!(9_223_372_036_854_775_808_u64)),
        ("u64::MAX", json!(u64::MAX)),
    ]
}

/// Limits the docs say are clamped to 1..=1000 rather than refused.
fn clamped_limits() -> Vec<(&'static str, Value)> {
    vec![
        ("zero", json!(0)),
        ("negative", json!(-1)),
        ("i64::MIN", json!(i64::MIN)),
        ("5000", json!(5000)),
        ("i64::MAX", json!(i64::MAX)),
        ("null", Value::Null),
    ]
}

fn rows(existing_ids: &[String]) -> Vec<Row> {
    use Want::{AnyError, Lenient, ToolError};
    let mut rows = Vec::new();
    let long = |n: usize| "a".repeat(n);
    let mib = 1 << 20;

    // memorize.content
    rows.push(args("memorize", "content", "missing", json!({}), ToolError));
    rows.push(args(
        "memorize",
        "content",
        "null",
        json!({"content": null}),
        ToolError,
    ));
    for (label, value) in non_strings() {
        rows.push(args(
            "memorize",
            "content",
            label,
            json!({"content": value}),
            ToolError,
        ));
    }
    for (label, text) in [
        ("empty", String::new()),
        ("blank", "   ".into()),
        ("whitespace controls", "\n\t\r ".into()),
        ("NUL inside", "before\u{0}after".into()),
        ("only NUL", "\u{0}".into()),
        ("32 KiB + 1 bytes", long(32 * 1024 + 1)),
        (
            "32 KiB + 2 bytes of two-byte characters",
            "é".repeat(16 * 1024 + 1),
        ),
        ("4 MiB", long(4 * mib)),
    ] {
        rows.push(args(
            "memorize",
            "content",
            label,
            json!({"content": text}),
            ToolError,
        ));
    }
    // memorize.kind (the content is valid: only the kind can refuse the call)
    let ok_content = "a valid statement that must not be stored";
    for (label, value) in non_strings() {
        rows.push(args(
            "memorize",
            "kind",
            label,
            json!({"content": ok_content, "kind": value}),
            ToolError,
        ));
    }
    for (label, kind) in [
        ("unknown kind", "opinion".to_owned()),
        ("plural", "facts".into()),
        ("punctuated", "fact!".into()),
        ("NUL suffix", "fact\u{0}".into()),
        ("1 MiB", long(mib)),
    ] {
        rows.push(args(
            "memorize",
            "kind",
            label,
            json!({"content": ok_content, "kind": kind}),
            ToolError,
        ));
    }
    // memorize.tags
    let seventeen: Vec<String> = (0..17).map(|i| format!("tag{i}")).collect();
    let thousand: Vec<String> = (0..1000).map(|i| format!("tag{i}")).collect();
    for (label, value) in [
        ("a string, not a list", json!("work")),
        ("integer", json!(7)),
        ("object", json!({"work": true})),
        ("list of integers", json!([1, 2])),
        ("list with null", json!(["work", null])),
        ("list with boolean", json!([true])),
        ("nested list", json!([["work"]])),
        ("list of objects", json!([{}])),
        ("empty tag", json!([""])),
        ("blank tag", json!(["   "])),
        ("65-character tag", json!([long(65)])),
        ("1 MiB tag", json!([long(mib)])),
        ("tag with a control character", json!(["a\u{7}b"])),
        ("tag with NUL", json!(["a\u{0}b"])),
        ("17 tags", json!(seventeen)),
        ("1000 tags", json!(thousand)),
    ] {
        rows.push(args(
            "memorize",
            "tags",
            label,
            json!({"content": ok_content, "tags": value}),
            ToolError,
        ));
    }

    // recall.query and recall.limit
    rows.push(args("recall", "query", "missing", json!({}), ToolError));
    rows.push(args(
        "recall",
        "query",
        "null",
        json!({"query": null}),
        ToolError,
    ));
    for (label, value) in non_strings() {
        rows.push(args(
            "recall",
            "query",
            label,
            json!({"query": value}),
            ToolError,
        ));
    }
    for (label, text) in [
        ("empty", String::new()),
        ("blank", "  \n ".into()),
        ("NUL", "coffee\u{0}".into()),
        ("32 KiB + 1 bytes", long(32 * 1024 + 1)),
        ("4 MiB", long(4 * mib)),
    ] {
        rows.push(args(
            "recall",
            "query",
            label,
            json!({"query": text}),
            ToolError,
        ));
    }
    for (label, value) in bad_limits() {
        rows.push(args(
            "recall",
            "limit",
            label,
            json!({"query": "coffee", "limit": value}),
            ToolError,
        ));
    }
    for (label, value) in clamped_limits() {
        rows.push(args(
            "recall",
            "limit",
            label,
            json!({"query": "coffee", "limit": value}),
            Lenient,
        ));
    }

    // recall_about.entity and recall_about.limit
    rows.push(args(
        "recall_about",
        "entity",
        "missing",
        json!({}),
        ToolError,
    ));
    rows.push(args(
        "recall_about",
        "entity",
        "null",
        json!({"entity": null}),
        ToolError,
    ));
    for (label, value) in non_strings() {
        rows.push(args(
            "recall_about",
            "entity",
            label,
            json!({"entity": value}),
            ToolError,
        ));
    }
    for (label, text) in [
        ("empty", String::new()),
        ("blank", "   ".into()),
        ("unknown entity", "Nobody We Know".into()),
        ("NUL", "Ada\u{0}".into()),
        ("1 MiB", long(mib)),
    ] {
        rows.push(args(
            "recall_about",
            "entity",
            label,
            json!({"entity": text}),
            ToolError,
        ));
    }
    for (label, value) in bad_limits() {
        rows.push(args(
            "recall_about",
            "limit",
            label,
            json!({"entity": "Ada", "limit": value}),
            ToolError,
        ));
    }
    for (label, value) in clamped_limits() {
        rows.push(args(
            "recall_about",
            "limit",
            label,
            json!({"entity": "Ada", "limit": value}),
            Lenient,
        ));
    }

    // recall_timeline.since / until / limit
    for field in ["since", "until"] {
        for (label, value) in non_strings() {
            rows.push(args(
                "recall_timeline",
                field_name(field),
                label,
                json!({ field: value }),
                ToolError,
            ));
        }
        for (label, text) in [
            ("a word", "yesterday".to_owned()),
            ("month 13", "2024-13-01".into()),
            ("February 30", "2024-02-30".into()),
            ("datetime without a zone", "2024-05-01T14:30:00".into()),
            ("hour 25", "2024-05-01T25:00:00Z".into()),
            ("day-first", "01/05/2024".into()),
            ("trailing text", "2024-05-01 and more".into()),
            ("seven-digit year", "9999999-01-01".into()),
            ("unix seconds as text", "1714521600".into()),
            ("NUL", "2024-05-01\u{0}".into()),
            ("1 MiB", long(mib)),
        ] {
            rows.push(args(
                "recall_timeline",
                field_name(field),
                label,
                json!({ field: text }),
                ToolError,
            ));
        }
        rows.push(args(
            "recall_timeline",
            field_name(field),
            "blank",
            json!({ field: "  " }),
            Lenient,
        ));
        rows.push(args(
            "recall_timeline",
            field_name(field),
            "null",
            json!({ field: null }),
            Lenient,
        ));
    }
    rows.push(args(
        "recall_timeline",
        "since",
        "since after until",
        json!({"since": "2024-06-01", "until": "2024-01-01"}),
        ToolError,
    ));
    for (label, value) in bad_limits() {
        rows.push(args(
            "recall_timeline",
            "limit",
            label,
            json!({"limit": value}),
            ToolError,
        ));
    }
    for (label, value) in clamped_limits() {
        rows.push(args(
            "recall_timeline",
            "limit",
            label,
            json!({"limit": value}),
            Lenient,
        ));
    }

    // list_memories.limit
    for (label, value) in bad_limits() {
        rows.push(args(
            "list_memories",
            "limit",
            label,
            json!({"limit": value}),
            ToolError,
        ));
    }
    for (label, value) in clamped_limits() {
        rows.push(args(
            "list_memories",
            "limit",
            label,
            json!({"limit": value}),
            Lenient,
        ));
    }

    // forget.memory_id: nothing may be deleted.
    let unknown = uuid::Uuid::new_v4().to_string();
    let unmatched_prefix = (0..u32::MAX)
        .map(|_| uuid::Uuid::new_v4().to_string()[..8].to_owned())
        .find(|p| !existing_ids.iter().any(|id| id.starts_with(p.as_str())))
        .unwrap();
    let first = &existing_ids[0];
    rows.push(args("forget", "memory_id", "missing", json!({}), ToolError));
    rows.push(args(
        "forget",
        "memory_id",
        "null",
        json!({"memory_id": null}),
        ToolError,
    ));
    for (label, value) in non_strings() {
        rows.push(args(
            "forget",
            "memory_id",
            label,
            json!({"memory_id": value}),
            ToolError,
        ));
    }
    for (label, id) in [
        ("empty", String::new()),
        ("blank", "    ".into()),
        ("3 hex characters of a real id", first[..3].to_owned()),
        ("hyphens only", "----".into()),
        ("not hex", "zzzz".into()),
        ("words", "not-an-id".into()),
        ("SQL", "'; DROP TABLE memories; --".into()),
        ("LIKE wildcard", "%".into()),
        ("prefix with a LIKE wildcard", format!("{}%", &first[..4])),
        ("prefix with a LIKE underscore", format!("{}_", &first[..4])),
        ("glob star", format!("{}*", &first[..4])),
        ("NUL inside a real prefix", format!("{}\u{0}", &first[..6])),
        ("full-width digits", "１２３４".into()),
        ("a real id plus one character", format!("{first}0")),
        ("a real id with a trailing word", format!("{first} please")),
        ("40 hex characters", "a".repeat(40)),
        ("unknown full id", unknown.clone()),
        ("unknown full id, upper case", unknown.to_uppercase()),
        ("unknown id without hyphens", unknown.replace('-', "")),
        ("unknown braced id", format!("{{{unknown}}}")),
        ("unknown urn id", format!("urn:uuid:{unknown}")),
        ("well-formed prefix matching nothing", unmatched_prefix),
        ("1 MiB", long(mib)),
    ] {
        rows.push(args(
            "forget",
            "memory_id",
            label,
            json!({"memory_id": id}),
            ToolError,
        ));
    }

    // Malformed tools/call requests.
    let call = |label: &str, params: Value| Row {
        label: format!("tools/call: {label}"),
        field: "",
        params,
        whole: false,
        want: AnyError,
    };
    rows.push(call(
        "unknown tool",
        json!({"name": "no_such_tool", "arguments": {}}),
    ));
    rows.push(call(
        "tool name in upper case",
        json!({"name": "MEMORIZE", "arguments": {"content": ok_content}}),
    ));
    rows.push(call(
        "tool name with a trailing space",
        json!({"name": "memorize ", "arguments": {"content": ok_content}}),
    ));
    rows.push(call(
        "empty tool name",
        json!({"name": "", "arguments": {}}),
    ));
    rows.push(call(
        "tool name not a string",
        json!({"name": 42, "arguments": {}}),
    ));
    rows.push(call("tool name null", json!({"name": null})));
    rows.push(call(
        "no tool name",
        json!({"arguments": {"content": ok_content}}),
    ));
    for tool in [
        "memorize",
        "recall",
        "list_memories",
        "recall_timeline",
        "forget",
    ] {
        for (label, arguments) in [
            ("a string", json!("content")),
            ("an integer", json!(42)),
            ("an array", json!([ok_content])),
            ("a boolean", json!(true)),
        ] {
            rows.push(call(
                &format!("{tool} with arguments {label}"),
                json!({"name": tool, "arguments": arguments}),
            ));
        }
    }
    // Arguments null or absent mean "no arguments": an error only for a tool with a
    // required argument.
    for tool in ["memorize", "recall", "recall_about", "forget"] {
        rows.push(call(
            &format!("{tool} with arguments null"),
            json!({"name": tool, "arguments": null}),
        ));
        rows.push(call(
            &format!("{tool} without arguments"),
            json!({"name": tool}),
        ));
    }
    for (label, message) in [
        (
            "params missing",
            json!({"jsonrpc": "2.0", "method": "tools/call"}),
        ),
        (
            "params an array",
            json!({"jsonrpc": "2.0", "method": "tools/call", "params": ["memorize", {"content": ok_content}]}),
        ),
        (
            "params a string",
            json!({"jsonrpc": "2.0", "method": "tools/call", "params": "memorize"}),
        ),
        (
            "params null",
            json!({"jsonrpc": "2.0", "method": "tools/call", "params": null}),
        ),
    ] {
        rows.push(Row {
            label: format!("tools/call: {label}"),
            field: "",
            params: message,
            whole: true,
            want: AnyError,
        });
    }
    rows
}

fn field_name(field: &str) -> &'static str {
    match field {
        "since" => "since",
        _ => "until",
    }
}

/// Lines that are not a JSON-RPC message a standard parser can read.
const GARBAGE: [&str; 12] = [
    "lone leading surrogate escape",
    "lone trailing surrogate escape",
    "reversed surrogate pair",
    "non-hex unicode escape",
    "unknown escape",
    "raw control character in a string",
    "invalid UTF-8 bytes",
    "truncated message",
    "trailing garbage",
    "nesting 200 deep",
    "not JSON",
    "a line over 16 MiB",
];

/// The `index`th garbage line, as a memorize call with request id `id` where it has one.
fn garbage(index: usize, id: u64) -> Vec<u8> {
    let call = |content: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"memorize","arguments":{{"content":{content}}}}}}}"#
        )
        .into_bytes()
    };
    match index {
        0 => call(r#""bad \ud800 text""#),
        1 => call(r#""bad \udc00 text""#),
        2 => call(r#""bad \udc00\ud800 text""#),
        3 => call(r#""bad \uZZZZ text""#),
        4 => call(r#""bad \q text""#),
        5 => call("\"bad \u{1} text\""),
        6 => [call("\"bad ").as_slice(), &[0xff, 0xfe], b" text\""].concat(),
        7 => call("\"cut here").into_iter().take(90).collect(),
        8 => [call("\"x\"").as_slice(), b" trailing"].concat(),
        9 => call(&format!("{}{}", "[".repeat(200), "]".repeat(200))),
        10 => b"memorize this please".to_vec(),
        _ => call(&format!("\"{}\"", "a".repeat(16 * 1024 * 1024 + 16))),
    }
}

/// A store with memories, events and a small entity graph, written through the engine
/// with the embedder the server will use (`fake`, 256 dimensions), so every tool has real
/// data behind its refusals.
fn seed(db: &Path) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = Arc::new(SqliteStore::open(db).unwrap());
        let memory = CortexMemory::new(store.clone(), Arc::new(FakeProvider::new(256)));
        let mut ids = Vec::new();
        for (content, kind) in [
            (
                "Ada Lovelace works with Charles Babbage on the Analytical Engine",
                MemoryKind::Fact,
            ),
            (
                "The user drinks coffee black every morning",
                MemoryKind::Preference,
            ),
            ("Moved to Lisbon in March 2024", MemoryKind::Event),
            ("We decided to ship Atlas in May", MemoryKind::Decision),
            ("Always answer in British English", MemoryKind::Instruction),
        ] {
            let m = memory
                .memorize(
                    USER,
                    content,
                    kind,
                    &["seed".to_owned()],
                    &Default::default(),
                )
                .await
                .unwrap();
            ids.push(m.memory.id);
        }
        store
            .add_event(
                USER,
                &Event {
                    memory_id: ids[2],
                    event_time: "2024-03-10T09:00:00Z".parse().unwrap(),
                    actor: Some("user".into()),
                    location: Some("Lisbon".into()),
                    event_type: Some("move".into()),
                },
            )
            .await
            .unwrap();
        let upsert = |name: &str, aliases: &[&str]| EntityUpsert {
            name: name.into(),
            entity_type: Some("person".into()),
            aliases: aliases.iter().map(|a| (*a).to_owned()).collect(),
        };
        let ada = store
            .upsert_entity(USER, &upsert("Ada Lovelace", &["Ada"]))
            .await
            .unwrap();
        let charles = store
            .upsert_entity(USER, &upsert("Charles Babbage", &[]))
            .await
            .unwrap();
        store
            .add_edge(
                USER,
                &EntityEdge {
                    source: ada.id,
                    target: charles.id,
                    label: "works_with".into(),
                    memory_id: Some(ids[0]),
                    created_at: Utc::now(),
                },
            )
            .await
            .unwrap();
        store
            .link_entity(USER, &ids[0], &ada.id, EntityRole::Subject)
            .await
            .unwrap();
        ids.iter().map(ToString::to_string).collect()
    })
}

#[test]
fn every_bad_argument_is_refused_and_changes_nothing() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("table.db");
    let ids = seed(&db);
    let env = [
        ("CORTEX_DB_PATH", db.to_str().unwrap().to_owned()),
        ("CORTEX_EMBED_PROVIDER", "fake".to_owned()),
        ("CORTEX_LLM_PROVIDER", "fake".to_owned()),
        ("CORTEX_GRAPH", "1".to_owned()),
        ("CORTEX_EPISODIC", "1".to_owned()),
        ("CORTEX_USER_ID", USER.to_owned()),
    ];
    let mut server = Server::start("bad-input", &env);

    // The good calls work, so the refusals below are the arguments' doing.
    let dossier = server.ok("recall_about", json!({"entity": "ada"}));
    assert_eq!(dossier["entity"]["name"], "Ada Lovelace", "{dossier}");
    let timeline = server.ok("recall_timeline", json!({"since": "2024-01-01"}));
    assert_eq!(
        timeline["events"].as_array().unwrap().len(),
        1,
        "{timeline}"
    );
    assert!(server.recall_finds("coffee black", &ids[1], 5));
    let listed_before = server.list_all();
    assert_eq!(listed_before.len(), ids.len());
    let rows_before = sqlite_dump(&db);
    assert!(rows_before.len() > ids.len(), "every table is dumped");

    let table = rows(&ids);
    let mut failures: Vec<String> = Vec::new();
    let mut unnamed: Vec<String> = Vec::new();
    let mut protocol_errors: Vec<String> = Vec::new();
    let (mut tool_errors, mut rpc_errors, mut lenient_ok) = (0usize, 0usize, 0usize);
    for row in &table {
        let id = server.fresh_id();
        let message = if row.whole {
            let mut message = row.params.clone();
            message["id"] = json!(id);
            message
        } else {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": row.params})
        };
        server.send_line(&message.to_string());
        // An answer the client cannot tie to its request (id null) leaves it waiting
        // until its own timeout, like no answer at all.
        let reply = match server.wait_or_stray(id, reliability::REPLY_TIMEOUT) {
            Ok(reply) => Reply::from(reply),
            Err(why) => {
                failures.push(format!("{}: no answer to request {id} ({why})", row.label));
                continue;
            }
        };
        let verdict = match (row.want, &reply) {
            (Want::ToolError, Reply::ToolError(text))
            | (Want::AnyError, Reply::ToolError(text)) => {
                tool_errors += 1;
                if text.trim().is_empty() {
                    Some("an empty error message".to_owned())
                } else {
                    // "no memory matches ..." quotes the value instead: clear enough.
                    let quotes_value = text.starts_with("no memory matches")
                        || text.starts_with("no entity named");
                    if !row.field.is_empty() && !text.contains(row.field) && !quotes_value {
                        unnamed.push(format!("{}: {}", row.label, clip(text)));
                    }
                    None
                }
            }
            (Want::AnyError, Reply::RpcError(error)) => {
                rpc_errors += 1;
                protocol_errors.push(format!("{}: {}", row.label, clip(&error.to_string())));
                None
            }
            (Want::ToolError, Reply::RpcError(error)) => Some(format!(
                "a JSON-RPC error where the docs promise a tool error: {error}"
            )),
            (Want::Lenient, Reply::Ok(_)) => {
                lenient_ok += 1;
                None
            }
            (Want::Lenient, other) => Some(format!("a documented leniency was refused: {other:?}")),
            (_, Reply::Ok(out)) => Some(format!("accepted: {}", clip(&out.to_string()))),
        };
        if let Some(problem) = verdict {
            failures.push(format!("{}: {problem}", row.label));
        }
        if !server.is_alive() {
            failures.push(format!(
                "{}: the server exited\n{}",
                row.label,
                server.stderr_tail()
            ));
            break;
        }
        if sqlite_dump(&db) != rows_before {
            failures.push(format!("{}: the store changed", row.label));
            break;
        }
    }

    // Lines no standard parser reads. The server must keep serving (a ping right after
    // is answered) and write nothing; an error answer is reported, not required.
    let mut garbage_answered = Vec::new();
    let mut garbage_ignored = Vec::new();
    let garbage_rows = GARBAGE.len();
    for (index, label) in GARBAGE.iter().enumerate() {
        let id = server.fresh_id();
        let strays = server.stray.len();
        server.send_bytes(&garbage(index, id));
        let ping = server.request("ping", json!({}));
        if let Err(why) = server.wait_for(ping, reliability::REPLY_TIMEOUT) {
            failures.push(format!(
                "{}: the ping after it got no answer ({why})",
                label
            ));
            break;
        }
        // A transport-level answer is written before the next line is read; a call that
        // got through to a tool may still be running: give it a moment.
        match server.wait_for(id, Duration::from_millis(500)) {
            Ok(reply) => match Reply::from(reply) {
                Reply::Ok(out) => {
                    failures.push(format!("{}: accepted: {}", label, clip(&out.to_string())))
                }
                other => garbage_answered.push(format!(
                    "{}: {}",
                    label,
                    clip(&other.error_text().unwrap_or_default())
                )),
            },
            Err(_) => match server.stray.get(strays) {
                Some(error) => garbage_answered.push(format!(
                    "{label} (without its id): {}",
                    clip(&error.to_string())
                )),
                None => garbage_ignored.push((*label).to_owned()),
            },
        }
        if sqlite_dump(&db) != rows_before {
            failures.push(format!("{}: the store changed", label));
            break;
        }
    }
    let stray: Vec<String> = server.stray.iter().map(|m| clip(&m.to_string())).collect();

    // Still serving, and the tools still see exactly the seeded store.
    let listed_after = server.list_all();
    if listed_after != listed_before {
        failures.push("list_memories differs from before the table".into());
    }
    assert!(
        server.recall_finds("coffee black", &ids[1], 5),
        "a good recall after the table"
    );

    // Unknown extra arguments are refused, naming the stray one and the valid ones, and
    // change nothing (the store is compared below through list_memories).
    let mut extras = Vec::new();
    for (tool, arguments, stray, valid) in [
        (
            "recall",
            json!({"query": "coffee", "bogus": 1}),
            "bogus",
            "query",
        ),
        (
            "list_memories",
            json!({"limit": 2, "user_id": "someone-else"}),
            "user_id",
            "limit",
        ),
        ("list_memories", json!({"offset": 10}), "offset", "limit"),
        (
            "recall_timeline",
            json!({"from": "2030-01-01"}),
            "from",
            "since",
        ),
        (
            "recall_about",
            json!({"entity": "Ada", "depth": 3}),
            "depth",
            "entity",
        ),
        (
            "forget",
            json!({"memory_id": uuid::Uuid::new_v4().to_string(), "force": true}),
            "force",
            "memory_id",
        ),
        (
            "memorize",
            json!({"content": "an extra argument probe", "importance": "high"}),
            "importance",
            "content",
        ),
    ] {
        let reply = server.call(tool, arguments.clone());
        let outcome = match &reply {
            Reply::Ok(_) => "accepted (extra ignored)".to_owned(),
            other => other.error_text().unwrap_or_default(),
        };
        if !(outcome.contains(stray) && outcome.contains(valid)) {
            failures.push(format!(
                "{tool} {arguments}: want a refusal naming `{stray}` and `{valid}`, got {}",
                clip(&outcome)
            ));
        }
        extras.push(format!("{tool} {arguments}: {}", clip(&outcome)));
    }
    let listed_after_extras = server.list_all();
    if listed_after_extras != listed_before {
        failures.push("the refused extra arguments changed the store".into());
    }
    let good = server.ok(
        "memorize",
        json!({"content": "a good write after the table"}),
    );
    assert_eq!(good["status"], "stored");
    let status = server.finish();
    assert!(status.success(), "clean exit: {status:?}");

    eprintln!(
        "findings: argument errors that do not name the argument ({}):",
        unnamed.len()
    );
    for line in &unnamed {
        eprintln!("  {line}");
    }
    eprintln!(
        "findings: malformed calls answered with JSON-RPC errors ({}):",
        protocol_errors.len()
    );
    for line in &protocol_errors {
        eprintln!("  {line}");
    }
    eprintln!(
        "findings: unparsable lines answered ({}): {garbage_answered:?}",
        garbage_answered.len()
    );
    eprintln!(
        "findings: unparsable lines ignored without an answer ({}): {garbage_ignored:?}",
        garbage_ignored.len()
    );
    eprintln!(
        "findings: messages without a request id ({}): {stray:?}",
        stray.len()
    );
    eprintln!("unknown extra arguments, refused:");
    for line in &extras {
        eprintln!("  {line}");
    }
    eprintln!(
        "reliability bad_input: rows={} tool_errors={tool_errors} rpc_errors={rpc_errors} \
         lenient_ok={lenient_ok} unparsable_lines={garbage_rows} answered={} ignored={} \
         failures={} store_changed={} elapsed={:.1}s",
        table.len(),
        garbage_answered.len(),
        garbage_ignored.len(),
        failures.len(),
        failures.iter().any(|f| f.contains("store changed")),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "bad-input rows that misbehaved:\n{}",
        failures.join("\n")
    );
}

/// The first 200 characters, for readable reports of megabyte-sized echoes.
fn clip(text: &str) -> String {
    let clipped: String = text.chars().take(200).collect();
    if clipped.len() < text.len() {
        format!("{clipped}…")
    } else {
        clipped
    }
}
