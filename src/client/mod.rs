//! The client side of the socket: connecting (and starting a background
//! server when none runs, as tmux does), the `hello` exchange, request/response
//! calls, and reading frames once attached. Used by the CLI, the attach
//! client, `ptyd demo` and the tests' helpers.

pub mod attach;
#[cfg(unix)]
mod scroll;
// Starting a background server: told by a ready byte on an inherited fd
// (Unix), or by asking the pipe (Windows).
#[cfg_attr(unix, path = "start/unix.rs")]
#[cfg_attr(windows, path = "start/windows.rs")]
mod start;

use crate::paths::NamespacePaths;
use crate::protocol::methods::{self, Request};
use crate::protocol::{PROTOCOL_VERSION, frame};
use crate::transport::ClientStream as UnixStream;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::io::{self, BufRead, BufReader, Read, Write};

/// An error from the server or from getting there: what kind (which is
/// what callers decide on) and the message for the user, with its context.
#[derive(Debug)]
pub struct ClientError {
    pub kind: ErrorKind,
    pub message: String,
}

/// What went wrong, as a [`ClientError`]'s caller tells failures apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// No server serves the namespace, and none was or could be started.
    NoServer,
    /// A system call on the way failed (the message says which).
    Io,
    /// The server closed the connection.
    Disconnected,
    /// The server sent a line or reply this client cannot read.
    Unreadable,
    /// The server's frames broke the protocol.
    Protocol,
    /// A request this client could not encode.
    Internal,
    /// An attachment ended otherwise than by its pane exiting.
    Detached,
    /// Standard input and output are not a console.
    NotATerminal,
    /// The server did not answer within the time a request may take.
    NoAnswer,
    /// The server refused the request with this code, as on the wire
    /// (`not_found`, `timeout`, `busy`; docs/protocol.md lists them).
    Server(String),
}

impl ErrorKind {
    /// The code `--json` prints and the exit code is chosen by: the
    /// server's own, else this client's name for the kind.
    pub fn code(&self) -> &str {
        match self {
            ErrorKind::NoServer => "no_server",
            ErrorKind::Io => "io",
            ErrorKind::Disconnected => "disconnected",
            ErrorKind::Unreadable => "parse_error",
            ErrorKind::Protocol => "protocol_error",
            ErrorKind::Internal => "internal",
            ErrorKind::Detached => "detached",
            ErrorKind::NotATerminal => "not_a_terminal",
            ErrorKind::NoAnswer => "timeout",
            ErrorKind::Server(code) => code,
        }
    }
}

