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
mod tests;
