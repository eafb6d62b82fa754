//! Fuzzes the terminal model: arbitrary PTY output, split at a point chosen
//! by the input, with a serialization round trip at the split, a redraw
//! replayed into a fresh terminal, a resize (reflow) and a second redraw,
//! and a joined capture. Checks that
//! nothing panics, held-back bytes stay bounded, and the round trip is exact.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run term_feed`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use ptyd::term::{CaptureOptions, TermConfig, Terminal};

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else { return };
    let cols = u16::from(head & 0x3f) + 1;
    let rows = u16::from(head >> 6) * 7 + 1;
    let cut = if rest.is_empty() { 0 } else { usize::from(head) * 31 % rest.len() };
    let (a, b) = rest.split_at(cut);

    let mut whole = Terminal::new(cols, rows, TermConfig { scrollback_lines: 100, ..TermConfig::default() });
    let mut fwd_whole = Vec::new();
    whole.feed(rest, &mut fwd_whole);

    let mut split = Terminal::new(cols, rows, TermConfig { scrollback_lines: 100, ..TermConfig::default() });
    let mut fwd_split = Vec::new();
    split.feed(a, &mut fwd_split);
    assert!(split.pending_bytes() <= 64 * 1024 + 16);
    let json = serde_json::to_string(&split).expect("serialize");
    let mut split: Terminal = serde_json::from_str(&json).expect("deserialize");
    split.feed(b, &mut fwd_split);
    assert!(split == whole, "round trip at {cut} changed the state");
    assert_eq!(fwd_split, fwd_whole);
    assert_eq!(split.take_replies(), whole.take_replies());

    let mut fresh = Terminal::new(cols, rows, TermConfig::default());
    fresh.feed(&whole.redraw(cols, rows), &mut Vec::new());
    assert_eq!(fresh.visible_text(), whole.visible_text(), "redraw must reproduce the screen");
    // Resizing reflows the main screen: the redraw must still match.
    let (cols, rows) = (rows.wrapping_mul(3) % 200, cols);
    whole.resize(cols, rows);
    let (cols, rows) = whole.size();
    let mut fresh = Terminal::new(cols, rows, TermConfig::default());
    fresh.feed(&whole.redraw(cols, rows), &mut Vec::new());
    assert_eq!(fresh.visible_text(), whole.visible_text(), "redraw after a resize");
    let _ = whole.capture(&CaptureOptions { start: Some(-50), end: None, escapes: true, join: true });
});
