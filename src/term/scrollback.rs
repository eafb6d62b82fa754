//! History: rows that scrolled off the top of the main screen, stored as
//! compact lines (`history_line.rs`) rather than cell grids.
//!
//! The history packs lines back to back in a few large buffers (`Arena`),
//! so an 80-column plain line costs its text plus a 12-byte span, against
//! 960 bytes as cells, and scrolling allocates and frees nothing.
//!
//! Invariants: `bytes` is the sum over the lines of their length plus
//! `SLOT_BYTES`; after every `push`, `len() <= max_lines` and
//! `bytes <= max_bytes` (whichever bound is hit first evicts the oldest
//! lines).

use std::collections::VecDeque;

use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use std::sync::atomic::{AtomicU64, Ordering};

use super::cold::{BLOCK_RAW, BlockRepr, Cold, RecordIn, RecordSource, StoredBlock};
use super::grid::Row;
use super::history_line::LineRepr;
pub use super::history_line::{HistoryLine, Line, LineRef, LineScratch};

/// Largest size of the buffers lines are packed into (a longer line gets
/// one of its own). Buffers start at `FIRST_CHUNK` and double with the
/// history, so a pane with little history does not hold 64 KiB, and stay
/// under a sixteenth of the byte limit, so the buffers' slack (a partly
/// evicted first one, a partly filled last one, the spare) stays small
/// beside it.
const CHUNK: usize = 64 << 10;
const FIRST_CHUNK: usize = 4 << 10;

/// Where a line is: buffer (by sequence number) and byte range.
#[derive(Clone, Copy, Debug)]
struct Span {
    chunk: u32,
    start: u32,
    len: u32,
}

/// The history's lines packed back to back in a few large buffers, oldest
/// first, instead of one allocation each.
///
/// Why: with a line per allocation, every scrolled row cost a malloc and,
/// once the history was full, the free of a line last touched thousands of
/// lines earlier, a cache miss; together about 15% of the time spent on
/// coloured output. Evicting the oldest line here moves an index, and a
/// buffer is recycled once its last line is gone.
///
/// Buffers are named by a wrapping sequence number, so dropping the oldest
/// renumbers nothing; spans hold offsets, not pointers, so a buffer that
/// reallocates (after a clone, whose capacity is its length) stays valid.
#[derive(Clone, Debug, Default)]
struct Arena {
    chunks: VecDeque<Vec<u8>>,
    /// Sequence number of `chunks[0]`.
    first_chunk: u32,
    spans: VecDeque<Span>,
    /// A full-size buffer whose lines are all gone, reused for the next.
    spare: Option<Vec<u8>>,
}

impl Arena {
    fn len(&self) -> usize {
        self.spans.len()
    }

    fn get(&self, i: usize) -> Option<LineRef<'_>> {
        self.view(*self.spans.get(i)?)
    }

    fn view(&self, span: Span) -> Option<LineRef<'_>> {
        let chunk = self
            .chunks
            .get(span.chunk.wrapping_sub(self.first_chunk) as usize)?;
        let start = span.start as usize;
        chunk.get(start..start + span.len as usize).map(LineRef)
    }

    fn iter(&self) -> impl Iterator<Item = LineRef<'_>> {
        self.spans.iter().filter_map(|&span| self.view(span))
    }

    /// Appends a line of `len` bytes, which `encode` writes at the end of
    /// the buffer it is given; a new buffer is at most `max_chunk` long
    /// unless the line is longer. False, having stored nothing, for a line
    /// a span cannot describe (4 GiB; no row makes one).
    fn push(&mut self, len: usize, max_chunk: usize, encode: impl FnOnce(&mut Vec<u8>)) -> bool {
        let room = self.chunks.back().map_or(0, |c| c.capacity() - c.len());
        if room < len || self.chunks.is_empty() {
            self.add_chunk(len, max_chunk);
        }
        let seq = self.first_chunk.wrapping_add(self.chunks.len() as u32 - 1);
        let Some(chunk) = self.chunks.back_mut() else {
            return false;
        };
        let start = chunk.len();
        encode(chunk);
        let span = match (u32::try_from(start), u32::try_from(chunk.len() - start)) {
            (Ok(start), Ok(len)) => Span {
                chunk: seq,
                start,
                len,
            },
            _ => {
                chunk.truncate(start);
                return false;
            }
        };
        self.spans.push_back(span);
        true
    }

    fn add_chunk(&mut self, len: usize, max_chunk: usize) {
        let held: usize = self.chunks.iter().map(Vec::len).sum();
        let size = held
            .next_power_of_two()
            .clamp(FIRST_CHUNK.min(max_chunk), max_chunk);
        let chunk = match self.spare.take() {
            Some(spare) if len <= size && spare.capacity() == size => spare,
            spare => {
                self.spare = spare;
                Vec::with_capacity(size.max(len))
            }
        };
        self.chunks.push_back(chunk);
    }

    /// Drops the oldest line; returns its length.
    fn pop_front(&mut self) -> Option<usize> {
        let span = self.spans.pop_front()?;
        // Buffers before the one holding the oldest line left are empty.
        let keep = match self.spans.front() {
            Some(next) => next.chunk,
            None => self.first_chunk.wrapping_add(self.chunks.len() as u32 - 1),
        };
        while self.first_chunk != keep {
            let Some(mut chunk) = self.chunks.pop_front() else {
                break;
            };
            self.first_chunk = self.first_chunk.wrapping_add(1);
            if chunk.capacity() <= CHUNK {
                chunk.clear();
                self.spare = Some(chunk);
            }
        }
        if self.spans.is_empty()
            && let Some(last) = self.chunks.back_mut()
        {
            last.clear();
        }
        Some(span.len as usize)
    }

    /// Takes the newest line out.
    fn pop_back(&mut self) -> Option<Line> {
        let span = self.spans.pop_back()?;
        let line = self.view(span).map(LineRef::to_line);
        if let Some(last) = self.chunks.back_mut() {
            last.truncate(span.start as usize);
        }
        // The last buffer holds the newest line, or is the only one.
        while self.chunks.len() > 1
            && self.spans.back().is_none_or(|s| {
                s.chunk != self.first_chunk.wrapping_add(self.chunks.len() as u32 - 1)
            })
        {
            self.chunks.pop_back();
        }
        if self.spans.is_empty()
            && let Some(last) = self.chunks.back_mut()
        {
            last.clear();
        }
        line
    }

    /// Heap held: buffers, the index and the spare buffer.
    fn memory_bytes(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum::<usize>()
            + self.spans.capacity() * std::mem::size_of::<Span>()
            + self.chunks.capacity() * std::mem::size_of::<Vec<u8>>()
            + self.spare.as_ref().map_or(0, Vec::capacity)
    }
}

