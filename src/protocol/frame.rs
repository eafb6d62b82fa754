//! Binary framing used once a connection is attached to a pane.
//!
//! After the `attach` response line, both directions carry frames:
//! `[kind: u8][len: u32 big-endian][payload: len bytes]`. Raw terminal bytes
//! cannot be put in JSON lines cheaply, and a length prefix lets either side
//! skip what it does not understand.

/// Largest payload either side may send in one frame. A peer that announces
/// more is broken or hostile: the connection is closed.
pub const MAX_FRAME_PAYLOAD: usize = 1 << 20;
pub const HEADER_LEN: usize = 5;

/// Frame kinds sent by the server.
pub mod server {
    /// Terminal output bytes for the client to write to its terminal.
    pub const OUTPUT: u8 = 1;
    /// The attachment is over; JSON payload `{"reason": "...", "message": "..."}`.
    /// Always the last frame: the client should not reconnect when
    /// `reason` is `pane_exited`, `detached`, `server_exit` or `kicked`;
    /// `server_restart` asks it to (the session comes back at once).
    pub const EXIT: u8 = 2;
    /// Unix: the server took the terminal the client offered (`client::TTY`)
    /// and writes the pane's output straight to it once the client has
    /// answered `client::DIRECT_ACK`; no OUTPUT frame comes until
    /// `DIRECT_OFF`. Payload: JSON `{"keys": true}` when the server can
    /// also read the keys from the terminal (`client::KEYS_ON`; the
    /// terminal was opened for reading too); empty from servers older
    /// than that.
    pub const DIRECT_ON: u8 = 3;
    /// The server writes to the client's terminal no more (it never took
    /// it, the client asked with `client::DIRECT_PAUSE`, the attachment
    /// ends, a live upgrade, a failed write): output comes in OUTPUT frames
    /// again, starting with what the server had not written yet. Payload:
    /// JSON `{"reason": "..."}`.
    pub const DIRECT_OFF: u8 = 4;
    /// The server reads the client's keys no more (the prefix key came, a
    /// stall, the end of direct output): the client reads its terminal
    /// again and handles the bytes carried here first, as if it had just
    /// read them. Payload: `reason_len: u8`, the reason (ASCII), then the
    /// bytes the server read and did not write to the pane (from the
    /// prefix key on; often none). Every `client::KEYS_ON` gets one, unless
    /// the attachment ends by EXIT first or the connection drops.
    pub const KEYS_OFF: u8 = 5;
    /// The client's tab view changed (an attachment with `view`): JSON
    /// `{"workspace": "w1", "tab": "t2", "focus": "p3", "zoom": false}`.
    /// A client that reconnects hands `tab`, `focus` and `zoom` back in
    /// its attach request's `view`, to come back to the same view.
    pub const VIEW: u8 = 6;
    /// The tab view asks the client to run its scroll mode over a pane
    /// (the prefix and `[`): JSON `{"pane": "p3", "page_up": false}`. The
    /// client pauses direct output first, as for its own scroll mode, and
    /// sends `client::REDRAW` when it is done.
    pub const SCROLL: u8 = 7;
}

/// Frame kinds sent by the client.
pub mod client {
    /// Bytes typed by the user, written to the pane as they are.
    pub const INPUT: u8 = 1;
    /// New terminal size: `cols: u16 BE, rows: u16 BE`.
    pub const RESIZE: u8 = 2;
    /// The user detached; the server answers with an EXIT frame.
    pub const DETACH: u8 = 3;
    /// Send a full redraw of the pane (the client's screen was used for
    /// something else, e.g. its scroll mode).
    pub const REDRAW: u8 = 4;
    /// Unix: an offer of the client's terminal, its fd attached to this
    /// frame by `SCM_RIGHTS` (an open file description of the client's own,
    /// opened for it). Empty payload. Answered with `server::DIRECT_ON`,
    /// or `server::DIRECT_OFF` if refused.
    pub const TTY: u8 = 5;
    /// The client has written every frame up to `server::DIRECT_ON` to its
    /// terminal: the server may write to it from now on.
    pub const DIRECT_ACK: u8 = 6;
    /// The client is about to draw on its terminal itself (its scroll
    /// mode, its exit): answered with `server::DIRECT_OFF` once the server
    /// writes to it no more.
    pub const DIRECT_PAUSE: u8 = 7;
    /// Unix: the client stopped reading its terminal, and every byte it
    /// read went out in INPUT frames before this one: the server reads the
    /// keys from the terminal it writes to (after `server::DIRECT_ON`
    /// said `keys`) and writes them to the pane itself, up to the prefix
    /// key, which it hands back with `server::KEYS_OFF`. Payload: one
    /// byte, the prefix key.
    pub const KEYS_ON: u8 = 8;
}