impl ClientError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ClientError {
        ClientError {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn io(context: &str, e: io::Error) -> ClientError {
        ClientError::new(ErrorKind::Io, format!("{context}: {e}"))
    }

    /// See [`ErrorKind::code`].
    pub fn code(&self) -> &str {
        self.kind.code()
    }

    /// Whether the server refused the request with `code`.
    pub fn refused(&self, code: &str) -> bool {
        matches!(&self.kind, ErrorKind::Server(c) if c == code)
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// How long a request waits for its answer unless it waits by design
/// (`pane.wait` and the others [`waits_by_design`] names): a stopped
/// (SIGSTOP, a debugger) or wedged server must not hang `ptyd ls` forever.
pub const ANSWER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Methods whose answer may come long after the request, by design.
fn waits_by_design(method: &str) -> bool {
    matches!(
        method,
        "pane.wait" | "pane.input" | "server.upgrade" | "server.save" | "server.stop"
    )
}

/// A connection speaking JSON lines.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    /// The read timeout the caller set (`None`: wait forever).
    read_timeout: std::cell::Cell<Option<std::time::Duration>>,
}

impl Client {
    /// Connects to the namespace's server and says hello. With `autostart`, a
    /// missing server is started in the background first.
    pub fn connect(paths: &NamespacePaths, autostart: bool) -> Result<Client, ClientError> {
        // A namespace never served has no runtime directory, and a command
        // that starts no server (status, stop) leaves it so.
        #[cfg(unix)]
        if !autostart
            && let Err(e) = std::fs::symlink_metadata(&paths.runtime_dir)
            && e.kind() == io::ErrorKind::NotFound
        {
            return Err(no_server(paths, e));
        }
        paths
            .prepare_runtime_dir()
            .map_err(|e| ClientError::io("preparing the runtime directory", e))?;
        let stream = match crate::transport::connect(paths) {
            Ok(s) => s,
            Err(e)
                if autostart
                    && matches!(
                        e.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
                    ) =>
            {
                match crate::service::install::installed_socket_unit(&paths.namespace) {
                    Some(unit) => start_through_systemd(paths, &unit)?,
                    None => start::start_background_server(paths)?,
                }
                crate::transport::connect(paths).map_err(|e| {
                    ClientError::io(
                        &format!(
                            "connecting to {}",
                            crate::transport::address(paths).display()
                        ),
                        e,
                    )
                })?
            }
            Err(e) => return Err(no_server(paths, e)),
        };
        let writer = stream
            .try_clone()
            .map_err(|e| ClientError::io("cloning socket", e))?;
        let mut client = Client {
            reader: BufReader::new(stream),
            writer,
            next_id: 1,
            read_timeout: std::cell::Cell::new(None),
        };
        client.request(&Request::Hello(methods::Hello {
            protocol: PROTOCOL_VERSION,
            client: Some("ptyd-cli".into()),
        }))?;
        Ok(client)
    }

    /// Sends a typed request and returns its result as JSON, skipping
    /// pushed events.
    pub fn request(&mut self, request: &Request) -> Result<Value, ClientError> {
        let message = serde_json::to_value(request).map_err(|e| ClientError {
            kind: ErrorKind::Internal,
            message: format!("encoding {}: {e}", request.method()),
        })?;
        let params = message.get("params").cloned().unwrap_or(json!({}));
        self.call(request.method(), params)
    }

    /// Sends a typed request and reads its result into `T` (a
    /// `protocol::replies` struct).
    pub fn request_as<T: DeserializeOwned>(&mut self, request: &Request) -> Result<T, ClientError> {
        let result = self.request(request)?;
        parse_reply(request.method(), result)
    }

    pub fn send_request(&mut self, method: &str, params: Value) -> Result<u64, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut line = serde_json::to_vec(&json!({ "id": id, "method": method, "params": params }))
            .map_err(|e| ClientError {
                kind: ErrorKind::Internal,
                message: e.to_string(),
            })?;
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .map_err(|e| ClientError::io("sending request", e))?;
        Ok(id)
    }

    /// Reads one line: a response or a pushed event.
    pub fn read_message(&mut self) -> Result<Value, ClientError> {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).map_err(|e| {
            let timed_out = matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            );
            let mut err = ClientError::io("reading from server", e);
            if timed_out {
                err.kind = ErrorKind::NoAnswer;
            }
            err
        })?;
        if n == 0 {
            return Err(ClientError {
                kind: ErrorKind::Disconnected,
                message: "the server closed the connection".into(),
            });
        }
        serde_json::from_str(&line).map_err(|e| ClientError {
            kind: ErrorKind::Unreadable,
            message: format!("server sent something that is not JSON ({e})"),
        })
    }

    /// Sends a request and returns its result, skipping pushed events.
    /// Bounded by [`ANSWER_TIMEOUT`] unless the method waits by design.
    /// An error line the server sent for the connection (`id` null: out
    /// of fds, `busy`) is the answer too, also when the server closed the
    /// connection before our request was sent.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let bounded = !waits_by_design(method);
        if bounded {
            let limit = self
                .read_timeout
                .get()
                .map_or(ANSWER_TIMEOUT, |t| t.min(ANSWER_TIMEOUT));
            let _ = self.set_socket_timeout(Some(limit));
        }
        let result = self.call_unbounded(method, params);
        if bounded {
            let _ = self.set_socket_timeout(self.read_timeout.get());
        }
        result.map_err(|e| match e.kind {
            ErrorKind::NoAnswer => ClientError {
                kind: ErrorKind::NoAnswer,
                message: format!(
                    "the ptyd server did not answer {method} within {} s: it may be stopped \
                         (Ctrl-Z, SIGSTOP, a debugger: `kill -CONT` its pid) or stuck; \
                         `ptyd status` tries again",
                    ANSWER_TIMEOUT.as_secs()
                ),
            },
            _ => e,
        })
    }

    fn call_unbounded(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = match self.send_request(method, params) {
            Ok(id) => id,
            // Refused before it read us (out of fds): its line may be
            // waiting unread.
            Err(e) => return Err(self.read_connection_error().unwrap_or(e)),
        };
        loop {
            let msg = match self.read_message() {
                Ok(msg) => msg,
                Err(e) if e.kind == ErrorKind::Io => {
                    return Err(self.read_connection_error().unwrap_or(e));
                }
                Err(e) => return Err(e),
            };
            if msg.get("id").is_some_and(Value::is_null) && msg.get("error").is_some() {
                return response_result(msg);
            }
            if msg.get("id").and_then(Value::as_u64) != Some(id) {
                continue;
            }
            return response_result(msg);
        }
    }

    /// An error line for the whole connection still unread, if any.
    fn read_connection_error(&mut self) -> Option<ClientError> {
        let msg = self.read_message().ok()?;
        if !msg.get("id").is_some_and(Value::is_null) {
            return None;
        }
        response_result(msg).err()
    }

    /// Bounds every later read (`None`: wait forever, the default), so a
    /// caller that must not hang on a stuck server gets an error instead.
    pub fn set_read_timeout(&self, timeout: Option<std::time::Duration>) -> io::Result<()> {
        self.read_timeout.set(timeout);
        self.set_socket_timeout(timeout)
    }

    fn set_socket_timeout(&self, timeout: Option<std::time::Duration>) -> io::Result<()> {
        crate::transport::set_read_timeout(self.reader.get_ref(), timeout)
    }

    /// Reads until the server closes the connection (after `server.stop`:
    /// its last act); an error line it sent for the whole connection
    /// meanwhile (the final save failed) is returned.
    pub fn wait_closed(&mut self) -> Result<(), ClientError> {
        let mut error = None;
        while let Ok(msg) = self.read_message() {
            if msg.get("id").is_some_and(Value::is_null)
                && let Err(e) = response_result(msg)
            {
                error.get_or_insert(e);
            }
        }
        error.map_or(Ok(()), Err)
    }

    /// Gives up the JSON reader, returning the socket and any bytes already
    /// buffered past the last line (the start of the frame stream).
    pub fn into_stream(self) -> (UnixStream, Vec<u8>) {
        let leftover = self.reader.buffer().to_vec();
        (self.reader.into_inner(), leftover)
    }
}

