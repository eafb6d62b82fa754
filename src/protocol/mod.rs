//! The wire protocol between ptyd clients and the server: newline-delimited
//! JSON requests and responses, pushed events, and the binary framing an
//! attached connection switches to (`frame`). `docs/protocol.md` documents
//! every message; keep the two in step.
//!
//! Requests are parsed in two stages, as ripgrep parses flags: the raw line
//! into [`RawRequest`] (as close to the wire as possible), then its params
//! into the typed struct of its method (`methods`), whose doc says the reply.

pub mod events;
pub mod frame;
pub mod methods;
pub mod replies;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of everything on the socket. Bump it if you change any message in
/// this module, `methods` or `frame` incompatibly: a client and server that
/// disagree refuse each other at `hello` with both numbers in the message.
pub const PROTOCOL_VERSION: u32 = 1;

/// The server's own version, reported by `hello` and `server.status`.
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The environment variable through which a client that starts a server
/// in the background learns it is ready: it names the write end of a pipe
/// on which the server writes one byte once it accepts connections.
pub const READY_FD_ENV: &str = "PTYD_READY_FD";

/// A request line longer than this is answered with `too_large` and the
/// connection is closed: we cannot find where the next request starts.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// A reply line longer than this is refused with `too_large` (the request
/// was carried out; only its answer is withheld), naming how to ask for
/// less. Any reply up to it is queued even onto a client's full output
/// queue, so one big answer never reads as "this client stopped reading".
pub const MAX_REPLY_BYTES: usize = 4 << 20;

/// A request as it arrives, before its method and params are checked.
#[derive(Debug, Deserialize)]
pub struct RawRequest {
    #[serde(default)]
    pub id: Value,
    pub method: Option<String>,
    #[serde(default)]
    pub params: Value,
}

/// Error codes carried in `{"error": {"code", "message"}}`. Strings, not
/// numbers, so a script reading them needs no table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not JSON, or not a JSON object.
    ParseError,
    /// JSON, but not a request (no `method`).
    InvalidRequest,
    UnknownMethod,
    /// The params do not fit the method; the message names the field.
    InvalidParams,
    /// No pane (or other object) matches the target.
    NotFound,
    /// The target is ambiguous (a name shared by several panes).
    Ambiguous,
    /// The pane's process has exited, so it takes no input.
    PaneExited,
    /// The pane is still running and the request needs it stopped.
    PaneRunning,
    /// Pending input for the pane is over its limit; retry later.
    InputOverflow,
    /// The client and server speak different protocol versions.
    VersionMismatch,
    /// A line over [`MAX_LINE_BYTES`], or a reply over [`MAX_REPLY_BYTES`].
    TooLarge,
    /// A `pane.wait` reached its timeout.
    Timeout,
    /// A prompt or command wait on a pane whose shell has shown no
    /// shell-integration mark and was not started with ptyd's integration:
    /// it would never be answered.
    NoShellIntegration,
    /// Spawning the pane's process failed (bad cwd, command not found, ...).
    SpawnFailed,
    /// The server is shutting down.
    ShuttingDown,
    /// Another operation of the kind is in progress (an upgrade).
    Busy,
    /// `attach` to the pane the client itself runs in.
    SelfAttach,
    /// A live upgrade failed and was rolled back; the old server serves on.
    UpgradeFailed,
    Internal,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
}

/// An error a request handler returns; becomes the `error` member.
#[derive(Debug, Clone)]
pub struct RpcError(pub ErrorBody);

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> RpcError {
        RpcError(ErrorBody {
            code,
            message: message.into(),
        })
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({:?})", self.0.message, self.0.code)
    }
}

