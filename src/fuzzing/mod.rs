//! Entry points of the fuzz targets: each takes the raw bytes an untrusted
//! source would deliver and runs them through the code that reads them,
//! asserting what must hold for any input. The cargo-fuzz crate in `fuzz/`
//! calls them (one target each, nightly), and `tests/fuzz_corpus.rs` replays
//! `fuzz/corpus/<target>/` through them on every `cargo test`. Hidden from
//! the docs: this is no API, only the smallest surface the fuzzers need.
//!
//! The targets on the client's and the terminal's side are here; those on
//! the server's (request lines, the handoff, the snapshot, the config,
//! the output log) are in `server.rs` beside this file, which the server
//! compiles as its own child module `server::fuzzing` (a `#[path]` in
//! `server/mod.rs`): the parsers it drives are private to the server, and
//! widening them for the fuzzers alone would let the rest of the crate
//! reach them too. Both are Unix only, like the keeper and the handoff.

use crate::client::{ServerFrame, attach::CrlfToLf, decode_server_frame};
use crate::protocol::frame;
use crate::term::{CaptureOptions, TermConfig, Terminal};

pub use crate::server::fuzzing::{config, handoff, request_lines, snapshot};

/// A fuzz target's entry point: the bytes of one input.
pub type Entry = fn(&[u8]);

/// Every target by name (the directory of its corpus and the binary in
/// `fuzz/`), with its entry point.
pub const TARGETS: &[(&str, Entry)] = &[
    ("request_lines", request_lines),
    ("attach_frames", attach_frames),
    ("handoff", handoff),
    ("snapshot", snapshot),
    ("config", config),
    ("term_feed", term_feed),
    ("term_state", term_state),
];

/// The attach framing both ways. The first byte picks where the stream is
/// cut in two reads; the rest is the byte stream. As the server decodes a
/// client's frames (`server/clients/io.rs`: a frame at a time, a resize parsed and
/// clamped) and as the client decodes the server's (`FrameReader`: output,
/// and an EXIT payload turned into the message it prints). Checks: frames
/// decoded from the stream cut anywhere are the frames of the whole
/// stream, each re-encodes to the bytes it came from, and nothing over the
/// limit is accepted.
pub fn attach_frames(data: &[u8]) {
    let Some((&head, stream)) = data.split_first() else {
        return;
    };
    let cut = if stream.is_empty() {
        0
    } else {
        usize::from(head) * 257 % (stream.len() + 1)
    };
    let whole = server_side(stream, stream.len());
    let split = server_side(stream, cut);
    assert_eq!(whole, split, "frames depend on where reads end (cut {cut})");
    let mut re_encoded = Vec::new();
    for (kind, payload) in &whole.0 {
        frame::encode(*kind, payload, &mut re_encoded);
    }
    assert_eq!(&stream[..re_encoded.len()], &re_encoded[..]);
    client_side(stream, cut);
}

/// The frames (kind, payload) the server takes from `stream` arriving in
/// two reads split at `cut`, and whether it ended the attachment for an
/// oversized frame.
fn server_side(stream: &[u8], cut: usize) -> (Vec<(u8, Vec<u8>)>, bool) {
    let mut frames = Vec::new();
    let mut inbuf = Vec::new();
    for chunk in [&stream[..cut], &stream[cut..]] {
        inbuf.extend_from_slice(chunk);
        let mut start = 0;
        loop {
            match frame::decode(&inbuf[start..]) {
                Ok(Some((f, used))) => {
                    assert!(f.payload.len() <= frame::MAX_FRAME_PAYLOAD);
                    assert_eq!(used, frame::HEADER_LEN + f.payload.len());
                    if let frame::ClientFrame::Resize(Some((cols, rows))) =
                        frame::ClientFrame::of(&f)
                    {
                        let (cols, rows) = crate::pty::clamp_size(u32::from(cols), u32::from(rows));
                        assert!((2..=1000).contains(&cols) && (1..=500).contains(&rows));
                    }
                    frames.push((f.kind, f.payload.to_vec()));
                    start += used;
                }
                Ok(None) => break,
                Err(frame::DecodeError::TooLarge(len)) => {
                    assert!(len > frame::MAX_FRAME_PAYLOAD);
                    return (frames, true);
                }
            }
        }
        inbuf.drain(..start);
    }
    (frames, false)
}

