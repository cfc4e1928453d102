//! Screening of inbound JSON-RPC text, shared by the stdio and HTTP transports.
//!
//! rmcp drops a line it cannot decode and reads a standard method with malformed params
//! as an unknown custom method: the client then waits for its timeout, or is told
//! "method not found" for `tools/call`. Screening first lets every request that carries a
//! readable id get the JSON-RPC answer its fault deserves (-32700, -32600, -32602).

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ErrorCode, JsonRpcMessage};
use serde_json::{Map, Value, json};

/// The longest line (or HTTP body) accepted; rmcp's own stdio limit.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// serde_json's own nesting limit, named for the error message.
const MAX_DEPTH: usize = 128;

/// The request methods of the MCP protocol: a request naming one of these whose params
/// rmcp cannot read has invalid params, not an unknown method.
const STANDARD_METHODS: [&str; 24] = [
    "initialize",
    "ping",
    "server/discover",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "resources/directory/read",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "skills/list",
    "skills/get",
    "roots/list",
    "sampling/createMessage",
    "elicitation/create",
];

/// What became of one inbound message.
#[derive(Debug)]
pub enum Screened {
    /// Well formed: hand it to the MCP service.
    Message(Box<ClientJsonRpcMessage>),
    /// Refused before the service saw it.
    Rejected(Rejection),
}

/// A refused message: the JSON-RPC error it earns and, when its id could be read, the
/// request it answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub code: ErrorCode,
    pub message: String,
    /// The request's id (a number or a string), when one could be read.
    pub id: Option<Value>,
}

impl Rejection {
    fn new(code: ErrorCode, message: impl Into<String>, id: Option<Value>) -> Self {
        Self {
            code,
            message: message.into(),
            id,
        }
    }

    /// A line that is too long to be read: only its first bytes are kept to look for
    /// the id.
    pub fn oversized(prefix: &[u8], limit: usize) -> Self {
        Self::new(
            ErrorCode::PARSE_ERROR,
            format!("message longer than {limit} bytes"),
            lenient_id(prefix),
        )
    }

    /// The JSON-RPC error response, when there is a request to answer. A message whose
    /// id cannot be read gets none: MCP forbids a null id, and a client cannot match
    /// such an answer to anything.
    pub fn response(&self) -> Option<Value> {
        self.id.as_ref().map(|id| {
            json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": { "code": self.code.0, "message": self.message },
            })
        })
    }
}

/// Screens one message (a stdio line without its newline, or an HTTP body).
pub fn screen(bytes: &[u8]) -> Screened {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            return reject(
                ErrorCode::PARSE_ERROR,
                format!("invalid UTF-8 at byte {}", e.valid_up_to()),
                lenient_id(bytes),
            );
        }
    };
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            let message = if e.to_string().starts_with("recursion limit exceeded") {
                format!("JSON nested deeper than {MAX_DEPTH} levels")
            } else {
                format!("invalid JSON: {e}")
            };
            return reject(ErrorCode::PARSE_ERROR, message, lenient_id(bytes));
        }
    };
    let Value::Object(object) = value else {
        return reject(
            ErrorCode::INVALID_REQUEST,
            "a message must be one JSON object (batches are not supported)",
            None,
        );
    };
    let id = object.get("id").filter(|id| is_id(id)).cloned();
    if let Some(rejection) = bad_tool_call(&object, id.as_ref()) {
        return Screened::Rejected(rejection);
    }
    let method = object
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    // With a sound envelope, a standard method that does not parse has bad params.
    let standard = object.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && method
            .as_deref()
            .is_some_and(|m| STANDARD_METHODS.contains(&m));
    match serde_json::from_value::<ClientJsonRpcMessage>(Value::Object(object)) {
        Ok(JsonRpcMessage::Request(request))
            if matches!(&request.request, ClientRequest::CustomRequest(custom)
                if STANDARD_METHODS.contains(&custom.method.as_str())) =>
        {
            reject(
                ErrorCode::INVALID_PARAMS,
                format!(
                    "invalid params for {}",
                    method.as_deref().unwrap_or("the method")
                ),
                id,
            )
        }
        Ok(message) => Screened::Message(Box::new(message)),
        Err(e) if standard && id.is_some() => reject(
            ErrorCode::INVALID_PARAMS,
            format!(
                "invalid params for {}: {e}",
                method.as_deref().unwrap_or("the method")
            ),
            id,
        ),
        Err(e) => reject(
            ErrorCode::INVALID_REQUEST,
            format!("not a valid JSON-RPC request: {e}"),
            id,
        ),
    }
}

fn reject(code: ErrorCode, message: impl Into<String>, id: Option<Value>) -> Screened {
    Screened::Rejected(Rejection::new(code, message, id))
}

fn is_id(value: &Value) -> bool {
    value.is_string() || value.is_i64() || value.is_u64()
}

/// `tools/call` needs an object of params with a string `name` and, when present, an
/// object of `arguments`; anything else is -32602 naming what is wrong.
fn bad_tool_call(object: &Map<String, Value>, id: Option<&Value>) -> Option<Rejection> {
    if object.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let fault = match object.get("params") {
        None | Some(Value::Null) => Some("tools/call needs params {\"name\", \"arguments\"}"),
        Some(Value::Object(params)) => match (params.get("name"), params.get("arguments")) {
            (Some(Value::String(_)), None | Some(Value::Null | Value::Object(_))) => None,
            (Some(Value::String(_)), Some(_)) => Some("tools/call arguments must be an object"),
            _ => Some("tools/call params need a string name"),
        },
        Some(_) => Some("tools/call params must be an object"),
    }?;
    Some(Rejection::new(
        ErrorCode::INVALID_PARAMS,
        fault,
        id.cloned(),
    ))
}

