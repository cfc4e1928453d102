//! A minimal MCP-over-HTTP client for the load tests: sessions opened with one API key
//! each, tool calls and their results, the server's plain GET endpoints.
//!
//! Written on reqwest rather than rmcp's client: the workspace must resolve rmcp with the
//! server's features only (CI checks that a workspace build reuses the server's build).

use std::fmt;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap};
use serde_json::{Value, json};

/// The version offered in `initialize`; later requests carry whichever the server chose.
const PROTOCOL_VERSION: &str = "2025-06-18";
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// Longer than any call should take under load: a call past it counts as an error.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a request did not give a usable answer. Each is one error in the tallies.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// No HTTP answer: connection refused or reset, timeout.
    Transport(String),
    /// An answer with a status other than 2xx.
    Status(u16, String),
    /// A 2xx answer without the JSON-RPC result it should hold.
    Protocol(String),
    /// A tool result with `isError: true`, and its text.
    Tool(String),
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Transport(e) => write!(f, "transport: {e}"),
            CallError::Status(code, body) => write!(f, "HTTP {code}: {}", clip(body)),
            CallError::Protocol(e) => write!(f, "protocol: {}", clip(e)),
            CallError::Tool(text) => write!(f, "tool error: {}", clip(text)),
        }
    }
}

impl std::error::Error for CallError {}

fn clip(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The server at one address; cheap to clone (one connection pool).
#[derive(Debug, Clone)]
pub struct Http {
    client: reqwest::Client,
    base: String,
}

impl Http {
    /// `addr` is `host:port`.
    pub fn new(addr: &str) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .connect_timeout(Duration::from_secs(10))
            .build()?;
        Ok(Self {
            client,
            base: format!("http://{addr}"),
        })
    }

    /// A GET without credentials (`/readyz`, `/metrics`): its body, if 2xx.
    pub async fn get(&self, path: &str) -> Result<String, CallError> {
        let response = self
            .client
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .map_err(|e| CallError::Transport(e.to_string()))?;
        let status = response.status();
        let body = response
            .text()
            .await
            .map_err(|e| CallError::Transport(e.to_string()))?;
        match status.is_success() {
            true => Ok(body),
            false => Err(CallError::Status(status.as_u16(), body)),
        }
    }

    /// Opens a session with `key`: `initialize`, then `notifications/initialized`.
    pub async fn open(&self, key: &str) -> Result<Session, CallError> {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "cortex-perf", "version": env!("CARGO_PKG_VERSION")}}});
        let (headers, message) = self.post(key, None, &init).await?;
        let id = headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| CallError::Protocol("initialize answered without a session id".into()))?
            .to_owned();
        let message = message.ok_or_else(|| CallError::Protocol("empty initialize".into()))?;
        let protocol = message["result"]["protocolVersion"]
            .as_str()
            .unwrap_or(PROTOCOL_VERSION)
            .to_owned();
        let session = Session {
            http: self.clone(),
            key: key.to_owned(),
            id,
            protocol,
            next_id: 1,
        };
        let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        session.post(&done).await?;
        Ok(session)
    }

    /// One POST to `/mcp`: the answer's headers and its JSON-RPC message (none for a
    /// notification's `202`).
    async fn post(
        &self,
        key: &str,
        session: Option<(&str, &str)>,
        body: &Value,
    ) -> Result<(HeaderMap, Option<Value>), CallError> {
        let mut request = self
            .client
            .post(format!("{}/mcp", self.base))
            .header(AUTHORIZATION, format!("Bearer {key}"))
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string());
        if let Some((id, protocol)) = session {
            request = request
                .header(SESSION_HEADER, id)
                .header(VERSION_HEADER, protocol);
        }
        let mut response = request
            .send()
            .await
            .map_err(|e| CallError::Transport(e.to_string()))?;
        let status = response.status();
        let headers = response.headers().clone();
        // Read to the end of the stream: rmcp ends a request's SSE stream after its
        // answer, and a body read to its end lets the connection be reused.
        let mut raw = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| CallError::Transport(e.to_string()))?
        {
            raw.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&raw);
        if !status.is_success() {
            return Err(CallError::Status(status.as_u16(), text.into_owned()));
        }
        if status == StatusCode::ACCEPTED || text.trim().is_empty() {
            return Ok((headers, None));
        }
        let message = message(&text).ok_or_else(|| CallError::Protocol(text.to_string()))?;
        if let Some(error) = message.get("error") {
            return Err(CallError::Protocol(format!("JSON-RPC error {error}")));
        }
        Ok((headers, Some(message)))
    }
}