/// Serialized as the sequence of its lines, the form a `VecDeque<Line>`
/// had before the arena: snapshots and handoff manifests did not change.
impl Serialize for Arena {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

/// Decoded straight into the arena, no `Line` allocated per line: a live
/// upgrade decodes every pane's history inside its blackout.
impl<'de> Deserialize<'de> for Arena {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Arena, D::Error> {
        struct Lines;
        impl<'de> Visitor<'de> for Lines {
            type Value = Arena;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a sequence of history lines")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Arena, A::Error> {
                let mut arena = Arena::default();
                let mut scratch = LineScratch::default();
                while let Some(repr) = seq.next_element::<LineRepr>()? {
                    let flags = scratch.fill_from_repr(&repr);
                    let len = scratch.encoded_len();
                    // A line too long to store is dropped, as `push` would.
                    arena.push(len, CHUNK, |buf| scratch.encode(buf, flags));
                }
                Ok(arena)
            }
        }
        deserializer.deserialize_seq(Lines)
    }
}

/// Bytes a line counts against `max_bytes`: its encoding plus a slot (its
/// span, and its share of buffer slack). Sixteen, as when each line was a
/// boxed slice, so the `bytes` recorded in snapshots means the same.
const SLOT_BYTES: usize = 16;

#[derive(Debug, Deserialize)]
#[serde(from = "ScrollbackRepr")]
pub struct Scrollback {
    /// The oldest lines, compressed (`cold.rs`).
    #[serde(skip)]
    cold: Cold,
    /// The newest lines, uncompressed: between one and two blocks' worth
    /// once there is any cold history, so scrolling, a short scroll-back
    /// and reflow's carried lines never decompress.
    lines: Arena,
    /// Bytes counted against `max_bytes`: the hot lines' encodings plus
    /// their slots, and the cold blocks' compressed bytes.
    bytes: usize,
    /// The hot lines' encoded bytes (what goes into blocks).
    #[serde(skip)]
    hot: usize,
    /// Raw bytes a block is filled to (`cold::BLOCK_RAW`; tests lower it).
    #[serde(skip)]
    block_raw: usize,
    max_lines: usize,
    max_bytes: usize,
    /// Scratch buffers for `push_row`, kept so converting a row allocates
    /// nothing.
    #[serde(skip)]
    scratch: LineScratch,
    /// Lines ever pushed: lets a reader ask "what scrolled off since I
    /// last looked", which `len` cannot say once the oldest are trimmed.
    #[serde(default)]
    pushed: u64,
    /// Which numbering of the lines this is (see
    /// `Terminal::history_numbering`; the history log relies on it): taken
    /// afresh from a process-wide counter by anything that changes a line
    /// already numbered (taking the newest back, clearing, reflowing) and
    /// by a new, cloned or decoded history, so no two histories and no two
    /// states of one history that disagree on a numbered line share it.
    /// Pushing (appending) and trimming (evicting the oldest) keep it.
    #[serde(skip)]
    epoch: u64,
}

/// A fresh `Scrollback::epoch`.
fn fresh_epoch() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A clone numbers its lines as the original does but then goes its own
/// way: it gets its own epoch.
impl Clone for Scrollback {
    fn clone(&self) -> Scrollback {
        Scrollback {
            cold: self.cold.clone(),
            lines: self.lines.clone(),
            bytes: self.bytes,
            hot: self.hot,
            block_raw: self.block_raw,
            max_lines: self.max_lines,
            max_bytes: self.max_bytes,
            scratch: LineScratch::default(),
            pushed: self.pushed,
            epoch: fresh_epoch(),
        }
    }
}

/// The form serde's derive gave it (`lines`, `bytes`, `max_lines`,
/// `max_bytes`, `pushed`), written by hand so the lines can be left out
/// while `Terminal::to_json_without_history` runs.
impl Serialize for Scrollback {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut st = serializer.serialize_struct("Scrollback", 6)?;
        let omit = OMIT_LINES.with(std::cell::Cell::get);
        if omit {
            st.serialize_field("lines", &[0u8; 0])?;
        } else {
            st.serialize_field("lines", &self.lines)?;
        }
        // Older than `lines`; absent while there is none, so a history
        // without cold blocks encodes as before them.
        if omit || self.cold.blocks() == 0 {
            st.skip_field("cold")?;
        } else {
            st.serialize_field("cold", &self.cold.to_repr())?;
        }
        // Recomputed on decode; left out with the lines, as it depends on
        // where the blocks were cut.
        if omit {
            st.skip_field("bytes")?;
        } else {
            st.serialize_field("bytes", &self.bytes)?;
        }
        st.serialize_field("max_lines", &self.max_lines)?;
        st.serialize_field("max_bytes", &self.max_bytes)?;
        st.serialize_field("pushed", &self.pushed)?;
        st.end()
    }
}