/// A reply read into its typed form (`protocol::replies`); a mismatch is
/// reported as the server sending something this client does not expect.
pub fn parse_reply<T: DeserializeOwned>(method: &str, result: Value) -> Result<T, ClientError> {
    serde_json::from_value(result).map_err(|e| ClientError {
        kind: ErrorKind::Unreadable,
        message: format!("unexpected reply to {method}: {e}"),
    })
}

/// The rows of a `pane.capture` result, without the blank rows at the
/// bottom of the screen.
pub fn capture_lines(capture: &Value) -> Vec<&str> {
    let mut lines: Vec<&str> = capture["lines"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let last = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(0, |i| i + 1);
    lines.truncate(last);
    lines
}

/// Splits a response into its result or error.
pub fn response_result(msg: Value) -> Result<Value, ClientError> {
    if let Some(err) = msg.get("error") {
        return Err(ClientError {
            kind: ErrorKind::Server(err["code"].as_str().unwrap_or("unknown").to_string()),
            message: err["message"]
                .as_str()
                .unwrap_or("unknown error")
                .to_string(),
        });
    }
    Ok(msg.get("result").cloned().unwrap_or(Value::Null))
}

/// Asks the user's systemd to start the namespace's socket unit: the server
/// then runs as the service (in its cgroup, under its restart policy),
/// started by our connection. Never falls back to a server of our own,
/// which would hold the namespace against the service.
fn start_through_systemd(paths: &NamespacePaths, unit: &str) -> Result<(), ClientError> {
    crate::service::install::systemctl(&["start", unit]).map_err(|e| ClientError {
        kind: ErrorKind::NoServer,
        message: format!(
            "no ptyd server in namespace {:?}, and {unit} is installed, so it was asked to \
             start it: {e}. Start the service (`systemctl --user start {unit}`), or remove \
             its units (`ptyd{} service uninstall`) to let commands start servers themselves",
            paths.namespace,
            if paths.namespace == crate::paths::DEFAULT_NAMESPACE {
                String::new()
            } else {
                format!(" -L {}", paths.namespace)
            }
        ),
    })
}

/// Past this size `server.stderr` is moved to `server.stderr.1` before a
/// new background server appends to it.
const SERVER_STDERR_MAX: u64 = 1 << 20;

/// A background server's stderr: the namespace's `server.stderr` (rotated
/// when large; nowhere if it cannot be opened), its path, and where this
/// start's lines begin in it (for [`start_failed`]).
pub(in crate::client) fn server_stderr(
    paths: &NamespacePaths,
) -> (std::process::Stdio, std::path::PathBuf, usize) {
    let _ = paths.prepare_state_dir();
    let path = paths.state_dir.join("server.stderr");
    let file = open_server_stderr(&path).ok();
    let start = file
        .as_ref()
        .and_then(|f| f.metadata().ok())
        .map_or(0, |m| m.len() as usize);
    let stdio = file
        .map(std::process::Stdio::from)
        .unwrap_or_else(std::process::Stdio::null);
    (stdio, path, start)
}

/// A background server did not come up: the error, with what it wrote to
/// its stderr since `start`.
pub(in crate::client) fn start_failed(stderr_path: &std::path::Path, start: usize) -> ClientError {
    let log = std::fs::read(stderr_path).unwrap_or_default();
    let log = String::from_utf8_lossy(log.get(start..).unwrap_or_default());
    ClientError {
        kind: ErrorKind::NoServer,
        // The server's own lines, without their `ptyd: ` prefix: the
        // message gets one when printed.
        message: format!(
            "could not start a ptyd server: {}",
            log.lines()
                .map(|l| l.trim().trim_start_matches("ptyd: "))
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join("; ")
        ),
    }
}

/// Opens the background server's stderr for appending, so what earlier
/// servers logged (why one died, say) survives the next start; rotated once
/// past [`SERVER_STDERR_MAX`], so at most two bounded files exist. A server
/// runs for long, so the bound is checked at each start, not per line.
fn open_server_stderr(path: &std::path::Path) -> io::Result<std::fs::File> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() > SERVER_STDERR_MAX) {
        let mut old = path.as_os_str().to_owned();
        old.push(".1");
        let _ = std::fs::rename(path, old);
    }
    crate::persist::files::open_append(path)
}

