//! One MCP exchange over a spawned `cortex-mcp`'s stdio, shared by the binary and startup
//! tests: `initialize`, `notifications/initialized`, `tools/list` and one `tools/call`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};

/// How long one reply may take; a first call may build the engine.
const REPLY_WAIT: Duration = Duration::from_secs(30);

/// Sends the exchange to `child` (spawned with piped stdin and stdout) and returns the
/// three replies by id (1: initialize, 2: tools/list, 3: the call) with stdin still open,
/// so the caller decides when the session ends. Requests are served concurrently, so
/// replies are matched by id, not order. Every stdout line must be a JSON-RPC message:
/// on stdio, one stray log line breaks the channel.
///
/// `Err` carries the replies received so far when one did not come in time; the caller
/// kills the child and adds its stderr to the failure.
pub fn exchange(
    child: &mut Child,
    tool: &str,
    arguments: Value,
) -> Result<(HashMap<u64, Value>, ChildStdin), String> {
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "stdio-probe", "version": "0"}
        }}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments
        }}),
    ];
    for message in &messages {
        writeln!(stdin, "{message}").expect("write to stdin");
    }
    stdin.flush().expect("flush stdin");

    let stdout = child.stdout.take().expect("stdout is piped");
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut replies = HashMap::new();
    while replies.len() < 3 {
        let Ok(line) = rx.recv_timeout(REPLY_WAIT) else {
            return Err(format!(
                "no reply on stdout within {REPLY_WAIT:?}; got {replies:?}"
            ));
        };
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carried a non-JSON line {line:?}: {e}"));
        assert_eq!(value["jsonrpc"], "2.0", "{line}");
        if let Some(id) = value["id"].as_u64() {
            replies.insert(id, value);
        }
    }
    Ok((replies, stdin))
}