thread_local! {
    /// Set while `Terminal::to_json_without_history` runs: the history's
    /// lines are written as `[]` (their owner keeps them elsewhere).
    // Already const: clippy 1.96 (the Windows CI's toolchain) reports it
    // anyway for the Windows target's expansion of the macro.
    #[allow(clippy::missing_const_for_thread_local)]
    static OMIT_LINES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `encode` with the history's lines left out of `Scrollback`'s
/// serialization on this thread (restored after, even if it panics).
pub(super) fn without_lines<T>(encode: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            OMIT_LINES.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(OMIT_LINES.with(|c| c.replace(true)));
    encode()
}

/// What a history is decoded from: its `bytes` is recomputed, not read
/// (a snapshot edited by hand must not unbalance the accounting), and the
/// bounds are applied.
#[derive(Deserialize)]
struct ScrollbackRepr {
    #[serde(default)]
    cold: Vec<BlockRepr>,
    lines: Arena,
    max_lines: usize,
    max_bytes: usize,
    #[serde(default)]
    pushed: u64,
}

impl From<ScrollbackRepr> for Scrollback {
    fn from(r: ScrollbackRepr) -> Scrollback {
        let cold = Cold::from_repr(r.cold);
        let hot = r.lines.spans.iter().map(|s| s.len as usize).sum::<usize>();
        let bytes = hot + r.lines.len() * SLOT_BYTES + cold.stored();
        let mut s = Scrollback {
            cold,
            lines: r.lines,
            bytes,
            hot,
            block_raw: BLOCK_RAW,
            max_lines: r.max_lines,
            max_bytes: r.max_bytes,
            scratch: LineScratch::default(),
            pushed: r.pushed,
            epoch: fresh_epoch(),
        };
        // Compressed later (`compress_backlog`): a live upgrade decodes
        // inside its blackout.
        s.trim();
        s
    }
}

/// Equal lines and bounds, however they are stored (hot or cold, in
/// blocks cut where they were).
impl PartialEq for Scrollback {
    fn eq(&self, other: &Scrollback) -> bool {
        let lines = |s: &Scrollback| {
            let mut all = Vec::with_capacity(s.len());
            s.for_each_line(|l| all.push(l.to_line()));
            all
        };
        self.len() == other.len()
            && lines(self) == lines(other)
            && self.max_lines == other.max_lines
            && self.max_bytes == other.max_bytes
    }
}

impl Eq for Scrollback {}

impl Scrollback {
    pub fn new(max_lines: usize, max_bytes: usize) -> Scrollback {
        Scrollback {
            cold: Cold::default(),
            lines: Arena::default(),
            bytes: 0,
            hot: 0,
            block_raw: BLOCK_RAW,
            max_lines,
            max_bytes,
            scratch: LineScratch::default(),
            pushed: 0,
            epoch: fresh_epoch(),
        }
    }

    /// Converts and pushes a screen row that scrolled off: encoded straight
    /// into the arena.
    pub fn push_row(&mut self, row: &Row) {
        if self.max_lines == 0 {
            return;
        }
        self.reserve_slot();
        let flags = self.scratch.fill(row);
        let scratch = &self.scratch;
        let len = scratch.encoded_len();
        let max_chunk = self.max_chunk();
        if self
            .lines
            .push(len, max_chunk, |buf| scratch.encode(buf, flags))
        {
            self.pushed_line(len, true);
        }
    }

    #[cfg(test)]
    pub fn push(&mut self, line: Line) {
        self.push_line(line, true);
    }

    /// `push`, compressing what fills up now (`freeze`) or later.
    fn push_line(&mut self, line: Line, freeze: bool) {
        if self.max_lines == 0 {
            return;
        }
        self.reserve_slot();
        let bytes = &line.0;
        let max_chunk = self.max_chunk();
        let write = |buf: &mut Vec<u8>| buf.extend_from_slice(bytes);
        if self.lines.push(bytes.len(), max_chunk, write) {
            self.pushed_line(bytes.len(), freeze);
        }
    }

    /// Makes room in the index for one more line: by doubling, but no
    /// further than the line bound (plus the line pushed before the oldest
    /// goes); a 10,000-line history would otherwise keep 16,384 slots.
    fn reserve_slot(&mut self) {
        let spans = &mut self.lines.spans;
        if spans.len() == spans.capacity() {
            let doubled = (spans.len() * 2).max(8);
            let want = doubled.min(self.max_lines.saturating_add(1));
            spans.reserve_exact(want.saturating_sub(spans.len()).max(1));
        }
    }

    fn max_chunk(&self) -> usize {
        (self.max_bytes / 16).clamp(256, CHUNK)
    }

    /// Accounts for a line just pushed and evicts the oldest down to the
    /// bounds.
    fn pushed_line(&mut self, len: usize, freeze: bool) {
        self.bytes += len + SLOT_BYTES;
        self.hot += len;
        self.pushed += 1;
        if freeze {
            // Two: one keeps up with output, the other works off a backlog.
            self.freeze(2);
        }
        self.trim();
    }

    /// Whether hot lines wait to be compressed (`compress_backlog`): two
    /// blocks' worth or more.
    pub fn has_backlog(&self) -> bool {
        self.hot >= 2 * self.block_raw
    }

    /// Compresses up to `max_blocks` blocks of the backlog (lines put back
    /// by `restore_blocks` or decoded); the byte bound, held off while
    /// they were uncompressed, applies once they all are. Returns the
    /// blocks compressed.
    pub fn compress_backlog(&mut self, max_blocks: usize) -> usize {
        let n = self.freeze(max_blocks);
        self.trim();
        n
    }

    /// Compresses the oldest hot lines, a block at a time (at most
    /// `max_blocks`), while the hot lines hold two blocks' worth: one block
    /// stays hot. Returns the blocks made.
    fn freeze(&mut self, max_blocks: usize) -> usize {
        let mut made = 0;
        while made < max_blocks && self.has_backlog() {
            made += 1;
            let mut n = 0;
            let mut raw = 0;
            while raw < self.block_raw && n < self.lines.len() {
                raw += self.lines.spans[n].len as usize;
                n += 1;
            }
            let lines = &self.lines;
            self.bytes += self.cold.freeze((0..n).filter_map(|i| lines.get(i)));
            for _ in 0..n {
                self.pop_hot_front();
            }
        }
        made
    }

    fn pop_hot_front(&mut self) -> bool {
        match self.lines.pop_front() {
            Some(len) => {
                self.bytes -= len + SLOT_BYTES;
                self.hot -= len;
                true
            }
            None => false,
        }
    }

    /// Evicts the oldest lines down to the bounds: one at a time for the
    /// line bound, whole blocks of cold ones for the byte bound (a block's
    /// bytes are freed only with its last line).
    fn trim(&mut self) {
        while self.len() > self.max_lines {
            if self.cold.len() > 0 {
                self.bytes -= self.cold.pop_front_line().unwrap_or(0);
            } else if !self.pop_hot_front() {
                break;
            }
        }
        // Not while lines wait to be compressed: they would be evicted for
        // bytes they are about to give back.
        while self.bytes > self.max_bytes && self.len() > 0 && !self.has_backlog() {
            if let Some((_, freed)) = self.cold.drop_front() {
                self.bytes -= freed;
            } else if !self.pop_hot_front() {
                break;
            }
        }
    }

    /// Drops the oldest block of cold lines to bring all panes' histories
    /// back within `scrollback_total_bytes`, leaving a marker line saying
    /// how many lines are gone in their place (the lines after it keep
    /// their numbers: the marker takes the last dropped line's). Returns
    /// the bytes freed; `None` if no block of lines is cold.
    pub fn drop_oldest_block(&mut self) -> Option<usize> {
        let (_, freed) = self.cold.drop_oldest_for_budget()?;
        self.bytes -= freed;
        Some(freed)
    }

    /// Visits every line, oldest first (each cold block decoded once).
    pub fn for_each_line(&self, mut f: impl FnMut(LineRef)) {
        self.cold.for_each(&mut f);
        self.lines.iter().for_each(f);
    }

    /// Bytes held as counted against the bounds: the hot lines' and the
    /// compressed blocks'.
    pub fn stored_bytes(&self) -> usize {
        self.bytes
    }

    /// What the history would hold uncompressed: its lines' encodings.
    pub fn raw_bytes(&self) -> usize {
        self.hot + self.cold.raw()
    }

    /// Lowers the raw size of a block (tests: blocks of a few lines, so
    /// every edge is crossed). Takes effect from the next line pushed.
    pub fn set_block_raw(&mut self, bytes: usize) {
        self.block_raw = bytes.max(1);
    }

    /// All lines, oldest first, leaving the history empty; `pushed` is
    /// kept, so lines put back by `restore_lines` do not count as new.
    pub fn take_lines(&mut self) -> Vec<Line> {
        self.epoch = fresh_epoch();
        self.bytes = 0;
        self.hot = 0;
        let mut all = self.cold.take_all();
        let lines = std::mem::take(&mut self.lines);
        all.extend(lines.iter().map(LineRef::to_line));
        all
    }

    /// Puts lines back after `take_lines` (bounds applied, oldest evicted).
    pub fn restore_lines(&mut self, lines: Vec<Line>) {
        self.put_back(lines, true);
    }

    fn put_back(&mut self, lines: Vec<Line>, freeze: bool) {
        self.epoch = fresh_epoch();
        let pushed = self.pushed;
        for line in lines {
            self.push_line(line, freeze);
        }
        self.pushed = pushed;
    }

    /// The cold blocks as the history log stores them, oldest first.
    pub fn stored_blocks(&self) -> impl Iterator<Item = StoredBlock<'_>> {
        self.cold.stored_blocks()
    }

    /// See `Terminal::keep_history_in_records`.
    pub fn keep_in_records(
        &mut self,
        source: &std::sync::Arc<dyn RecordSource>,
        place: impl Fn(usize, u64) -> Option<u64>,
    ) -> usize {
        self.cold.keep_in_records(source, place)
    }

    /// See `Terminal::keep_history_in_heap`.
    pub fn keep_in_heap(&mut self) {
        self.cold.keep_in_heap();
    }

    /// Lines held hot (the newest ones), not in a block.
    pub fn hot_len(&self) -> usize {
        self.lines.len()
    }

    /// Puts back, into an empty history, the blocks the history log
    /// stored (checked; a damaged one becomes a marker line) and after
    /// them the hot lines, leaving these to `compress_backlog` (what a
    /// live upgrade or a crash recovery puts back, inside its blackout);
    /// `pushed` is kept.
    pub fn restore_blocks(&mut self, blocks: Vec<RecordIn>, hot: Vec<Line>) {
        self.clear();
        self.cold = Cold::from_records(blocks);
        self.bytes = self.cold.stored();
        self.put_back(hot, false);
        self.trim();
    }

    /// Takes back the newest line (used when the screen grows taller).
    pub fn pop_newest(&mut self) -> Option<Line> {
        if self.lines.len() == 0 {
            // The newest block comes back hot, the line from it.
            let (lines, freed) = self.cold.pop_back_block()?;
            self.bytes -= freed;
            for line in lines {
                let bytes = &line.0;
                let write = |buf: &mut Vec<u8>| buf.extend_from_slice(bytes);
                if self.lines.push(bytes.len(), self.max_chunk(), write) {
                    self.bytes += bytes.len() + SLOT_BYTES;
                    self.hot += bytes.len();
                }
            }
        }
        let line = self.lines.pop_back()?;
        // `pushed` stays: every line's number moves up by one.
        self.epoch = fresh_epoch();
        self.bytes -= line.0.len() + SLOT_BYTES;
        self.hot -= line.0.len();
        Some(line)
    }

    pub fn clear(&mut self) {
        self.epoch = fresh_epoch();
        self.cold = Cold::default();
        self.lines = Arena::default();
        self.bytes = 0;
        self.hot = 0;
    }

    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// See `epoch`: equal between two looks only if no line numbered
    /// then was changed or renumbered since.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn len(&self) -> usize {
        self.cold.len() + self.lines.len()
    }

    /// Line `i`, 0 = oldest.
    pub fn get(&self, i: usize) -> Option<HistoryLine<'_>> {
        match i.checked_sub(self.cold.len()) {
            Some(hot) => self.lines.get(hot).map(HistoryLine::Hot),
            None => self
                .cold
                .with_line(i, |l| l.to_line())
                .map(HistoryLine::Cold),
        }
    }

    /// Visits line `i` (0 = oldest) borrowed however it is stored: a cold
    /// one inside the block the history keeps decoded, so walking lines in
    /// order decodes each block once and copies no line.
    pub fn with_line<T>(&self, i: usize, f: impl FnOnce(LineRef) -> T) -> Option<T> {
        match i.checked_sub(self.cold.len()) {
            Some(hot) => self.lines.get(hot).map(f),
            None => self.cold.with_line(i, f),
        }
    }

    /// Heap held by the history.
    pub fn memory_bytes(&self) -> usize {
        self.lines.memory_bytes() + self.cold.memory_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::cell::Style;
    use crate::term::cell::{BOLD, Cell, Color};
    use crate::term::history_line::{FLAG_EXTRAS, Run};

    impl Scrollback {
        /// Line `i` as an owned line, however it is stored.
        fn line(&self, i: usize) -> Option<Line> {
            self.get(i).map(|l| l.view().to_line())
        }
    }

    #[test]
    fn line_is_a_thin_slot() {
        assert_eq!(std::mem::size_of::<Line>(), 16);
    }

    #[test]
    fn from_row_keeps_text_and_runs() {
        let mut row = Row::new(10, Style::DEFAULT);
        let mut bold = Style::DEFAULT;
        bold.fg |= BOLD;
        bold.set_fg(Color::Indexed(1));
        for (i, ch) in "ab".chars().enumerate() {
            row.cells[i] = Cell { ch, style: bold };
        }
        row.cells[2].ch = 'c';
        row.wrapped = true;
        let line = Line::from_row(&row);
        assert_eq!(line.view().text(), "abc");
        assert!(line.view().wrapped());
        let runs: Vec<Run> = line.view().runs().collect();
        assert_eq!(
            runs,
            vec![
                Run {
                    chars: 2,
                    style: bold
                },
                Run {
                    chars: 1,
                    style: Style::DEFAULT
                }
            ]
        );
        let json = serde_json::to_string(&line).unwrap();
        let back: Line = serde_json::from_str(&json).unwrap();
        assert_eq!(back, line);
    }

    /// The wire form is part of the handoff manifest (HANDOFF_VERSION): it
    /// must not change, and text with escapes (not borrowable) and input
    /// from a reader (never borrowable) decode too.
    #[test]
    fn serialized_form_is_stable() {
        let style = Style { fg: 7, bg: 9 };
        let runs = [Run { chars: 3, style }];
        let cases = [
            (Line::new("plain", &[], false), r#"{"t":"plain"}"#),
            (
                Line::new("a\"b\\é", &runs, true),
                r#"{"t":"a\"b\\é","r":[[3,7,9]],"w":true}"#,
            ),
        ];
        for (line, want) in cases {
            assert_eq!(serde_json::to_string(&line).unwrap(), want);
            let back: Line = serde_json::from_str(want).unwrap();
            assert_eq!(back, line);
            let back: Line = serde_json::from_reader(want.as_bytes()).unwrap();
            assert_eq!(back, line);
        }
    }

    #[test]
    fn bounded_by_lines_and_bytes() {
        let mut sb = Scrollback::new(3, usize::MAX);
        for i in 0..10 {
            sb.push(Line::new(&i.to_string(), &[], false));
        }
        assert_eq!(sb.len(), 3);
        assert_eq!(
            sb.line(0).map(|l| l.view().text().to_owned()),
            Some("7".to_owned())
        );
        let mut sb = Scrollback::new(1000, 200);
        for _ in 0..100 {
            sb.push(Line::new(&"x".repeat(50), &[], false));
        }
        assert!(sb.len() <= 3);
        assert!(sb.bytes <= 200);
        assert!(sb.memory_bytes() <= FIRST_CHUNK + 1024);
    }

    fn numbered(i: usize) -> Line {
        // Lengths vary so lines straddle buffer ends at varied offsets.
        Line::new(&format!("{i} {}", "x".repeat(i % 700)), &[], i % 3 == 0)
    }

    /// Lines go through many buffers: eviction recycles them, taking the
    /// newest back and pushing again keeps every line intact, a line
    /// longer than a buffer gets its own, and a clone (whose buffers have
    /// no spare capacity) keeps working.
    #[test]
    fn arena_keeps_lines_across_buffers() {
        let mut sb = Scrollback::new(500, usize::MAX);
        // The arena alone: nothing compressed.
        sb.set_block_raw(usize::MAX / 4);
        let mut want = VecDeque::new();
        for i in 0..3000 {
            let line = if i == 1234 {
                Line::new(&"L".repeat(3 * CHUNK), &[], false)
            } else {
                numbered(i)
            };
            want.push_back(line.clone());
            sb.push(line);
            if want.len() > 500 {
                want.pop_front();
            }
            if i % 7 == 0 {
                assert_eq!(sb.pop_newest(), want.pop_back());
            }
            if i % 500 == 0 {
                sb = sb.clone();
            }
        }
        assert_eq!(sb.len(), want.len());
        for (i, line) in want.iter().enumerate() {
            assert_eq!(sb.line(i).as_ref(), Some(line), "line {i}");
        }
        let held: usize = sb.lines.chunks.iter().map(Vec::len).sum();
        let live: usize = want.iter().map(|l| l.0.len()).sum();
        // Evicted lines' bytes are given back, but for those in the buffer
        // the oldest live line shares.
        assert!(held >= live && held - live < CHUNK, "{held} {live}");
        assert!(sb.memory_bytes() < 2 * live + 2 * CHUNK);
        while let Some(line) = sb.pop_newest() {
            assert_eq!(Some(line), want.pop_back());
        }
        assert!(want.is_empty());
        sb.push(numbered(7));
        assert_eq!(sb.line(0), Some(numbered(7)));
    }

    /// A seeded xorshift generator: the property tests below are
    /// reproducible without a crate for it.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// What the history log (`server/history_log.rs`) relies on: while
    /// the epoch stays, a line number still held names the line it named
    /// when first seen, after any sequence of pushes (evicting by lines
    /// and by bytes), taking the newest back, clearing, reflow's take and
    /// restore, clones and decodes; and `pushed` never goes back.
    #[test]
    fn a_numbered_line_never_changes_within_an_epoch() {
        for seed in 1..=20u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let max_bytes = if seed % 2 == 0 { usize::MAX } else { 3000 };
            let mut sb = Scrollback::new(40 + seed as usize, max_bytes);
            // Most seeds compress blocks of a few lines.
            let block = if seed % 4 == 0 {
                BLOCK_RAW
            } else {
                40 + 23 * seed as usize
            };
            sb.set_block_raw(block);
            let mut seen: std::collections::HashMap<u64, String> = Default::default();
            let (mut epoch, mut pushed) = (sb.epoch(), sb.pushed());
            let mut n = 0;
            for step in 0..400 {
                match rng.below(100) {
                    0..70 => {
                        for _ in 0..=rng.below(30) {
                            n += 1;
                            let style = Style {
                                fg: rng.below(3) as u32,
                                bg: 0,
                            };
                            let runs = [Run { chars: 2, style }];
                            let runs = if style.fg == 0 { &[][..] } else { &runs[..] };
                            let text = format!("{n} \"é{}", "x".repeat(rng.below(90) as usize));
                            sb.push(Line::new(&text, runs, n % 4 == 0));
                        }
                    }
                    70..78 => {
                        sb.pop_newest();
                    }
                    78..81 => sb.clear(),
                    81..86 => {
                        let mut lines = sb.take_lines();
                        lines.truncate(lines.len().saturating_sub(rng.below(3) as usize));
                        lines.push(numbered(step));
                        sb.restore_lines(lines);
                    }
                    86..90 => sb = sb.clone(),
                    90..94 => {
                        sb = serde_json::from_str(&serde_json::to_string(&sb).unwrap()).unwrap();
                        sb.set_block_raw(block);
                    }
                    _ => {}
                }
                assert!(sb.pushed() >= pushed, "seed {seed} step {step}");
                if sb.epoch() != epoch {
                    seen.clear();
                }
                (epoch, pushed) = (sb.epoch(), sb.pushed());
                let oldest = sb.pushed() - sb.len() as u64;
                for i in 0..sb.len() {
                    let json = serde_json::to_string(&sb.line(i).unwrap()).unwrap();
                    let was = seen
                        .entry(oldest + i as u64)
                        .or_insert_with(|| json.clone());
                    assert_eq!(*was, json, "seed {seed} step {step} line {i}");
                }
            }
        }
    }

    /// A history decoded from a snapshot older than `pushed` counts fewer
    /// lines pushed than it holds: its lines cannot be numbered (the
    /// history log leaves them inside the terminal's encoding).
    #[test]
    fn a_history_from_before_the_count_has_no_numbers() {
        let mut sb = Scrollback::new(100, usize::MAX);
        for i in 0..5 {
            sb.push(numbered(i));
        }
        let mut json = serde_json::to_value(&sb).unwrap();
        json.as_object_mut().unwrap().remove("pushed");
        let mut sb: Scrollback = serde_json::from_value(json).unwrap();
        assert_eq!(sb.pushed().checked_sub(sb.len() as u64), None);
        sb.push(numbered(5));
        assert_eq!(sb.pushed().checked_sub(sb.len() as u64), None);
    }

    /// Every line packs to bytes `from_stored` takes back as the same
    /// line; bytes no line packs to (cut short, longer, flags unknown, text
    /// not UTF-8, extras that do not fit) are refused, never a panic.
    #[test]
    fn stored_bytes_come_back_and_damaged_ones_are_refused() {
        let mut sb = Scrollback::new(100, usize::MAX);
        let mut row = Row::new(10, Style::DEFAULT);
        row.cells[0].ch = 'é';
        sb.push_row(&row);
        sb.push(Line::new(
            "red",
            &[Run {
                chars: 3,
                style: Style { fg: 2, bg: 0 },
            }],
            true,
        ));
        sb.push(numbered(7));
        let json = r#"{"t":"ab","x":[[0,1,{"link":{"uri":"http://x/"}}]]}"#;
        sb.push(serde_json::from_str(json).unwrap());
        for i in 0..sb.len() {
            let line = sb.line(i).unwrap();
            let bytes = line.view().stored();
            let back = Line::from_stored(bytes).unwrap();
            assert_eq!(back, line);
            for cut in 0..bytes.len() {
                let _ = Line::from_stored(&bytes[..cut]);
            }
            let mut longer = bytes.to_vec();
            longer.push(0);
            assert!(Line::from_stored(&longer).is_none(), "line {i}");
            let mut flags = bytes.to_vec();
            flags[0] |= 0x80;
            assert!(Line::from_stored(&flags).is_none());
        }
        assert!(Line::from_stored(&[0, 2, 0, 0, 0, 0xff, 0xfe]).is_none());
        assert!(Line::from_stored(&[0, 9, 0, 0, 0, b'a']).is_none());
        assert!(Line::from_stored(&[]).is_none());
        assert!(Line::from_stored(&[FLAG_EXTRAS, 0, 0, 0, 0, 200, 0, 0, 0]).is_none());
    }

    /// Left out on request, and only then.
    #[test]
    fn lines_are_left_out_only_while_asked() {
        let mut sb = Scrollback::new(100, usize::MAX);
        sb.push(numbered(1));
        let without = without_lines(|| serde_json::to_value(&sb).unwrap());
        assert_eq!(without["lines"], serde_json::json!([]));
        assert_eq!(without["pushed"], 1);
        let with = serde_json::to_value(&sb).unwrap();
        assert_eq!(with["lines"].as_array().map(Vec::len), Some(1));
    }

    /// The history serializes as the plain list of lines it was before the
    /// arena (snapshots and handoff manifests read both ways) and decodes
    /// to an equal history, whatever `bytes` the input claims.
    #[test]
    fn history_serializes_as_a_list_of_lines() {
        let mut sb = Scrollback::new(100, usize::MAX);
        let lines: Vec<Line> = (0..300).map(numbered).collect();
        for line in &lines {
            sb.push(line.clone());
        }
        let mut json = serde_json::to_value(&sb).unwrap();
        let as_list = serde_json::to_value(&lines[200..]).unwrap();
        assert_eq!(json["lines"], as_list);
        assert_eq!(json["pushed"], 300);
        let back: Scrollback = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, sb);
        assert_eq!(back.line(99).as_ref(), Some(&lines[299]));
        json["bytes"] = 0.into();
        let mut back: Scrollback = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, sb);
        back.push(numbered(300));
        assert_eq!(back.line(99), Some(numbered(300)));
        // Bounds lower than the lines held are applied on the way in.
        json["max_lines"] = 10.into();
        let back: Scrollback = serde_json::from_value(json).unwrap();
        assert_eq!(back.len(), 10);
        assert_eq!(back.line(9).as_ref(), Some(&lines[299]));
    }

    /// A line of every kind: plain, styled, wide characters, combining
    /// marks, hyperlinks and underline colours (extras), wrapped or not;
    /// lengths vary so block edges fall everywhere.
    fn varied(i: usize) -> Line {
        let text = format!("{i} {}", "w".repeat(i * 7 % 90));
        match i % 5 {
            0 => Line::new(&text, &[], i % 2 == 0),
            1 => Line::new(
                &text,
                &[Run {
                    chars: 2,
                    style: Style { fg: 3, bg: 5 },
                }],
                true,
            ),
            2 => Line::new(&format!("中文{i}e\u{301}"), &[], false),
            3 => {
                let json = format!(
                    r#"{{"t":"{i} link","x":[[0,2,{{"link":{{"uri":"http://x/{i}"}}}}]],"w":true}}"#
                );
                serde_json::from_str(&json).unwrap()
            }
            _ => Line::new("", &[], false),
        }
    }

    fn all_lines(sb: &Scrollback) -> Vec<Line> {
        let mut all = Vec::new();
        sb.for_each_line(|l| all.push(l.to_line()));
        all
    }

    /// Compressed blocks read back as the lines pushed, by index (in any
    /// order, through the one-block cache), in order, through an encoding
    /// (the blocks carried as they are), a clone, reflow's take and
    /// restore and taking the newest back (which thaws blocks), for block
    /// sizes from a line to many; the line bound evicts single lines out
    /// of a block, and compressible text is stored in fewer bytes than raw.
    #[test]
    fn compressed_blocks_read_back_every_line() {
        for block in [1, 7, 100, 333, 4096] {
            let mut sb = Scrollback::new(700, usize::MAX);
            sb.set_block_raw(block);
            let mut want = VecDeque::new();
            for i in 0..1000 {
                sb.push(varied(i));
                want.push_back(varied(i));
                if want.len() > 700 {
                    want.pop_front();
                }
            }
            assert!(sb.cold.blocks() > 1, "block {block}");
            assert_eq!(sb.len(), want.len());
            let want: Vec<Line> = want.into();
            assert_eq!(all_lines(&sb), want, "block {block}");
            for i in (0..want.len()).rev().step_by(3).chain(0..want.len()) {
                assert_eq!(
                    sb.line(i).as_ref(),
                    Some(&want[i]),
                    "block {block} line {i}"
                );
            }
            assert_eq!(sb.line(want.len()), None);
            let json = serde_json::to_value(&sb).unwrap();
            assert!(json["cold"].as_array().is_some_and(|c| !c.is_empty()));
            let back: Scrollback = serde_json::from_value(json).unwrap();
            assert_eq!(back, sb);
            assert_eq!(all_lines(&back), want);
            assert_eq!(all_lines(&sb.clone()), want);
            if block >= 100 {
                assert!(sb.stored_bytes() < sb.raw_bytes(), "block {block}");
            }
            let mut taken = sb.clone();
            let lines = taken.take_lines();
            assert_eq!(lines, want);
            assert_eq!(taken.len(), 0);
            taken.restore_lines(lines);
            assert_eq!(all_lines(&taken), want);
            let mut back = want.clone();
            while let Some(line) = sb.pop_newest() {
                assert_eq!(Some(line), back.pop(), "block {block}");
            }
            assert!(back.is_empty());
            assert_eq!((sb.stored_bytes(), sb.raw_bytes()), (0, 0));
        }
    }

    /// The byte bound counts compressed bytes and evicts whole blocks,
    /// oldest first; what is left is the newest lines, in order.
    #[test]
    fn byte_bound_evicts_whole_blocks() {
        let mut sb = Scrollback::new(usize::MAX, 6000);
        sb.set_block_raw(500);
        for i in 0..5000 {
            sb.push(varied(i));
            assert!(sb.stored_bytes() <= 6000, "line {i}");
        }
        let lines = all_lines(&sb);
        let first = 5000 - lines.len();
        assert!(first > 0 && lines.len() > 50, "{}", lines.len());
        for (k, line) in lines.iter().enumerate() {
            assert_eq!(*line, varied(first + k));
        }
    }

    /// A block that does not decode to lines (bytes flipped, cut, not
    /// base64, a size or line count that does not match, lines that are
    /// not lines) is refused on the way in and leaves one marker line in
    /// its place saying how many lines it held; the blocks around it and
    /// the hot lines read back intact. Never a panic.
    #[test]
    fn a_damaged_block_is_refused_with_a_marker() {
        let mut sb = Scrollback::new(usize::MAX, usize::MAX);
        sb.set_block_raw(300);
        for i in 0..400 {
            sb.push(varied(i));
        }
        let json = serde_json::to_value(&sb).unwrap();
        let blocks = json["cold"].as_array().unwrap().len();
        assert!(blocks >= 3);
        let lines = all_lines(&sb);
        let n1 = json["cold"][1]["n"].as_u64().unwrap() as usize;
        let n0 = json["cold"][0]["n"].as_u64().unwrap() as usize;
        let z = json["cold"][1]["z"].as_str().unwrap().to_owned();
        let mut flipped = z.clone().into_bytes();
        flipped[z.len() / 2] = if flipped[z.len() / 2] == b'A' {
            b'B'
        } else {
            b'A'
        };
        let damages: Vec<(&str, serde_json::Value)> = vec![
            ("z", String::from_utf8(flipped).unwrap().into()),
            ("z", z[..z.len() - 8].to_owned().into()),
            ("z", format!("{z}AAAA").into()),
            ("z", format!("=={}", &z[2..]).into()),
            ("z", "!!!!".into()),
            ("z", "".into()),
            ("raw", 5.into()),
            ("raw", (u32::MAX).into()),
            ("n", (n1 + 1).into()),
            ("n", 1.into()),
            ("sum", 12345.into()),
        ];
        for (field, value) in damages {
            let mut bad = json.clone();
            bad["cold"][1][field] = value.clone();
            let back: Scrollback = serde_json::from_value(bad).unwrap();
            let got = all_lines(&back);
            let lost = got.len() + n1 - lines.len();
            assert_eq!(&got[..n0], &lines[..n0], "{field} = {value}");
            let marker = got[n0].view().text().to_owned();
            assert!(
                marker.contains("damaged") && marker.contains("history lines lost"),
                "{field} = {value}: {marker}"
            );
            assert!(lost >= 1, "{field} = {value}");
            assert_eq!(&got[n0 + 1..], &lines[n0 + n1..], "{field} = {value}");
            assert_eq!(
                back.line(n0).map(|l| l.view().text().to_owned()),
                Some(marker)
            );
        }
        // Raw bytes that decompress but are not framed lines.
        let mut bad = json.clone();
        let junk = lz4_flex::block::compress(&[9, 0, 0, 0, 1, 2, 3]);
        bad["cold"][0]["z"] = super::super::cold::base64_encode(&junk).into();
        bad["cold"][0]["raw"] = 7.into();
        bad["cold"][0]["n"] = 1.into();
        bad["cold"][0]["sum"] = super::super::cold::checksum(&[9, 0, 0, 0, 1, 2, 3]).into();
        let back: Scrollback = serde_json::from_value(bad).unwrap();
        assert!(back.line(0).unwrap().view().text().contains("damaged"));
        assert_eq!(all_lines(&back)[1..], lines[n0..]);
    }

    /// The budget drops the oldest block of lines and leaves one marker
    /// that counts every line dropped so far; the lines after it keep
    /// their numbers; with no block left to drop it gives up.
    #[test]
    fn budget_drop_leaves_one_marker_counting_the_lines() {
        let mut sb = Scrollback::new(usize::MAX, usize::MAX);
        sb.set_block_raw(300);
        for i in 0..400 {
            sb.push(varied(i));
        }
        let numbered = |sb: &Scrollback| {
            let oldest = sb.pushed() - sb.len() as u64;
            all_lines(sb)
                .into_iter()
                .enumerate()
                .map(|(k, l)| (oldest + k as u64, l))
                .collect::<Vec<_>>()
        };
        let before = numbered(&sb);
        let stored = sb.stored_bytes();
        let mut dropped = 0;
        let mut freed_total = 0;
        for round in 1..=2 {
            let first = numbered(&sb);
            let freed = sb.drop_oldest_block().unwrap();
            freed_total += freed;
            let after = numbered(&sb);
            // The lines before the marker (the marker's own number
            // included) are gone.
            let marker = &after[0];
            dropped += (marker.0 - first[0].0) as usize + if round == 1 { 1 } else { 0 };
            let text = marker.1.view().text();
            assert!(
                text.contains(&format!("{dropped} older history lines dropped")),
                "{text}"
            );
            assert_eq!(&after[1..], &before[dropped..]);
        }
        assert_eq!(sb.stored_bytes(), stored - freed_total);
        while sb.drop_oldest_block().is_some() {}
        assert!(sb.line(0).unwrap().view().text().contains("dropped"));
        assert_eq!(sb.cold.blocks(), 1);
        assert_eq!(numbered(&sb).last(), before.last());
    }

    /// Lines put back for later (a live upgrade's) are compressed by
    /// `compress_backlog`, a few blocks at a time; until then the byte
    /// bound waits, rather than evict lines that fit once compressed.
    #[test]
    fn lines_put_back_for_later_are_compressed_on_request() {
        let log =
            |i: usize| Line::new(&format!("line {i} of a log that says the same"), &[], false);
        let mut sb = Scrollback::new(usize::MAX, 20_000);
        sb.set_block_raw(1000);
        for i in 0..3000 {
            sb.push(log(i));
        }
        let want = all_lines(&sb);
        assert!(want.len() < 3000 && sb.stored_bytes() <= 20_000);
        let mut back = Scrollback::new(usize::MAX, 20_000);
        back.set_block_raw(1000);
        back.restore_blocks(Vec::new(), want.clone());
        assert!(back.has_backlog() && back.stored_bytes() > 20_000);
        assert_eq!(all_lines(&back), want);
        let mut turns = 0;
        while back.has_backlog() {
            assert!(back.compress_backlog(3) <= 3);
            turns += 1;
        }
        assert!(turns > 1);
        let got = all_lines(&back);
        assert!(back.stored_bytes() <= 20_000);
        assert!(
            got.len() * 10 >= want.len() * 9,
            "{} of {}",
            got.len(),
            want.len()
        );
        assert_eq!(got[..], want[want.len() - got.len()..]);
    }
}
