//! The MCP server's inbound path: screening of a raw JSON-RPC line or HTTP body
//! (mcp/src/inbound.rs), then the tool arguments (mcp/src/args.rs) and the checks the
//! tools apply to them before the engine sees them. Nothing may panic, a refusal answers
//! the request's own id, and every checked argument is within its limits.

#![no_main]

use chrono::Datelike;
use cortex_app::dates::parse_instant;
use cortex_core::memory::{
    DEFAULT_MAX_CONTENT_BYTES, MAX_TAG_CHARS, MAX_TAGS, normalize_tags, validate_content,
};
use cortex_core::structure::MAX_STRUCTURE_ITEMS;
use cortex_core::{listing::MAX_LIMIT, memory::MemoryKind};
use cortex_mcp::args::{
    ForgetArgs, ListMemoriesArgs, MemorizeArgs, RecallAboutArgs, RecallArgs, RecallTimelineArgs,
    clamp_limit,
};
use cortex_mcp::inbound::{Rejection, Screened, lenient_id, screen};
use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use serde_json::{Map, Value};

fuzz_target!(|data: &[u8]| {
    if let Some(id) = lenient_id(data) {
        assert!(is_id(&id), "{id}");
    }
    let oversized = Rejection::oversized(data, 16);
    assert_eq!(oversized.id, lenient_id(data));
    check_rejection(&oversized);

    // What a JSON parser makes of the same bytes: a refused object answers its own id.
    let parsed: Option<Value> = serde_json::from_slice(data).ok();
    match screen(data) {
        Screened::Rejected(rejection) => {
            check_rejection(&rejection);
            if let Some(Value::Object(object)) = &parsed {
                let id = object.get("id").filter(|id| is_id(id));
                assert_eq!(rejection.id.as_ref(), id, "{rejection:?}");
            }
        }
        Screened::Message(message) => {
            // Accepted means well formed: it serialises, and a tool call has a string
            // name and object (or absent) arguments, as the tool router expects.
            let value = serde_json::to_value(&*message).expect("an accepted message serialises");
            if value.get("method").and_then(Value::as_str) == Some("tools/call") {
                let params = value.get("params").and_then(Value::as_object);
                let params = params.expect("tools/call passed screening without params");
                let name = params.get("name").and_then(Value::as_str);
                let name = name.expect("tools/call passed screening without a name");
                let arguments = match params.get("arguments") {
                    None | Some(Value::Null) => Value::Object(Map::new()),
                    Some(Value::Object(a)) => Value::Object(a.clone()),
                    Some(other) => panic!("tools/call passed screening with arguments {other}"),
                };
                call_tool(Some(name), &arguments);
            }
        }
    }

    // The argument structs from any JSON, as if it were a call's arguments.
    if let Some(value) = &parsed {
        call_tool(None, value);
    }
});

fn is_id(value: &Value) -> bool {
    value.is_string() || value.is_i64() || value.is_u64()
}

/// A refusal's response is JSON-RPC that names the request's id, or there is none.
fn check_rejection(rejection: &Rejection) {
    if let Some(id) = &rejection.id {
        assert!(is_id(id), "{id}");
    }
    match rejection.response() {
        Some(response) => {
            let text = serde_json::to_string(&response).expect("a response serialises");
            let back: Value = serde_json::from_str(&text).expect("a response parses");
            assert_eq!(back.get("id"), rejection.id.as_ref(), "{text}");
            assert_eq!(back["jsonrpc"], "2.0");
            assert_eq!(back["error"]["code"], rejection.code.0);
            assert!(back["error"]["message"].is_string());
        }
        None => assert!(rejection.id.is_none()),
    }
}

/// Deserialises the arguments of `tool` (of every tool when `None`) and runs the checks
/// the tool runs before it reaches the engine.
fn call_tool(tool: Option<&str>, arguments: &Value) {
    let wants = |name: &str| tool.is_none_or(|t| t == name);
    if wants("memorize")
        && let Ok(args) = MemorizeArgs::deserialize(arguments)
    {
        let _ = validate_content("content", &args.content, DEFAULT_MAX_CONTENT_BYTES);
        if let Some(kind) = args
            .kind
            .as_deref()
            .map(str::trim)
            .filter(|k| !k.is_empty())
            && let Ok(parsed) = kind.parse::<MemoryKind>()
        {
            assert_eq!(parsed.as_str(), kind.to_lowercase());
        }
        // The caller's structure: what is accepted is what the engine accepts.
        if let Ok(Some(structure)) = args.structure().into_structure() {
            assert!(!structure.is_empty());
            assert!(structure.entities.len() <= MAX_STRUCTURE_ITEMS);
            assert!(structure.relations.len() <= MAX_STRUCTURE_ITEMS);
            if let Some(event) = &structure.event {
                assert!((0..=9999).contains(&event.time.year()), "{:?}", event.time);
            }
            assert!(structure.validated().is_ok(), "{structure:?}");
        }
        if let Ok(tags) = normalize_tags(&args.tags.unwrap_or_default()) {
            assert!(tags.len() <= MAX_TAGS);
            for (i, tag) in tags.iter().enumerate() {
                let chars = tag.chars().count();
                assert!((1..=MAX_TAG_CHARS).contains(&chars), "{tag:?}");
                assert_eq!(*tag, tag.to_lowercase());
                assert!(!tags[..i].contains(tag), "repeated {tag:?}");
            }
        }
    }
    if wants("recall")
        && let Ok(args) = RecallArgs::deserialize(arguments)
    {
        check_limit(args.limit);
    }
    if wants("recall_about")
        && let Ok(args) = RecallAboutArgs::deserialize(arguments)
    {
        check_limit(args.limit);
    }
    if wants("recall_timeline")
        && let Ok(args) = RecallTimelineArgs::deserialize(arguments)
    {
        let _ = parse_instant("since", args.since.as_deref());
        let _ = parse_instant("until", args.until.as_deref());
        check_limit(args.limit);
    }
    if wants("list_memories")
        && let Ok(args) = ListMemoriesArgs::deserialize(arguments)
    {
        check_limit(args.limit);
    }
    if wants("forget") {
        let _ = ForgetArgs::deserialize(arguments);
    }
}

/// A limit is clamped into 1..=MAX_LIMIT, and one already inside is kept.
fn check_limit(limit: Option<i64>) {
    for default in [0, 10, usize::MAX] {
        let n = clamp_limit(limit, default);
        assert!((1..=MAX_LIMIT).contains(&n), "{limit:?} -> {n}");
        if let Some(l) = limit.and_then(|l| usize::try_from(l).ok())
            && (1..=MAX_LIMIT).contains(&l)
        {
            assert_eq!(n, l);
        }
    }
}