/// Finds the top-level `"id"` of a message that does not parse (invalid UTF-8, too deep,
/// cut short): a small scanner over the bytes that tracks strings and depth, so an `"id"`
/// inside params is never mistaken for the request's.
pub fn lenient_id(bytes: &[u8]) -> Option<Value> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let end = string_end(bytes, i)?;
                if depth == 1 && &bytes[i..=end] == b"\"id\"" {
                    let rest = skip_space(bytes, end + 1);
                    if bytes.get(rest) == Some(&b':') {
                        return scalar_id(bytes, skip_space(bytes, rest + 1));
                    }
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the quote that closes the string opening at `start`.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn skip_space(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// A number or a plain string id starting at `start`.
fn scalar_id(bytes: &[u8], start: usize) -> Option<Value> {
    match bytes.get(start)? {
        b'"' => {
            let end = string_end(bytes, start)?;
            let raw = std::str::from_utf8(&bytes[start..=end]).ok()?;
            serde_json::from_str::<String>(raw).ok().map(Value::String)
        }
        b'-' | b'0'..=b'9' => {
            let len = bytes[start..]
                .iter()
                .take_while(|b| b.is_ascii_digit() || **b == b'-')
                .count();
            let raw = std::str::from_utf8(&bytes[start..start + len]).ok()?;
            raw.parse::<i64>().ok().map(Value::from)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(bytes: &[u8]) -> Rejection {
        match screen(bytes) {
            Screened::Rejected(r) => r,
            Screened::Message(m) => panic!("accepted: {m:?}"),
        }
    }

    #[test]
    fn good_messages_pass() {
        let line = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"recall","arguments":{"query":"x"}}}"#;
        assert!(matches!(screen(line), Screened::Message(_)));
        let note = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        assert!(matches!(screen(note), Screened::Message(_)));
        let custom = br#"{"jsonrpc":"2.0","id":2,"method":"no/such"}"#;
        assert!(matches!(screen(custom), Screened::Message(_)));
    }

    #[test]
    fn invalid_utf8_is_a_parse_error_with_its_id() {
        let r = rejected(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"x\":\"\xff\"}");
        assert_eq!(r.code, ErrorCode::PARSE_ERROR);
        assert_eq!(r.id, Some(json!(7)));
        assert!(r.message.contains("UTF-8"), "{}", r.message);
    }

    #[test]
    fn a_lone_surrogate_is_a_parse_error_with_its_id() {
        let r = rejected(br#"{"jsonrpc":"2.0","id":"a","method":"ping","params":{"x":"\ud800"}}"#);
        assert_eq!(r.code, ErrorCode::PARSE_ERROR);
        assert_eq!(r.id, Some(json!("a")));
    }

    #[test]
    fn deep_nesting_is_refused_with_its_id() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":9,"method":"ping","params":{{"x":{}{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let r = rejected(deep.as_bytes());
        assert_eq!(r.code, ErrorCode::PARSE_ERROR);
        assert_eq!(r.id, Some(json!(9)));
        assert!(r.message.contains("128"), "{}", r.message);
    }

    #[test]
    fn malformed_tool_calls_are_invalid_params() {
        for params in [
            "null",
            r#""recall""#,
            r#"{"name":"recall","arguments":"query"}"#,
            r#"{"name":"recall","arguments":[1]}"#,
            r#"{"arguments":{}}"#,
        ] {
            let line =
                format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{params}}}"#);
            let r = rejected(line.as_bytes());
            assert_eq!(r.code, ErrorCode::INVALID_PARAMS, "{params}");
            assert_eq!(r.id, Some(json!(3)));
        }
        let missing = br#"{"jsonrpc":"2.0","id":4,"method":"tools/call"}"#;
        assert_eq!(rejected(missing).code, ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn other_standard_methods_with_bad_params_are_invalid_params() {
        let r = rejected(br#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":7}"#);
        assert_eq!(r.code, ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn non_objects_are_invalid_requests() {
        assert_eq!(rejected(b"[1,2]").code, ErrorCode::INVALID_REQUEST);
        assert_eq!(rejected(b"42").code, ErrorCode::INVALID_REQUEST);
        let r = rejected(br#"{"jsonrpc":"2.0","id":6}"#);
        assert_eq!(r.code, ErrorCode::INVALID_REQUEST);
        assert_eq!(r.id, Some(json!(6)));
    }

    #[test]
    fn the_id_is_read_only_at_the_top_level() {
        assert_eq!(
            lenient_id(br#"{"params":{"id":1},"id":"top"#),
            None,
            "a string cut short is no id"
        );
        assert_eq!(
            lenient_id(br#"{"params":{"id":1,"s":"\"id\": 2"},"id" : -12, "#),
            Some(json!(-12))
        );
        assert_eq!(lenient_id(br#"{"method":"x","params":{"id":1}"#), None);
        assert_eq!(lenient_id(br#"{"id":"x\"y","#), Some(json!("x\"y")));
        assert_eq!(lenient_id(br#"{"id":null}"#), None);
    }

    #[test]
    fn responses_only_for_readable_ids() {
        let r = Rejection::oversized(
            br#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"#,
            16,
        );
        let response = r.response().unwrap();
        assert_eq!(response["id"], json!(11));
        assert_eq!(response["error"]["code"], json!(-32700));
        assert!(
            Rejection::oversized(b"{\"params\":", 16)
                .response()
                .is_none()
        );
    }
}