/// The JSON-RPC answer in a body: plain JSON, or the `data:` line of an SSE event that
/// holds one (priming events and comments hold none).
pub fn message(body: &str) -> Option<Value> {
    let answer = |v: &Value| v.get("result").is_some() || v.get("error").is_some();
    if let Ok(v) = serde_json::from_str::<Value>(body.trim()) {
        return answer(&v).then_some(v);
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(answer)
}

/// One open MCP session of one key.
#[derive(Debug)]
pub struct Session {
    http: Http,
    key: String,
    id: String,
    protocol: String,
    next_id: u64,
}

impl Session {
    /// Calls `tool`: its structured result, or why there is none.
    pub async fn call(&mut self, tool: &str, arguments: Value) -> Result<Value, CallError> {
        let id = self.next_id;
        self.next_id += 1;
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        let message = self
            .post(&call)
            .await?
            .ok_or_else(|| CallError::Protocol(format!("{tool}: no answer")))?;
        if message["id"] != json!(id) {
            return Err(CallError::Protocol(format!(
                "{tool}: answer to id {} instead of {id}",
                message["id"]
            )));
        }
        tool_result(&message["result"])
    }

    /// Ends the session (`DELETE /mcp`).
    pub async fn close(self) -> Result<(), CallError> {
        let response = self
            .http
            .client
            .delete(format!("{}/mcp", self.http.base))
            .header(AUTHORIZATION, format!("Bearer {}", self.key))
            .header(SESSION_HEADER, &self.id)
            .header(VERSION_HEADER, &self.protocol)
            .send()
            .await
            .map_err(|e| CallError::Transport(e.to_string()))?;
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        match status.is_success() {
            true => Ok(()),
            false => Err(CallError::Status(status.as_u16(), body)),
        }
    }

    async fn post(&self, body: &Value) -> Result<Option<Value>, CallError> {
        let (_, message) = self
            .http
            .post(&self.key, Some((&self.id, &self.protocol)), body)
            .await?;
        Ok(message)
    }
}

/// A `tools/call` result: its structured content, or the error it reports.
pub fn tool_result(result: &Value) -> Result<Value, CallError> {
    let text = || {
        result["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    if result["isError"] == true {
        return Err(CallError::Tool(text()));
    }
    match result.get("structuredContent") {
        Some(structured) => Ok(structured.clone()),
        // Every tool publishes an output schema; the text is the same value, as JSON.
        None => serde_json::from_str(&text())
            .map_err(|_| CallError::Protocol(format!("a result without content: {result}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_read_from_plain_json_or_from_an_sse_event() {
        let plain = r#"{"jsonrpc":"2.0","id":3,"result":{"x":1}}"#;
        assert_eq!(message(plain).unwrap()["result"]["x"], 1);
        let sse = "id: 0\nretry: 3000\ndata:\n\n: ping\n\nevent: message\n\
                   data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"x\":2}}\n\n";
        assert_eq!(message(sse).unwrap()["result"]["x"], 2);
        let failed = "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32602}}\n\n";
        assert_eq!(message(failed).unwrap()["error"]["code"], -32602);
        assert!(message("data: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n").is_none());
        assert!(message("not json").is_none());
    }

    #[test]
    fn a_tool_result_is_its_structured_content_or_its_error() {
        let ok = json!({"content": [{"type": "text", "text": "{\"a\":1}"}],
                        "structuredContent": {"a": 1}});
        assert_eq!(tool_result(&ok).unwrap(), json!({"a": 1}));
        let text_only = json!({"content": [{"type": "text", "text": "{\"a\":2}"}]});
        assert_eq!(tool_result(&text_only).unwrap(), json!({"a": 2}));
        let failed = json!({"isError": true, "content": [{"type": "text", "text": "no"}]});
        assert_eq!(tool_result(&failed), Err(CallError::Tool("no".into())));
        assert!(matches!(
            tool_result(&json!({})),
            Err(CallError::Protocol(_))
        ));
    }
}