/// A `server::KEYS_OFF` payload: `reason` and the bytes handed back.
pub fn keys_off_payload(reason: &str, rest: &[u8]) -> Vec<u8> {
    let reason = &reason.as_bytes()[..reason.len().min(255)];
    let mut out = Vec::with_capacity(1 + reason.len() + rest.len());
    out.push(reason.len() as u8);
    out.extend_from_slice(reason);
    out.extend_from_slice(rest);
    out
}

/// A `server::KEYS_OFF` payload read back: the reason (lossy UTF-8) and
/// the bytes handed back. An empty or cut payload reads as no reason and
/// the bytes there are.
pub fn parse_keys_off(payload: &[u8]) -> (String, &[u8]) {
    match payload.split_first() {
        Some((&len, rest)) if usize::from(len) <= rest.len() => {
            let (reason, bytes) = rest.split_at(usize::from(len));
            (String::from_utf8_lossy(reason).into_owned(), bytes)
        }
        _ => (String::new(), &[]),
    }
}

pub fn encode(kind: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.push(kind);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
}

/// One decoded frame, borrowing from the input buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub kind: u8,
    pub payload: &'a [u8],
}

#[derive(Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The announced length is over [`MAX_FRAME_PAYLOAD`].
    TooLarge(usize),
}

/// Decodes the first complete frame in `buf`, returning it with the number of
/// bytes it used, or `Ok(None)` if more bytes are needed.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, DecodeError> {
    let Some(header) = buf.get(..HEADER_LEN) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
    if len > MAX_FRAME_PAYLOAD {
        return Err(DecodeError::TooLarge(len));
    }
    let Some(payload) = buf.get(HEADER_LEN..HEADER_LEN + len) else {
        return Ok(None);
    };
    Ok(Some((
        Frame {
            kind: header[0],
            payload,
        },
        HEADER_LEN + len,
    )))
}

/// A frame from the client, by kind, its payload read: what the server
/// acts on (the client's side has `client::ServerFrame`).
#[derive(Debug, PartialEq, Eq)]
pub enum ClientFrame<'a> {
    /// `client::INPUT`: bytes for the pane.
    Input(&'a [u8]),
    /// `client::RESIZE`: the new size, unclamped; `None` for a payload
    /// that is not four bytes (ignored).
    Resize(Option<(u16, u16)>),
    Detach,
    Redraw,
    /// `client::TTY`: the fd came beside the frame.
    Tty,
    DirectAck,
    DirectPause,
    /// `client::KEYS_ON`: its payload holds the prefix key.
    KeysOn(&'a [u8]),
    /// A kind this side does not know: ignored, as frames are
    /// forward-compatible by design.
    Unknown(u8),
}

impl<'a> ClientFrame<'a> {
    pub fn of(f: &Frame<'a>) -> ClientFrame<'a> {
        match f.kind {
            client::INPUT => ClientFrame::Input(f.payload),
            client::RESIZE => ClientFrame::Resize(parse_resize(f.payload)),
            client::DETACH => ClientFrame::Detach,
            client::REDRAW => ClientFrame::Redraw,
            client::TTY => ClientFrame::Tty,
            client::DIRECT_ACK => ClientFrame::DirectAck,
            client::DIRECT_PAUSE => ClientFrame::DirectPause,
            client::KEYS_ON => ClientFrame::KeysOn(f.payload),
            kind => ClientFrame::Unknown(kind),
        }
    }
}

pub fn resize_payload(cols: u16, rows: u16) -> [u8; 4] {
    let c = cols.to_be_bytes();
    let r = rows.to_be_bytes();
    [c[0], c[1], r[0], r[1]]
}

pub fn parse_resize(payload: &[u8]) -> Option<(u16, u16)> {
    match payload {
        [c0, c1, r0, r1] => Some((
            u16::from_be_bytes([*c0, *c1]),
            u16::from_be_bytes([*r0, *r1]),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_partial() {
        let mut buf = Vec::new();
        encode(client::INPUT, b"hello", &mut buf);
        encode(client::RESIZE, &resize_payload(120, 40), &mut buf);
        assert_eq!(decode(&buf[..7]).unwrap(), None);
        let (f, used) = decode(&buf).unwrap().unwrap();
        assert_eq!((f.kind, f.payload), (client::INPUT, &b"hello"[..]));
        let (f, _) = decode(&buf[used..]).unwrap().unwrap();
        assert_eq!(parse_resize(f.payload), Some((120, 40)));
    }

    #[test]
    fn keys_off_round_trip() {
        let p = keys_off_payload("prefix", b"\x1cd");
        assert_eq!(parse_keys_off(&p), ("prefix".to_string(), &b"\x1cd"[..]));
        assert_eq!(parse_keys_off(&[]), (String::new(), &[][..]));
        assert_eq!(parse_keys_off(&[9, b'a']), (String::new(), &[][..]));
    }

    #[test]
    fn refuses_huge_length() {
        let buf = [1, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(decode(&buf), Err(DecodeError::TooLarge(0xffff_ffff)));
    }
}