/// What an attached client makes of `stream` from the server: output
/// written out (line ends converted, as `ptyd run` does into a pipe) until
/// an EXIT frame, whose payload becomes the closing message. The batches
/// `ptyd attach` writes straight from its buffer (`decode_output_batch`)
/// must hold exactly what decoding frame by frame gives.
fn client_side(stream: &[u8], cut: usize) {
    use crate::protocol::frame::server::{DIRECT_OFF, DIRECT_ON, KEYS_OFF, SCROLL, VIEW};
    let mut buf = Vec::new();
    let mut out = CrlfToLf::default();
    let mut written = 0;
    for chunk in [&stream[..cut], &stream[cut..]] {
        buf.extend_from_slice(chunk);
        let batch = crate::client::decode_output_batch(&buf);
        let mut one_by_one = Vec::new();
        let mut used = 0;
        let mut exit = None;
        let mut oversized = false;
        let mut direct = None;
        loop {
            // A batch ends after a frame of the direct-output handshake,
            // and after a tab view's or a scroll's (the client acts on it
            // before it writes what follows).
            let kind = match crate::protocol::frame::decode(&buf[used..]) {
                Ok(Some((f, _))) => Some(f.kind),
                _ => None,
            };
            if let Some(k @ (DIRECT_ON | DIRECT_OFF | KEYS_OFF | VIEW | SCROLL)) = kind {
                let (_, n) = crate::protocol::frame::decode(&buf[used..])
                    .ok()
                    .flatten()
                    .expect("decoded just above");
                used += n;
                direct = Some(k);
                break;
            }
            match decode_server_frame(&buf[used..]) {
                Ok(Some((ServerFrame::Output(bytes), n))) => {
                    one_by_one.extend_from_slice(&bytes);
                    used += n;
                }
                Ok(Some((ServerFrame::Exit(payload), n))) => {
                    used += n;
                    exit = Some(payload);
                    break;
                }
                Ok(None) => break,
                Err(_) => {
                    oversized = true;
                    break;
                }
            }
        }
        assert_eq!(batch.payloads.concat(), one_by_one);
        assert_eq!(batch.used, used);
        match batch.end {
            crate::client::BatchEnd::More => {
                assert!(exit.is_none() && !oversized && direct.is_none())
            }
            crate::client::BatchEnd::DirectOn(_) => assert_eq!(direct, Some(DIRECT_ON)),
            crate::client::BatchEnd::DirectOff(_) => assert_eq!(direct, Some(DIRECT_OFF)),
            crate::client::BatchEnd::KeysOff(..) => assert_eq!(direct, Some(KEYS_OFF)),
            crate::client::BatchEnd::Oversized => assert!(oversized),
            crate::client::BatchEnd::View(_) => assert_eq!(direct, Some(VIEW)),
            crate::client::BatchEnd::Scroll(_) => assert_eq!(direct, Some(SCROLL)),
            crate::client::BatchEnd::Exit(payload) => {
                assert_eq!(Some(&payload), exit.as_ref());
                let end = crate::client::attach::end_from_exit(&payload);
                assert!(!end.message.is_empty());
                let _ = crate::client::attach::describe_exit(&payload["exit"]);
                return;
            }
        }
        written += out.convert(&one_by_one).len();
        buf.drain(..used);
        if oversized {
            break;
        }
    }
    written += out.finish().len();
    assert!(written <= stream.len() + 1);
}