/// Reads frames from an attached socket.
///
/// Frames are read into one buffer kept for the attachment and decoded
/// where they lie: `take_output` hands out the OUTPUT payloads as slices of
/// it, for writing to the terminal without copying them again. Consumed
/// bytes are dropped only when a read needs the room, so a batch of frames
/// costs one move of the partial frame after it at most, not one per frame.
pub struct FrameReader {
    stream: UnixStream,
    buf: Vec<u8>,
    /// `buf[start..end]` is received and not yet decoded.
    start: usize,
    end: usize,
}

/// Free room a read is given: a client that fell behind takes what the
/// server's socket holds in one read (its send buffer is ~200 KiB), not
/// in several poll/read rounds.
const READ_ROOM: usize = 256 * 1024;

/// A frame received by a client.
pub enum ServerFrame {
    Output(Vec<u8>),
    Exit(Value),
}

/// Decodes the first whole server frame in `buf`, with the bytes it used;
/// `Ok(None)` until one is complete. An EXIT payload that is not JSON reads
/// as `null` (the attachment still ends); unknown kinds count as output,
/// the direct-output handshake's as empty output.
pub fn decode_server_frame(buf: &[u8]) -> Result<Option<(ServerFrame, usize)>, ClientError> {
    match frame::decode(buf) {
        Ok(Some((f, used))) => {
            let out = match f.kind {
                frame::server::EXIT => ServerFrame::Exit(exit_payload(f.payload)),
                // The direct-output handshake carries no terminal bytes;
                // only a client that offered its terminal gets it.
                frame::server::DIRECT_ON
                | frame::server::DIRECT_OFF
                | frame::server::KEYS_OFF
                | frame::server::VIEW
                | frame::server::SCROLL => ServerFrame::Output(Vec::new()),
                _ => ServerFrame::Output(f.payload.to_vec()),
            };
            Ok(Some((out, used)))
        }
        Ok(None) => Ok(None),
        Err(_) => Err(oversized()),
    }
}

fn exit_payload(payload: &[u8]) -> Value {
    serde_json::from_slice(payload).unwrap_or(Value::Null)
}

fn oversized() -> ClientError {
    ClientError {
        kind: ErrorKind::Protocol,
        message: "oversized frame from server".into(),
    }
}

/// What the whole frames at the start of a buffer hold for the terminal,
/// decoded in place (as `decode_server_frame` would, frame by frame).
pub struct OutputBatch<'a> {
    /// The OUTPUT payloads (and unknown kinds'), in order, empty ones left out.
    pub payloads: Vec<&'a [u8]>,
    /// Bytes the decoded frames used.
    pub used: usize,
    /// How the batch ended: at the buffer's last whole frame, at an EXIT
    /// frame (its payload; nothing after it is decoded), at a frame of
    /// the direct-output handshake (the frames after it are the next
    /// batch's), or at an oversized frame (the payloads before it are
    /// still to be written).
    pub end: BatchEnd,
}

