//! The stdio transport: newline-delimited JSON-RPC on stdin and stdout, where every
//! request gets an answer.
//!
//! rmcp's own line transport drops what it cannot decode, and a client then waits until
//! its timeout. Here each line is screened first ([`crate::inbound`]): a line too long,
//! not UTF-8, not JSON, too deep or with malformed params is answered with its JSON-RPC
//! error when its id can be read, and logged at WARN either way.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::service::RxJsonRpcMessage;
use rmcp::transport::Transport;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc};

use crate::inbound::{MAX_MESSAGE_BYTES, Rejection, Screened, screen};

/// How much of an oversized line is kept to look for its id.
const OVERSIZED_PREFIX: usize = 64 * 1024;

/// Why writing to the client failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StdioError {
    #[error("cannot write to the client: {0}")]
    Write(#[from] std::io::Error),
    #[error("cannot encode a message: {0}")]
    Encode(#[from] serde_json::Error),
}

/// A server transport over any reader and writer (stdin and stdout in the binary).
pub struct LineTransport<W> {
    inbound: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    out: Arc<Mutex<W>>,
    reader: tokio::task::JoinHandle<()>,
}

impl<W> LineTransport<W>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// Starts reading `input` on a task of its own; `max_line` bounds one line.
    pub fn new<R>(input: R, output: W, max_line: usize) -> Self
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let (tx, inbound) = mpsc::channel(16);
        let out = Arc::new(Mutex::new(output));
        let reader = tokio::spawn(read_lines(input, tx, Arc::clone(&out), max_line));
        Self {
            inbound,
            out,
            reader,
        }
    }
}

/// The binary's transport: stdin and stdout, lines up to 16 MiB.
pub fn stdio() -> LineTransport<tokio::io::Stdout> {
    LineTransport::new(tokio::io::stdin(), tokio::io::stdout(), MAX_MESSAGE_BYTES)
}

impl<W> std::fmt::Debug for LineTransport<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineTransport").finish_non_exhaustive()
    }
}

impl<W> Drop for LineTransport<W> {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl<W> Transport<RoleServer> for LineTransport<W>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = StdioError;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let out = Arc::clone(&self.out);
        async move {
            let mut line = serde_json::to_vec(&item)?;
            line.push(b'\n');
            write_line(&out, &line).await
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.inbound.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        self.out.lock().await.flush().await?;
        Ok(())
    }
}

async fn write_line<W: AsyncWrite + Unpin>(out: &Mutex<W>, line: &[u8]) -> Result<(), StdioError> {
    let mut out = out.lock().await;
    out.write_all(line).await?;
    out.flush().await?;
    Ok(())
}

/// Reads lines until end of input (or until the service stops taking messages), handing
/// well-formed ones on and answering the rest.
async fn read_lines<R, W>(
    input: R,
    tx: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
    out: Arc<Mutex<W>>,
    max_line: usize,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut input = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let outcome = match read_bounded_line(&mut input, &mut line, max_line).await {
            Ok(outcome) => outcome,
            Err(e) => {
                tracing::warn!("cannot read from the client: {e}");
                return;
            }
        };
        let screened = match outcome {
            Line::End => return,
            Line::Complete => {
                let text = trim_line(&line);
                if text.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                screen(text)
            }
            Line::Oversized => Screened::Rejected(Rejection::oversized(&line, max_line)),
        };
        match screened {
            Screened::Message(message) => {
                if tx.send(*message).await.is_err() {
                    return;
                }
            }
            Screened::Rejected(rejection) => {
                tracing::warn!(
                    id = ?rejection.id,
                    code = rejection.code.0,
                    "refused a message on stdio: {}",
                    rejection.message
                );
                if let Some(response) = rejection.response()
                    && answer(&out, &response).await.is_err()
                {
                    return;
                }
            }
        }
    }
}

async fn answer<W: AsyncWrite + Unpin>(out: &Mutex<W>, response: &Value) -> Result<(), StdioError> {
    let mut line = serde_json::to_vec(response)?;
    line.push(b'\n');
    write_line(out, &line).await
}

enum Line {
    Complete,
    /// Longer than the limit: `line` holds its first bytes, the rest was discarded.
    Oversized,
    End,
}