/// The terminal model: arbitrary PTY output, split at a point chosen by the
/// input, with a serialization round trip at the split, a redraw replayed
/// into a fresh terminal, a resize (reflow) and a second redraw, and a
/// joined capture. Checks that nothing panics, held-back bytes stay
/// bounded, the round trip is exact, and the output log fed through the
/// model keeps what it keeps fed by itself.
pub fn term_feed(data: &[u8]) {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let cols = u16::from(head & 0x3f) + 1;
    let rows = u16::from(head >> 6) * 7 + 1;
    let cut = if rest.is_empty() {
        0
    } else {
        usize::from(head) * 31 % rest.len()
    };
    let (a, b) = rest.split_at(cut);
    let config = || TermConfig {
        scrollback_lines: 100,
        ..TermConfig::default()
    };

    let mut whole = Terminal::new(cols, rows, config());
    let mut fwd_whole = Vec::new();
    whole.feed(rest, &mut fwd_whole);

    let mut split = Terminal::new(cols, rows, config());
    let mut fwd_split = Vec::new();
    split.feed(a, &mut fwd_split);
    assert!(split.pending_bytes() <= 64 * 1024 + 16);
    let json = serde_json::to_string(&split).expect("serialize");
    let mut split: Terminal = serde_json::from_str(&json).expect("deserialize");
    split.feed(b, &mut fwd_split);
    assert!(split == whole, "round trip at {cut} changed the state");
    assert_eq!(fwd_split, fwd_whole);
    assert_eq!(split.take_replies(), whole.take_replies());
    // The server's output log, fed by the model's pass: as if fed itself.
    crate::server::fuzzing::output_log_fold(rest, cut, cols, rows);

    let mut fresh = Terminal::new(cols, rows, TermConfig::default());
    fresh.feed(&whole.redraw(cols, rows), &mut Vec::new());
    assert_eq!(
        fresh.visible_text(),
        whole.visible_text(),
        "redraw must reproduce the screen"
    );
    // Resizing reflows the main screen: the redraw must still match.
    let (cols, rows) = (rows.wrapping_mul(3) % 200, cols);
    whole.resize(cols, rows);
    let (cols, rows) = whole.size();
    let mut fresh = Terminal::new(cols, rows, TermConfig::default());
    fresh.feed(&whole.redraw(cols, rows), &mut Vec::new());
    assert_eq!(
        fresh.visible_text(),
        whole.visible_text(),
        "redraw after a resize"
    );
    let _ = whole.capture(&CaptureOptions {
        start: Some(-50),
        end: None,
        escapes: true,
        join: true,
    });
}

/// A serialized terminal model as a live upgrade carries it (a pre-copy's
/// or manifest's screen, written by another build or damaged): decoded
/// through its repair, then used as the new server uses it (output fed,
/// resized, redrawn for an attaching client, captured, serialized again).
pub fn term_state(data: &[u8]) {
    if let Ok(mut term) = serde_json::from_slice::<Terminal>(data) {
        exercise_terminal(&mut term);
    }
}

/// What a server does with a terminal it did not build itself. Checks the
/// model stays usable and serializes back to an equal model.
pub(crate) fn exercise_terminal(term: &mut Terminal) {
    let (cols, rows) = term.size();
    assert!(cols >= 1 && rows >= 1, "a repaired terminal has a size");
    let _ = term.visible_text();
    let _ = term.redraw(cols, rows);
    let _ = term.capture(&CaptureOptions {
        start: Some(-10),
        end: None,
        escapes: true,
        join: true,
    });
    let mut forward = Vec::new();
    term.feed(
        b"ab\r\n\x1b[2;3Hc\x1b[?1049h\x1b[Kd\x1b[?1049l\x1b[3S\x1b]0;t\x07 w \xe4\xb8\xad\x1b[6n\x1b[5;1r\n\n",
        &mut forward,
    );
    let _ = term.take_replies();
    term.resize(cols.clamp(2, 200) + 1, rows.clamp(1, 100));
    let (cols, rows) = term.size();
    let _ = term.redraw(cols, rows);
    let json = serde_json::to_string(&*term).expect("a terminal serializes");
    let back: Terminal = serde_json::from_str(&json).expect("a serialized terminal reads back");
    assert!(
        back == *term,
        "a terminal's serialization round trip is exact"
    );
}