pub enum BatchEnd {
    More,
    Exit(Value),
    /// `DIRECT_ON`, with its payload (`{"keys": true}`, or `null` from a
    /// server that cannot read keys): the server took this client's
    /// terminal.
    DirectOn(Value),
    /// `DIRECT_OFF`, with its payload: the server writes to it no more.
    DirectOff(Value),
    /// `KEYS_OFF`: the server reads this client's keys no more; its
    /// reason, and the bytes it read and handed back.
    KeysOff(String, Vec<u8>),
    /// `VIEW`: the tab view as it is now (JSON).
    View(Value),
    /// `SCROLL`: the tab view asks for the scroll mode over a pane (JSON).
    Scroll(Value),
    Oversized,
}

pub fn decode_output_batch(buf: &[u8]) -> OutputBatch<'_> {
    let mut batch = OutputBatch {
        payloads: Vec::new(),
        used: 0,
        end: BatchEnd::More,
    };
    loop {
        match frame::decode(&buf[batch.used..]) {
            Ok(Some((f, used))) => {
                batch.used += used;
                match f.kind {
                    frame::server::EXIT => {
                        batch.end = BatchEnd::Exit(exit_payload(f.payload));
                        return batch;
                    }
                    frame::server::DIRECT_ON => {
                        batch.end = BatchEnd::DirectOn(exit_payload(f.payload));
                        return batch;
                    }
                    frame::server::KEYS_OFF => {
                        let (reason, rest) = frame::parse_keys_off(f.payload);
                        batch.end = BatchEnd::KeysOff(reason, rest.to_vec());
                        return batch;
                    }
                    frame::server::DIRECT_OFF => {
                        batch.end = BatchEnd::DirectOff(exit_payload(f.payload));
                        return batch;
                    }
                    frame::server::VIEW => {
                        batch.end = BatchEnd::View(exit_payload(f.payload));
                        return batch;
                    }
                    frame::server::SCROLL => {
                        batch.end = BatchEnd::Scroll(exit_payload(f.payload));
                        return batch;
                    }
                    _ => {}
                }
                if !f.payload.is_empty() {
                    batch.payloads.push(f.payload);
                }
            }
            Ok(None) => return batch,
            Err(_) => {
                batch.end = BatchEnd::Oversized;
                return batch;
            }
        }
    }
}

impl FrameReader {
    pub fn new(stream: UnixStream, leftover: Vec<u8>) -> FrameReader {
        let end = leftover.len();
        FrameReader {
            stream,
            buf: leftover,
            start: 0,
            end,
        }
    }

    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }

    /// Decodes frames already buffered.
    pub fn next_buffered(&mut self) -> Result<Option<ServerFrame>, ClientError> {
        let decoded = decode_server_frame(&self.buf[self.start..self.end])?;
        Ok(decoded.map(|(frame, used)| {
            self.start += used;
            frame
        }))
    }

    /// Every whole frame buffered, decoded in place: the payloads borrow
    /// the buffer until the next `fill`. The frames are consumed up to an
    /// EXIT frame (included) or an oversized one (excluded, so
    /// `next_buffered` reports it again).
    pub fn take_output(&mut self) -> OutputBatch<'_> {
        let batch = decode_output_batch(&self.buf[self.start..self.end]);
        self.start += batch.used;
        batch
    }

    /// Reads more bytes from the socket (blocking unless the socket is
    /// non-blocking), straight into the buffer. Returns false at end of
    /// stream.
    pub fn fill(&mut self) -> io::Result<bool> {
        self.make_room();
        let n = (&self.stream).read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n > 0)
    }

    /// At least [`READ_ROOM`] free after the undecoded bytes: consumed
    /// bytes dropped (moving the partial frame, if any, to the front) and
    /// the buffer grown only when that is not enough (a large frame).
    fn make_room(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            // Back to the usual size after a large frame.
            if self.buf.len() > 2 * READ_ROOM {
                self.buf = Vec::new();
            }
        }
        if self.buf.len() - self.end >= READ_ROOM {
            return;
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < READ_ROOM {
            self.buf.resize(self.end + READ_ROOM, 0);
        }
    }

    /// Blocks until the next frame, or `None` at end of stream.
    pub fn next_blocking(&mut self) -> Result<Option<ServerFrame>, ClientError> {
        loop {
            if let Some(f) = self.next_buffered()? {
                return Ok(Some(f));
            }
            match self.fill() {
                Ok(true) => {}
                Ok(false) => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ClientError::io("reading frames", e)),
            }
        }
    }
}

