//! A raw JSON-lines client ([`Conn`]): requests, responses, pushed events,
//! and the calls tests make most, each failing with what it was doing.

use super::wait::TIMEOUT;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// A response's error: `(code, message)`.
pub type RpcErr = (String, String);

/// A raw JSON-lines connection to the server. Pushed `{"event": ..}` lines
/// seen while waiting for a response are kept for [`Conn::next_event`].
pub struct Conn {
    pub(super) reader: BufReader<UnixStream>,
    pub stream: UnixStream,
    next_id: u64,
    events: VecDeque<Value>,
    /// Responses read by [`Conn::response`] while it awaited another one.
    early: HashMap<u64, Value>,
}

impl Conn {
    pub fn connect(socket: &Path) -> Conn {
        let stream = UnixStream::connect(socket)
            .unwrap_or_else(|e| panic!("connecting to {}: {e}", socket.display()));
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(TIMEOUT)).unwrap();
        Conn {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
            next_id: 1000,
            events: VecDeque::new(),
            early: HashMap::new(),
        }
    }

    /// Connects without blocking: `None` when the server's listen backlog
    /// is full (a blocking connect would wait for the server to accept).
    pub fn try_connect(socket: &Path) -> Option<Conn> {
        use std::os::fd::FromRawFd;
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: plain socket calls on an fd this function owns; the
        // address is a zeroed sockaddr_un with a path shorter than its buffer.
        let stream = unsafe {
            let fd = libc::socket(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
            );
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let stream = UnixStream::from_raw_fd(fd);
            let mut addr: libc::sockaddr_un = std::mem::zeroed();
            addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
            let path = socket.as_os_str().as_bytes();
            assert!(path.len() < addr.sun_path.len(), "socket path too long");
            for (dst, src) in addr.sun_path.iter_mut().zip(path) {
                *dst = *src as libc::c_char;
            }
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if libc::connect(fd, (&raw const addr).cast(), len) != 0 {
                let e = std::io::Error::last_os_error();
                assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "connect: {e}");
                return None;
            }
            stream
        };
        stream.set_nonblocking(false).unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(TIMEOUT)).unwrap();
        Some(Conn {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
            next_id: 1000,
            events: VecDeque::new(),
            early: HashMap::new(),
        })
    }

    /// Writes raw bytes, exactly as given.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("writing to the server");
    }

    /// Reads one line; `None` at end of stream. Fails the test on timeout.
    pub fn read_line(&mut self) -> Option<Value> {
        let mut line = Vec::new();
        match self.reader.read_until(b'\n', &mut line) {
            Ok(0) => None,
            Ok(_) => Some(serde_json::from_slice(&line).unwrap_or_else(|e| {
                panic!(
                    "server sent a line that is not JSON ({e}): {}",
                    abbreviate(&line)
                )
            })),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!("no line from the server within {TIMEOUT:?}")
            }
            Err(e) => panic!("reading a line from the server: {e}"),
        }
    }

    /// Reads (and drops) lines until the server closes the connection.
    pub fn read_until_eof(&mut self) {
        while self.read_line().is_some() {}
    }

    /// The next response line (not an event), skipping and keeping events;
    /// `None` if the connection ends first.
    pub fn try_next_response(&mut self) -> Option<Value> {
        loop {
            let msg = self.read_line()?;
            if let Some(event) = msg.get("event") {
                self.events.push_back(event.clone());
                continue;
            }
            return Some(msg);
        }
    }

    /// The next response line (not an event), skipping and keeping events.
    pub fn next_response(&mut self) -> Value {
        self.try_next_response()
            .expect("the server closed the connection before responding")
    }

    /// The next pushed event.
    pub fn next_event(&mut self) -> Value {
        if let Some(e) = self.events.pop_front() {
            return e;
        }
        let msg = self
            .read_line()
            .expect("the server closed the connection while we awaited an event");
        match msg.get("event") {
            Some(event) => event.clone(),
            None => panic!("expected an event, got a response: {msg}"),
        }
    }

    /// Reads events until one of type `kind` about `pane` (on a subscribed
    /// connection) and returns it.
    pub fn wait_event(&mut self, kind: &str, pane: &str) -> Value {
        loop {
            let e = self.next_event();
            if e["type"] == kind && e["pane"] == pane {
                return e;
            }
        }
    }

    /// Reads events until one of type `kind`, about anything, and returns it.
    pub fn wait_event_type(&mut self, kind: &str) -> Value {
        loop {
            let e = self.next_event();
            if e["type"] == kind {
                return e;
            }
        }
    }

    /// Sends a request and returns its id.
    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send_raw(&request_line(id, method, params));
        id
    }

    /// Sends a request and returns its whole response line.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        let resp = self.next_response();
        assert_eq!(
            resp["id"],
            json!(id),
            "response to the wrong request: {resp}"
        );
        resp
    }

    /// The response to request `id`, sent earlier with [`Conn::send`], for
    /// requests answered out of order (parked waits, a save behind which a
    /// status overtakes): responses to other requests read meanwhile are
    /// kept for their own call.
    pub fn response(&mut self, id: u64) -> Result<Value, RpcErr> {
        loop {
            if let Some(resp) = self.early.remove(&id) {
                return split(resp);
            }
            let resp = self.next_response();
            match resp["id"].as_u64() {
                Some(got) if got == id => return split(resp),
                Some(other) => {
                    self.early.insert(other, resp);
                }
                None => panic!("a response without an id: {resp}"),
            }
        }
    }

    /// Sends a request and splits the response into result or error.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, RpcErr> {
        split(self.request(method, params))
    }

    /// A call for a server that may die under it: `None` once it is gone.
    pub fn try_call(&mut self, method: &str, params: Value) -> Option<Result<Value, RpcErr>> {
        self.next_id += 1;
        let id = self.next_id;
        self.stream
            .write_all(&request_line(id, method, params))
            .ok()?;
        let resp = self.try_next_response()?;
        assert_eq!(
            resp["id"],
            json!(id),
            "response to the wrong request: {resp}"
        );
        Some(split(resp))
    }

    /// A request that must succeed.
    #[track_caller]
    pub fn ok(&mut self, method: &str, params: Value) -> Value {
        let p = params.to_string();
        self.call(method, params)
            .unwrap_or_else(|e| panic!("{method} {p} failed: {e:?}"))
    }

    /// A request that must fail with `code`; returns the message.
    #[track_caller]
    pub fn err(&mut self, method: &str, params: Value, code: &str) -> String {
        let p = params.to_string();
        match self.call(method, params) {
            Ok(v) => panic!("{method} {p} succeeded ({v}), expected error {code}"),
            Err((c, m)) => {
                assert_eq!(c, code, "{method} {p}: wrong error code; message: {m}");
                m
            }
        }
    }

    /// Creates a pane; returns its info.
    #[track_caller]
    pub fn create(&mut self, params: Value) -> Value {
        self.ok("pane.create", params)
    }

    /// Waits (server side, bounded) for `text` on the pane's screen, there
    /// already or yet to come (`include_screen`); on failure the message
    /// shows the screen.
    #[track_caller]
    pub fn wait_text(&mut self, pane: &str, text: &str) {
        let ms = TIMEOUT.as_millis() as u64;
        if let Err(e) = self.call(
            "pane.wait",
            json!({ "target": pane, "text": text, "include_screen": true, "timeout_ms": ms }),
        ) {
            let screen = self.capture(pane);
            panic!("waiting for {text:?} on {pane}: {e:?}; screen:\n{screen}");
        }
    }

    /// Waits (bounded) for the pane to exit and returns its `exit` object.
    #[track_caller]
    pub fn wait_exit(&mut self, pane: &str) -> Value {
        let ms = TIMEOUT.as_millis() as u64;
        let r = self.ok(
            "pane.wait",
            json!({ "target": pane, "exit": true, "timeout_ms": ms }),
        );
        assert_eq!(r["reason"], "exited", "{r}");
        r["exit"].clone()
    }

    /// The pane's visible text.
    pub fn capture(&mut self, pane: &str) -> String {
        self.ok("pane.capture", json!({ "target": pane }))["text"]
            .as_str()
            .expect("capture text")
            .to_string()
    }

    /// The pane's scrollback and visible text (restored history goes to the
    /// scrollback).
    pub fn capture_all(&mut self, pane: &str) -> String {
        self.ok("pane.capture", json!({ "target": pane, "start": -100_000 }))["text"]
            .as_str()
            .expect("capture text")
            .to_string()
    }

    /// Types `data` into the pane and waits for the ack.
    pub fn input(&mut self, pane: &str, data: &str) -> Value {
        self.ok("pane.input", json!({ "target": pane, "data": data }))
    }

    /// Types a line (ended by Enter) into the pane.
    pub fn type_line(&mut self, pane: &str, line: &str) {
        self.input(pane, &format!("{line}\r"));
    }

    /// Every pane's `pane.list` entry.
    pub fn panes(&mut self) -> Vec<Value> {
        self.ok("pane.list", json!({}))["panes"]
            .as_array()
            .expect("panes array")
            .clone()
    }

    /// Pane id -> pid (-1 for a pane with no process): what "every pane
    /// kept its process" checks compare before and after.
    pub fn pane_pids(&mut self) -> BTreeMap<String, i64> {
        self.panes()
            .iter()
            .map(|p| {
                (
                    p["id"].as_str().unwrap().to_string(),
                    p["pid"].as_i64().unwrap_or(-1),
                )
            })
            .collect()
    }

    /// The `pane.list` entry of the pane with this id, if any.
    pub fn pane_info(&mut self, pane: &str) -> Option<Value> {
        self.panes().into_iter().find(|p| p["id"] == pane)
    }

    /// The `pane.list` entry of the pane with this id or name.
    #[track_caller]
    pub fn pane(&mut self, target: &str) -> Value {
        self.panes()
            .into_iter()
            .find(|p| p["id"] == target || p["name"] == target)
            .unwrap_or_else(|| panic!("no pane {target}"))
    }

    /// `server.save` that must succeed; returns the saved revision.
    #[track_caller]
    pub fn save(&mut self) -> u64 {
        self.ok("server.save", json!({}))["revision"]
            .as_u64()
            .expect("revision")
    }
}