/// Reads one line into `line` (without its newline), never holding more than `max`
/// bytes: past that it keeps a prefix and discards up to the next newline.
async fn read_bounded_line<R: AsyncRead + Unpin>(
    input: &mut BufReader<R>,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    let mut oversized = false;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            // End of input: a last line without its newline still counts.
            return Ok(match (oversized, line.is_empty()) {
                (true, _) => Line::Oversized,
                (false, true) => Line::End,
                (false, false) => Line::Complete,
            });
        }
        let (chunk, found) = match buf.iter().position(|b| *b == b'\n') {
            Some(at) => (&buf[..at], true),
            None => (buf, false),
        };
        if !oversized && line.len() + chunk.len() > max {
            oversized = true;
            line.truncate(OVERSIZED_PREFIX.min(max));
        }
        let room = if oversized {
            OVERSIZED_PREFIX.min(max).saturating_sub(line.len())
        } else {
            chunk.len()
        };
        line.extend_from_slice(&chunk[..room.min(chunk.len())]);
        let used = chunk.len() + usize::from(found);
        input.consume(used);
        if found {
            return Ok(if oversized {
                Line::Oversized
            } else {
                Line::Complete
            });
        }
    }
}

/// A line without its trailing carriage return (clients on Windows send CRLF).
fn trim_line(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, DuplexStream, duplex};

    /// A transport over in-memory pipes; returns it, the client's writer and the
    /// client's reader.
    fn pipe(max_line: usize) -> (LineTransport<DuplexStream>, DuplexStream, DuplexStream) {
        let (client_out, server_in) = duplex(1 << 20);
        let (server_out, client_in) = duplex(1 << 20);
        (
            LineTransport::new(server_in, server_out, max_line),
            client_out,
            client_in,
        )
    }

    async fn read_reply(client_in: &mut BufReader<DuplexStream>) -> Value {
        let mut line = String::new();
        client_in.read_line(&mut line).await.unwrap();
        serde_json::from_str(&line).unwrap()
    }

    #[tokio::test]
    async fn bad_lines_are_answered_and_good_ones_pass() {
        let (mut transport, mut client_out, client_in) = pipe(1024);
        let mut client_in = BufReader::new(client_in);
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"x\":\"{}\"}}}}\n",
            "a".repeat(4096)
        );
        client_out.write_all(long.as_bytes()).await.unwrap();
        let reply = read_reply(&mut client_in).await;
        assert_eq!(reply["id"], 1);
        assert_eq!(reply["error"]["code"], -32700);

        client_out
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"x\":\"\xfe\"}\r\n")
            .await
            .unwrap();
        let reply = read_reply(&mut client_in).await;
        assert_eq!(reply["id"], 2);
        assert_eq!(reply["error"]["code"], -32700);

        client_out
            .write_all(
                b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":null}\n",
            )
            .await
            .unwrap();
        let reply = read_reply(&mut client_in).await;
        assert_eq!(reply["id"], 3);
        assert_eq!(reply["error"]["code"], -32602);

        // A line with no readable id gets no answer, and the next line is still read.
        client_out.write_all(b"not json\n\n").await.unwrap();
        client_out
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}")
            .await
            .unwrap();
        drop(client_out);
        let message = transport.receive().await.unwrap();
        assert!(
            matches!(&message, rmcp::model::JsonRpcMessage::Request(r) if r.id == rmcp::model::RequestId::Number(4)),
            "{message:?}"
        );
        assert!(transport.receive().await.is_none(), "end of input ends it");
        // Dropping the transport closes the server's side, so the client sees the end.
        drop(transport);
        let mut rest = Vec::new();
        client_in.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "nothing answered the id-less line");
    }

    #[tokio::test]
    async fn oversized_lines_keep_only_a_prefix() {
        let mut input = BufReader::with_capacity(8, &b"0123456789abcdef\nxy\n"[..]);
        let mut line = Vec::new();
        assert!(matches!(
            read_bounded_line(&mut input, &mut line, 10).await.unwrap(),
            Line::Oversized
        ));
        assert!(line.len() <= 10);
        line.clear();
        assert!(matches!(
            read_bounded_line(&mut input, &mut line, 10).await.unwrap(),
            Line::Complete
        ));
        assert_eq!(line, b"xy");
        line.clear();
        assert!(matches!(
            read_bounded_line(&mut input, &mut line, 10).await.unwrap(),
            Line::End
        ));
    }
}