/// Writes one client frame.
pub fn send_frame(mut stream: &UnixStream, kind: u8, payload: &[u8]) -> io::Result<()> {
    let mut out = Vec::with_capacity(payload.len() + frame::HEADER_LEN);
    frame::encode(kind, payload, &mut out);
    stream.write_all(&out)
}

/// Attaches `client` to `target`, returning a frame reader.
pub fn attach(
    mut client: Client,
    params: methods::Attach,
) -> Result<(Value, FrameReader), ClientError> {
    let result = client.request(&Request::Attach(params))?;
    let (stream, leftover) = client.into_stream();
    Ok((result, FrameReader::new(stream, leftover)))
}

/// No server serves `paths`' namespace (`e`: what connecting said).
fn no_server(paths: &NamespacePaths, e: io::Error) -> ClientError {
    ClientError {
        kind: ErrorKind::NoServer,
        message: format!(
            "no ptyd server in namespace {:?} ({}: {e}); start one with `ptyd{} server`",
            paths.namespace,
            crate::transport::address(paths).display(),
            if paths.namespace == crate::paths::DEFAULT_NAMESPACE {
                String::new()
            } else {
                format!(" -L {}", paths.namespace)
            }
        ),
    }
}

/// The size of the terminal on stdout, if it is one (columns, rows).
pub fn terminal_size(out: &std::io::Stdout) -> Option<(u16, u16)> {
    crate::sys::terminal_size(out)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// Output read in place comes out as the server sent it, however the
    /// stream is cut: frames split across reads, many frames per read, a
    /// frame larger than the read room (the buffer grows, then shrinks
    /// back), and nothing after the EXIT frame.
    #[test]
    fn take_output_reassembles_the_stream_cut_anywhere() {
        let (mut server, client) = UnixStream::pair().unwrap();
        let mut stream = Vec::new();
        let mut want = Vec::new();
        for i in 0..200u32 {
            let len = if i == 100 {
                3 * READ_ROOM / 2
            } else {
                (i as usize * 37) % 5000
            };
            let payload: Vec<u8> = (0..len).map(|k| (k as u32 * 7 + i) as u8).collect();
            frame::encode(frame::server::OUTPUT, &payload, &mut stream);
            want.extend_from_slice(&payload);
        }
        frame::encode(
            frame::server::EXIT,
            br#"{"reason":"detached"}"#,
            &mut stream,
        );
        frame::encode(frame::server::OUTPUT, b"after the end", &mut stream);
        // Leftover bytes from the attach reply's read start the stream.
        let leftover = stream[..3].to_vec();
        let rest = stream[3..].to_vec();
        let writer = std::thread::spawn(move || {
            for chunk in rest.chunks(7919) {
                server.write_all(chunk).unwrap();
            }
        });
        let mut reader = FrameReader::new(client, leftover);
        let mut got = Vec::new();
        let exit = loop {
            let batch = reader.take_output();
            for p in &batch.payloads {
                got.extend_from_slice(p);
            }
            match batch.end {
                BatchEnd::More => {}
                BatchEnd::Exit(v) => break v,
                BatchEnd::Oversized => panic!("no frame here is oversized"),
                BatchEnd::DirectOn(_) | BatchEnd::DirectOff(_) | BatchEnd::KeysOff(..) => {
                    panic!("no direct output here")
                }
                BatchEnd::View(_) | BatchEnd::Scroll(_) => panic!("no tab view here"),
            }
            assert!(reader.fill().unwrap(), "the stream ended before EXIT");
        };
        writer.join().unwrap();
        assert_eq!(exit["reason"], "detached");
        assert!(
            got == want,
            "output differs ({} bytes vs {})",
            got.len(),
            want.len()
        );
        assert!(reader.buf.len() <= 2 * READ_ROOM + READ_ROOM / 2);
    }

    /// An oversized frame is reported after the output before it.
    #[test]
    fn oversized_frame_ends_the_batch_after_what_came_before() {
        let mut stream = Vec::new();
        frame::encode(frame::server::OUTPUT, b"before", &mut stream);
        stream.extend_from_slice(&[frame::server::OUTPUT, 0xff, 0xff, 0xff, 0xff]);
        let batch = decode_output_batch(&stream);
        assert_eq!(batch.payloads, vec![&b"before"[..]]);
        assert_eq!(batch.used, frame::HEADER_LEN + 6);
        assert!(matches!(batch.end, BatchEnd::Oversized));
    }
}