fn request_line(id: u64, method: &str, params: Value) -> Vec<u8> {
    let mut line =
        serde_json::to_vec(&json!({ "id": id, "method": method, "params": params })).unwrap();
    line.push(b'\n');
    line
}

/// Splits a response line into result or `(code, message)`.
pub fn split(resp: Value) -> Result<Value, RpcErr> {
    if let Some(err) = resp.get("error") {
        return Err((
            err["code"].as_str().unwrap_or("?").to_string(),
            err["message"].as_str().unwrap_or("").to_string(),
        ));
    }
    assert!(
        resp.get("result").is_some(),
        "neither result nor error: {resp}"
    );
    Ok(resp["result"].clone())
}

/// Long bytes shortened to their start and end, for failure messages.
pub fn abbreviate(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= 400 {
        return format!("{text:?}");
    }
    let head: String = chars[..200].iter().collect();
    let tail: String = chars[chars.len() - 200..].iter().collect();
    format!("{head:?} ... ({} chars) ... {tail:?}", chars.len())
}

/// Whether a new client gets an answer to `pane.list` (not a refusal, a
/// reset or nothing).
pub fn serves(socket: &Path) -> bool {
    let Ok(mut s) = UnixStream::connect(socket) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(TIMEOUT));
    if s.write_all(b"{\"id\":1,\"method\":\"pane.list\",\"params\":{}}\n")
        .is_err()
    {
        return false;
    }
    let mut line = String::new();
    let _ = BufReader::new(s).read_line(&mut line);
    line.contains("\"result\"")
}