/// No number in `id` is a float as large as 2^64: such a number was an
/// integer too long for 64 bits (or a float literal as large), which a
/// float cannot hold exactly. The parser's depth limit bounds the walk.
fn id_comes_back_exactly(id: &Value) -> bool {
    match id {
        Value::Number(n) => {
            !n.is_f64()
                || n.as_f64()
                    .is_some_and(|f| f.abs() < 18_446_744_073_709_551_616.0)
        }
        Value::Array(items) => items.iter().all(id_comes_back_exactly),
        Value::Object(members) => members.values().all(id_comes_back_exactly),
        Value::Null | Value::Bool(_) | Value::String(_) => true,
    }
}

/// Parses one request line (without its `\n`; a trailing `\r` is
/// dropped) as far as it goes without the server: `None` for a blank line
/// (ignored), else the request id (`null` when the line is not a request
/// object) and the typed request or the error to answer. The server's
/// `handle_line` and the fuzz target share it, so what is fuzzed is what
/// serves.
pub fn parse_request_line(line: &[u8]) -> Option<(Value, Result<methods::Request, RpcError>)> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    // Through `Value` first: serde would also build the struct from a
    // JSON array (`[id, method, params]`), which is not a request.
    let mut unknown = None;
    let raw = serde_json::from_slice::<Value>(line).and_then(|v| match v {
        Value::Object(members) => {
            unknown = members
                .keys()
                .find(|k| !matches!(k.as_str(), "id" | "method" | "params"))
                .cloned();
            serde_json::from_value::<RawRequest>(Value::Object(members))
        }
        _ => Err(serde::de::Error::custom(
            "the line is JSON but not an object",
        )),
    });
    let raw = match raw {
        Ok(raw) => raw,
        Err(e) => {
            let err = RpcError::new(
                ErrorCode::ParseError,
                format!(
                    "not a JSON request object ({e}); send one {{\"id\",\"method\",\"params\"}} object per line"
                ),
            );
            return Some((Value::Null, Err(err)));
        }
    };
    // The answer must carry the id back as sent, or the client cannot
    // match it: an id holding an integer past 64 bits (at the top or inside
    // an array or object) is read as a float, inexact, and may not even
    // print back as the same float.
    if !id_comes_back_exactly(&raw.id)
        || serde_json::from_str::<Value>(&raw.id.to_string()).ok() != Some(raw.id.clone())
    {
        let err = RpcError::new(
            ErrorCode::InvalidRequest,
            format!(
                "the request id {} cannot be answered exactly; use a string, or an integer of at most 64 bits",
                crate::validate::excerpt(&raw.id.to_string(), 64)
            ),
        );
        return Some((Value::Null, Err(err)));
    }
    // A member we do not know was meant for something we would not do:
    // refused, as unknown params are, rather than ignored.
    if let Some(member) = unknown {
        let err = RpcError::new(
            ErrorCode::InvalidRequest,
            format!(
                "unknown request member {member:?}: a request has only \"id\", \"method\" and \"params\"; see docs/protocol.md"
            ),
        );
        return Some((raw.id, Err(err)));
    }
    let Some(method) = raw.method else {
        let err = RpcError::new(
            ErrorCode::InvalidRequest,
            "request has no \"method\"; see docs/protocol.md",
        );
        return Some((raw.id, Err(err)));
    };
    Some((raw.id, methods::Request::parse(&method, raw.params)))
}

/// Serializes one response line, newline included.
pub fn response_line(id: &Value, outcome: Result<Value, RpcError>) -> Vec<u8> {
    let body = match outcome {
        Ok(result) => serde_json::json!({ "id": id, "result": result }),
        Err(RpcError(error)) => serde_json::json!({ "id": id, "error": error }),
    };
    let mut line = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
    line.push(b'\n');
    line
}

/// Serializes one pushed event line: `{"event": {...}}` (an event as a
/// `Value`, or as the JSON text the event ring keeps).
pub fn event_line<E: serde::Serialize + ?Sized>(event: &E) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Line<'a, E: ?Sized> {
        event: &'a E,
    }
    let mut line = serde_json::to_vec(&Line { event }).unwrap_or_else(|_| b"{}".to_vec());
    line.push(b'\n');
    line
}
