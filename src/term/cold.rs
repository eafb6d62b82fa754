//! Cold history: the oldest lines of a history, packed into blocks of about
//! `BLOCK_RAW` bytes and compressed with LZ4 once a block is full (see
//! docs/design/compressed-scrollback.md for the numbers behind the choices).
//!
//! A block's raw form is its lines' packed bytes (`LineRef::stored`), each
//! preceded by its length as a little-endian u32. Reading a line decodes its
//! block into a one-block cache, so a reader walking lines in order (scroll
//! mode, capture, search, replay, the history log) decodes each block once.
//!
//! Blocks are immutable: the line bound evicts a block's oldest lines by
//! counting them off (`skip`), the byte bounds drop whole blocks. Blocks
//! that come from outside (a snapshot, a handoff) are checked line by line
//! on the way in; one that does not decode is replaced by a marker line
//! that says how many lines were lost.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::scrollback::{Line, LineRef};

/// Raw bytes a block is filled to before it is compressed.
pub(super) const BLOCK_RAW: usize = 32 << 10;

/// Largest raw block accepted from outside: a block holds one line at least,
/// and a line of 65,535 columns, each a 4-byte character with its own style
/// run, stays below this.
const MAX_BLOCK_RAW: usize = 4 << 20;

/// Heap a block holds besides its compressed bytes (its slot in the deque,
/// the box's allocation rounding), counted against the byte bounds.
const BLOCK_OVERHEAD: usize = 48;

/// Where block records are read from when a block's bytes are not in the
/// heap: the history log's memfd (`server/continuity/history_log.rs`),
/// which holds each block once as `[header | lz4 bytes]`.
pub trait RecordSource: Send + Sync + std::fmt::Debug {
    /// Fills `buf` with the bytes at `offset`.
    fn read_record(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
}

/// Where a block's compressed bytes are: in the heap (no log, or not
/// written to it yet), or only in the log, as the record at `offset`
/// (header first), so the history is held once.
#[derive(Clone, Debug)]
enum Bytes {
    Heap(Box<[u8]>),
    Record {
        source: Arc<dyn RecordSource>,
        offset: u64,
    },
}

#[derive(Clone, Debug)]
struct Block {
    /// Process-wide unique while the block lives (a clone keeps it: the
    /// bytes are the same): how the history log knows a block it wrote.
    id: u64,
    bytes: Bytes,
    /// Size of the compressed bytes, wherever they are.
    z_len: u32,
    raw_len: u32,
    /// Lines packed into it.
    lines: u32,
    /// Its oldest lines already evicted by the line bound.
    skip: u32,
    /// Number of its first line among the lines ever frozen in this store,
    /// so a line is found by binary search.
    first: u64,
    /// For a marker block (one line saying lines were dropped to keep
    /// within `scrollback_total_bytes`): how many; 0 for lines.
    dropped: u64,
    /// `checksum` of the raw bytes: a block from outside whose bytes
    /// decode to other lines than were packed (a flipped literal) is
    /// refused too.
    sum: u64,
}

impl Block {
    fn held(&self) -> usize {
        (self.lines - self.skip) as usize
    }

    fn stored(&self) -> usize {
        self.z_len as usize + BLOCK_OVERHEAD
    }

    /// Compressed bytes the heap holds for it.
    fn heap_bytes(&self) -> usize {
        match &self.bytes {
            Bytes::Heap(z) => z.len(),
            Bytes::Record { .. } => 0,
        }
    }

    /// Its record's header (see `RECORD_HEADER`).
    fn header(&self) -> [u8; RECORD_HEADER] {
        let mut header = [0u8; RECORD_HEADER];
        header[..4].copy_from_slice(&RECORD_MAGIC);
        header[4..8].copy_from_slice(&self.lines.to_le_bytes());
        header[8..12].copy_from_slice(&self.raw_len.to_le_bytes());
        header[12..16].copy_from_slice(&self.z_len.to_le_bytes());
        header[16..24].copy_from_slice(&self.dropped.to_le_bytes());
        header[24..32].copy_from_slice(&self.sum.to_le_bytes());
        header
    }

    /// Its compressed bytes: borrowed from the heap, or read from its
    /// record into `scratch` (whose header must be this block's: a range
    /// given back, or junk written over it, is an error).
    fn z<'a>(&'a self, scratch: &'a mut Vec<u8>) -> std::io::Result<&'a [u8]> {
        let (source, offset) = match &self.bytes {
            Bytes::Heap(z) => return Ok(z),
            Bytes::Record { source, offset } => (source, *offset),
        };
        scratch.clear();
        scratch.resize(RECORD_HEADER + self.z_len as usize, 0);
        source.read_record(offset, scratch)?;
        if scratch[..RECORD_HEADER] != self.header() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the history block record at {offset} is not the block it should be"),
            ));
        }
        Ok(&scratch[RECORD_HEADER..])
    }

    /// Its bytes back in the heap (read from its record); a record that
    /// cannot be read leaves no bytes, so the block reads as a marker.
    fn bring_into_heap(&mut self) {
        if matches!(self.bytes, Bytes::Heap(_)) {
            return;
        }
        let mut scratch = Vec::new();
        let z: Box<[u8]> = self.z(&mut scratch).map(Box::from).unwrap_or_default();
        self.bytes = Bytes::Heap(z);
    }
}

/// A fresh `Block::id`.
fn fresh_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Bytes before a block record's compressed bytes: `RECORD_MAGIC`, then as
/// little-endian integers the lines packed (u32), the raw size (u32), the
/// compressed size (u32), the lines a budget marker stands for (u64) and
/// the raw bytes' checksum (u64). Lines evicted from the block since are
/// not in it (a record is written once): its reader is told them.
pub const RECORD_HEADER: usize = 32;
const RECORD_MAGIC: [u8; 4] = *b"ptB1";

/// The checksum a block record's header names, `None` if it is not one.
pub fn record_checksum(record: &[u8]) -> Option<u64> {
    let head = record.first_chunk::<RECORD_HEADER>()?;
    let sum = head[24..].first_chunk::<8>()?;
    (head[..4] == RECORD_MAGIC).then(|| u64::from_le_bytes(*sum))
}

/// A cold block as the history log stores it: `header` then `z()`, the
/// compressed bytes as they are.
pub struct StoredBlock<'a> {
    pub id: u64,
    /// Its oldest lines already evicted (not counted in `lines`).
    pub skip: u32,
    /// Lines packed into it, evicted ones included.
    pub lines: u32,
    pub sum: u64,
    pub header: [u8; RECORD_HEADER],
    block: &'a Block,
}

impl StoredBlock<'_> {
    /// Its compressed bytes the heap holds: 0 once they are only in its
    /// record.
    pub fn heap_bytes(&self) -> usize {
        self.block.heap_bytes()
    }

    /// The compressed bytes: borrowed from the heap, or read from the
    /// record that holds them (a log other than the one writing them).
    pub fn z(&self) -> std::io::Result<Cow<'_, [u8]>> {
        match &self.block.bytes {
            Bytes::Heap(z) => Ok(Cow::Borrowed(z)),
            Bytes::Record { .. } => {
                let mut scratch = Vec::new();
                self.block.z(&mut scratch)?;
                scratch.drain(..RECORD_HEADER);
                Ok(Cow::Owned(scratch))
            }
        }
    }
}

/// A block record read back from outside, not yet checked: its bytes
/// (`None` if they could not be read), the lines its reader was told it
/// holds (for the marker, should the record be damaged) and how many of
/// them are evicted.
pub struct RecordIn {
    pub bytes: Option<Vec<u8>>,
    pub lines: u32,
    pub skip: u32,
}

/// A block decoded: its raw bytes and where each line starts in them.
#[derive(Debug, Default)]
struct Decoded {
    first: u64,
    raw: Vec<u8>,
    /// A record read from the log, before it is decoded into `raw`.
    record: Vec<u8>,
    /// (start, len) of each line in `raw`.
    spans: Vec<(u32, u32)>,
}

impl Decoded {
    fn line(&self, k: usize) -> Option<LineRef<'_>> {
        let &(start, len) = self.spans.get(k)?;
        let start = start as usize;
        self.raw.get(start..start + len as usize).map(LineRef::new)
    }
}

#[derive(Debug, Default)]
pub(super) struct Cold {
    blocks: VecDeque<Block>,
    /// `first` of the next block frozen.
    next_first: u64,
    /// Lines held (skipped ones not counted).
    lines: usize,
    /// Sum of the blocks' `stored`.
    stored: usize,
    /// Sum of the blocks' raw sizes.
    raw: usize,
    /// The block read last. A mutex, not a `RefCell`, so a terminal can
    /// still be shared between threads for reading.
    cache: Mutex<Option<Decoded>>,
}

impl Clone for Cold {
    /// A clone holds its blocks' bytes in its heap: it may outlive the
    /// records, which the log frees with the blocks of this store.
    fn clone(&self) -> Cold {
        let mut blocks = self.blocks.clone();
        blocks.iter_mut().for_each(Block::bring_into_heap);
        Cold {
            blocks,
            next_first: self.next_first,
            lines: self.lines,
            stored: self.stored,
            raw: self.raw,
            cache: Mutex::default(),
        }
    }
}

/// A fast 64-bit hash of a block's raw bytes, eight at a time (a cost
/// beside the compression's, not a cryptographic check).
pub(super) fn checksum(raw: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325 ^ raw.len() as u64;
    let mut words = raw.chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31);
    }
    let mut last = [0u8; 8];
    last[..words.remainder().len()].copy_from_slice(words.remainder());
    h = (h ^ u64::from_le_bytes(last)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ h >> 29
}

/// Frames `lines` into a block's raw form.
fn frame<'a>(lines: impl Iterator<Item = LineRef<'a>>, raw: &mut Vec<u8>) -> u32 {
    let mut n = 0;
    for line in lines {
        let bytes = line.stored();
        raw.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        raw.extend_from_slice(bytes);
        n += 1;
    }
    n
}

/// Where each framed line is in `raw`; `None` unless `raw` is exactly
/// `lines` frames.
fn unframe(raw: &[u8], lines: u32) -> Option<Vec<(u32, u32)>> {
    let mut spans = Vec::with_capacity(lines as usize);
    let mut at = 0usize;
    while at < raw.len() {
        let len = u32::from_le_bytes(raw.get(at..at + 4)?.try_into().ok()?);
        let start = at + 4;
        let end = start
            .checked_add(len as usize)
            .filter(|&e| e <= raw.len())?;
        spans.push((u32::try_from(start).ok()?, len));
        at = end;
    }
    (spans.len() == lines as usize).then_some(spans)
}

/// Decodes `block` (`record`: room to read its record into); `None` if
/// its bytes cannot be read or do not decode to its lines.
fn decode(block: &Block, raw: &mut Vec<u8>, record: &mut Vec<u8>) -> Option<Vec<(u32, u32)>> {
    let z = block.z(record).ok()?;
    raw.clear();
    raw.resize(block.raw_len as usize, 0);
    let n = lz4_flex::block::decompress_into(z, raw).ok()?;
    if n != raw.len() || checksum(raw) != block.sum {
        return None;
    }
    unframe(raw, block.lines)
}

/// The line shown where lines are missing: dropped to keep within the
/// budget, or lost with a block that did not decode.
pub(super) fn marker_text(dropped: u64, damaged: bool) -> String {
    if damaged {
        format!(
            "[ptyd: {dropped} history lines lost here: their stored block is damaged and was refused]"
        )
    } else {
        format!(
            "[ptyd: {dropped} older history lines dropped here to keep within scrollback_total_bytes]"
        )
    }
}

impl Cold {
    pub(super) fn len(&self) -> usize {
        self.lines
    }

    pub(super) fn stored(&self) -> usize {
        self.stored
    }

    pub(super) fn raw(&self) -> usize {
        self.raw
    }

    pub(super) fn blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Heap held: compressed bytes, the block index and the cache.
    pub(super) fn memory_bytes(&self) -> usize {
        let cache = self
            .cache
            .lock()
            .ok()
            .and_then(|c| {
                c.as_ref()
                    .map(|d| d.raw.capacity() + d.record.capacity() + d.spans.capacity() * 8)
            })
            .unwrap_or(0);
        self.blocks.iter().map(Block::heap_bytes).sum::<usize>()
            + self.blocks.capacity() * std::mem::size_of::<Block>()
            + cache
    }

    /// Compresses `lines` (oldest first) into a new newest block. Returns
    /// the bytes it holds (as counted against the bounds).
    pub(super) fn freeze<'a>(&mut self, lines: impl Iterator<Item = LineRef<'a>>) -> usize {
        let mut raw = Vec::with_capacity(BLOCK_RAW + BLOCK_RAW / 4);
        let n = frame(lines, &mut raw);
        self.push_block(&raw, n, 0)
    }

    fn push_block(&mut self, raw: &[u8], lines: u32, dropped: u64) -> usize {
        if lines == 0 {
            return 0;
        }
        let z = lz4_flex::block::compress(raw).into_boxed_slice();
        let block = Block {
            id: fresh_id(),
            z_len: z.len() as u32,
            bytes: Bytes::Heap(z),
            raw_len: raw.len() as u32,
            lines,
            skip: 0,
            first: self.next_first,
            dropped,
            sum: checksum(raw),
        };
        self.next_first += u64::from(lines);
        self.lines += lines as usize;
        self.raw += raw.len();
        let stored = block.stored();
        self.stored += stored;
        self.blocks.push_back(block);
        stored
    }

    /// A one-line block at the oldest end holding `line`.
    fn push_front_line(&mut self, line: LineRef, dropped: u64) {
        let mut raw = Vec::new();
        frame(std::iter::once(line), &mut raw);
        self.push_block(&raw, 1, dropped);
        if let Some(block) = self.blocks.pop_back() {
            self.blocks.push_front(block);
        }
        self.renumber();
    }

    /// Block numbers must rise from the front; after an insertion at the
    /// front they are laid anew (a few thousand blocks at most, and only
    /// when the budget drops a block).
    fn renumber(&mut self) {
        let mut at = 0u64;
        for b in &mut self.blocks {
            b.first = at;
            at += u64::from(b.lines);
        }
        self.next_first = at;
        if let Ok(mut cache) = self.cache.lock() {
            *cache = None;
        }
    }

    /// Visits held line `i` (0 = oldest).
    pub(super) fn with_line<T>(&self, i: usize, f: impl FnOnce(LineRef) -> T) -> Option<T> {
        if i >= self.lines {
            return None;
        }
        let front = self.blocks.front()?;
        let want = front.first + u64::from(front.skip) + i as u64;
        let b = self.blocks.partition_point(|b| b.first <= want) - 1;
        let block = self.blocks.get(b)?;
        let k = (want - block.first) as usize;
        let mut guard = self.cache.lock().ok();
        let cache = guard.as_deref_mut()?;
        if cache.as_ref().is_none_or(|d| d.first != block.first) {
            let mut d = cache.take().unwrap_or_default();
            d.first = block.first;
            match decode(block, &mut d.raw, &mut d.record) {
                Some(spans) => d.spans = spans,
                None => {
                    // Blocks from outside are checked on the way in and
                    // ours are made here: a record damaged in the log
                    // since (or a bug), shown, not fatal.
                    let text = marker_text(u64::from(block.lines), true);
                    let line = Line::plain(&text);
                    return Some(f(line.view()));
                }
            }
            *cache = Some(d);
        }
        cache.as_ref()?.line(k).map(f)
    }

    /// Visits every held line, oldest first, decoding each block once.
    pub(super) fn for_each(&self, mut f: impl FnMut(LineRef)) {
        let (mut raw, mut record) = (Vec::new(), Vec::new());
        for block in &self.blocks {
            match decode(block, &mut raw, &mut record) {
                Some(spans) => {
                    for &(start, len) in &spans[block.skip as usize..] {
                        let start = start as usize;
                        f(LineRef::new(&raw[start..start + len as usize]));
                    }
                }
                None => {
                    let line = Line::plain(&marker_text(u64::from(block.lines), true));
                    for _ in 0..block.held() {
                        f(line.view());
                    }
                }
            }
        }
    }

    /// Evicts the oldest line; returns the bytes freed (those of its block
    /// once its last line goes, else 0), `None` if empty.
    pub(super) fn pop_front_line(&mut self) -> Option<usize> {
        let block = self.blocks.front_mut()?;
        block.skip += 1;
        self.lines -= 1;
        if block.skip < block.lines {
            return Some(0);
        }
        self.drop_front().map(|(_, stored)| stored)
    }

    /// Drops the oldest block: (lines held, bytes freed).
    pub(super) fn drop_front(&mut self) -> Option<(usize, usize)> {
        let block = self.blocks.pop_front()?;
        if block.skip < block.lines {
            self.lines -= block.held();
        }
        self.stored -= block.stored();
        self.raw -= block.raw_len as usize;
        Some((block.held(), block.stored()))
    }

    /// Drops the oldest block of lines (and a marker before it) and puts a
    /// marker saying how many lines are gone in their place. Returns the
    /// lines dropped and the stored bytes freed (net of the marker's);
    /// `None` if there is no block of lines to drop.
    pub(super) fn drop_oldest_for_budget(&mut self) -> Option<(usize, usize)> {
        let before = self.stored;
        let mut dropped = 0u64;
        if self.blocks.front().is_some_and(|b| b.dropped > 0) {
            if self.blocks.len() < 2 {
                return None;
            }
            dropped = self.blocks.front().map_or(0, |b| b.dropped);
            self.drop_front();
        }
        let (lines, _) = self.drop_front()?;
        dropped += lines as u64;
        let text = marker_text(dropped, false);
        self.push_front_line(Line::plain(&text).view(), dropped);
        Some((lines, before.saturating_sub(self.stored)))
    }

    /// Takes the newest block's held lines out, oldest first, with the
    /// bytes it held.
    pub(super) fn pop_back_block(&mut self) -> Option<(Vec<Line>, usize)> {
        let block = self.blocks.pop_back()?;
        self.lines -= block.held();
        self.stored -= block.stored();
        self.raw -= block.raw_len as usize;
        self.next_first = block.first;
        if let Ok(mut cache) = self.cache.lock() {
            *cache = None;
        }
        let stored = block.stored();
        let mut lines = Vec::with_capacity(block.held());
        let one = Cold {
            lines: block.held(),
            blocks: VecDeque::from([block]),
            ..Cold::default()
        };
        one.for_each(|l| lines.push(l.to_line()));
        Some((lines, stored))
    }

    /// All held lines, oldest first, leaving the store empty.
    pub(super) fn take_all(&mut self) -> Vec<Line> {
        let mut lines = Vec::with_capacity(self.lines);
        self.for_each(|l| lines.push(l.to_line()));
        *self = Cold::default();
        lines
    }

    /// The blocks encoded; one whose record cannot be read goes with no
    /// bytes, which its reader refuses (a marker line).
    pub(super) fn to_repr(&self) -> Vec<BlockRepr> {
        let mut scratch = Vec::new();
        self.blocks
            .iter()
            .map(|b| BlockRepr {
                n: b.lines,
                skip: b.skip,
                raw: b.raw_len,
                dropped: b.dropped,
                sum: b.sum,
                z: base64_encode(b.z(&mut scratch).unwrap_or_default()),
            })
            .collect()
    }

    /// The blocks as the history log stores them, oldest first.
    pub(super) fn stored_blocks(&self) -> impl Iterator<Item = StoredBlock<'_>> {
        self.blocks.iter().map(|b| StoredBlock {
            id: b.id,
            skip: b.skip,
            lines: b.lines,
            sum: b.sum,
            header: b.header(),
            block: b,
        })
    }

    /// Lets the blocks' bytes go from the heap where `place(k, id)` (block
    /// `k`, oldest first, of id `id`) names the record of `source` that
    /// holds them; a block it does not name (its record freed, or in
    /// another log) comes back into the heap. A block whose record does
    /// not read back as its bytes keeps them. Returns the heap bytes let
    /// go.
    pub(super) fn keep_in_records(
        &mut self,
        source: &Arc<dyn RecordSource>,
        place: impl Fn(usize, u64) -> Option<u64>,
    ) -> usize {
        let mut freed = 0;
        let mut scratch = Vec::new();
        for (k, block) in self.blocks.iter_mut().enumerate() {
            let Some(offset) = place(k, block.id) else {
                block.bring_into_heap();
                continue;
            };
            match &block.bytes {
                Bytes::Record {
                    source: s,
                    offset: o,
                } if Arc::ptr_eq(s, source) && *o == offset => continue,
                Bytes::Record { .. } => {}
                Bytes::Heap(z) => {
                    // Checked once, as it leaves the heap: the record
                    // must be the block, byte for byte.
                    scratch.clear();
                    scratch.resize(RECORD_HEADER + z.len(), 0);
                    let same = source.read_record(offset, &mut scratch).is_ok()
                        && scratch[..RECORD_HEADER] == block.header()
                        && scratch[RECORD_HEADER..] == **z;
                    if !same {
                        continue;
                    }
                    freed += z.len();
                }
            }
            block.bytes = Bytes::Record {
                source: Arc::clone(source),
                offset,
            };
        }
        freed
    }

    /// Every block's bytes back in the heap (the log that held them goes).
    pub(super) fn keep_in_heap(&mut self) {
        self.blocks.iter_mut().for_each(Block::bring_into_heap);
    }

    /// The store encoded blocks decode to: each checked line by line; a
    /// block that fails is replaced by a marker line.
    pub(super) fn from_repr(blocks: Vec<BlockRepr>) -> Cold {
        Cold::from_checked(blocks.into_iter().map(|b| {
            let lost = b.n.saturating_sub(b.skip);
            let block = base64_decode(&b.z).map(|z| Block {
                id: fresh_id(),
                z_len: z.len() as u32,
                bytes: Bytes::Heap(z.into_boxed_slice()),
                raw_len: b.raw,
                lines: b.n,
                skip: b.skip,
                first: 0,
                dropped: b.dropped,
                sum: b.sum,
            });
            (block, lost)
        }))
    }

    /// The store the history log's block records decode to (`stored_blocks`
    /// wrote them), checked as `from_repr` checks encoded blocks: a record
    /// that fails (its header, its bytes, its lines) is replaced by a
    /// marker line saying how many lines it was said to hold.
    pub(super) fn from_records(records: Vec<RecordIn>) -> Cold {
        Cold::from_checked(records.into_iter().map(|r| {
            let lost = r.lines.saturating_sub(r.skip);
            let block = r.bytes.and_then(|bytes| {
                let (head, z) = bytes.split_first_chunk::<RECORD_HEADER>()?;
                let u32_at = |at: usize| -> Option<u32> {
                    Some(u32::from_le_bytes(head.get(at..at + 4)?.try_into().ok()?))
                };
                let u64_at = |at: usize| -> Option<u64> {
                    Some(u64::from_le_bytes(head.get(at..at + 8)?.try_into().ok()?))
                };
                let lines = u32_at(4)?;
                if head[..4] != RECORD_MAGIC || u32_at(12)? as usize != z.len() || lines != r.lines
                {
                    return None;
                }
                Some(Block {
                    id: fresh_id(),
                    z_len: z.len() as u32,
                    bytes: Bytes::Heap(z.into()),
                    raw_len: u32_at(8)?,
                    lines,
                    skip: r.skip,
                    first: 0,
                    dropped: u64_at(16)?,
                    sum: u64_at(24)?,
                })
            });
            (block, lost)
        }))
    }

    /// The store holding `blocks` (oldest first), each checked: its raw
    /// size, its LZ4 stream, its checksum, its framing and every line. One
    /// that fails, or is `None` (its bytes unreadable), becomes a marker
    /// line saying its `lost` lines are gone.
    fn from_checked(blocks: impl Iterator<Item = (Option<Block>, u32)>) -> Cold {
        let mut cold = Cold::default();
        let (mut raw, mut record) = (Vec::new(), Vec::new());
        for (block, lost) in blocks {
            if lost == 0 {
                continue;
            }
            let checked = block
                .filter(|b| (b.raw_len as usize) <= MAX_BLOCK_RAW && b.skip < b.lines)
                .and_then(|mut block| {
                    block.first = cold.next_first;
                    let spans = decode(&block, &mut raw, &mut record)?;
                    spans
                        .iter()
                        .all(|&(s, l)| {
                            Line::from_stored(&raw[s as usize..][..l as usize]).is_some()
                        })
                        .then_some(block)
                });
            match checked {
                Some(block) => {
                    cold.next_first += u64::from(block.lines);
                    cold.lines += block.held();
                    cold.stored += block.stored();
                    cold.raw += block.raw_len as usize;
                    cold.blocks.push_back(block);
                }
                None => {
                    let line = Line::plain(&marker_text(u64::from(lost), true));
                    let mut raw = Vec::new();
                    frame(std::iter::once(line.view()), &mut raw);
                    cold.push_block(&raw, 1, 0);
                }
            }
        }
        cold
    }
}

/// A block as snapshots and handoff manifests carry it: the compressed
/// bytes as they are (base64), so an upgrade neither decompresses nor
/// re-encodes the cold history.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct BlockRepr {
    n: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    skip: u32,
    raw: u32,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    dropped: u64,
    sum: u64,
    z: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub(super) fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        let take = c.len() + 1;
        for k in 0..4 {
            if k < take {
                out.push(B64[(n >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if bytes.len() % 4 != 0 {
        return None;
    }
    let value = |b: u8| -> Option<u32> {
        Some(match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let quads = bytes.len() / 4;
    for (q, c) in bytes.chunks(4).enumerate() {
        let pad = c.iter().rev().take_while(|&&b| b == b'=').count();
        if pad > 2 || (pad > 0 && q + 1 != quads) {
            return None;
        }
        let mut n = 0u32;
        for &b in &c[..4 - pad] {
            n = n << 6 | value(b)?;
        }
        n <<= 6 * pad as u32;
        let got = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&got[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records in memory, as the history log's memfd holds them.
    #[derive(Debug, Default)]
    struct Records(Mutex<Vec<u8>>);

    impl RecordSource for Records {
        fn read_record(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
            let bytes = self.0.lock().unwrap();
            let at = offset as usize;
            let got = bytes.get(at..at + buf.len()).ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "past the end")
            })?;
            buf.copy_from_slice(got);
            Ok(())
        }
    }

    fn lines_of(cold: &Cold) -> Vec<String> {
        (0..cold.len())
            .map(|i| cold.with_line(i, |l| l.text().to_string()).unwrap())
            .collect()
    }

    /// Blocks whose bytes are only in their records read as before; a
    /// clone holds its own bytes; a record damaged later (junk, or a range
    /// given back: zeroes) reads as one marker line per line it held, no
    /// panic; a block the log no longer names comes back into the heap.
    #[test]
    fn blocks_read_from_their_records() {
        let mut cold = Cold::default();
        let lines: Vec<Line> = (0..300)
            .map(|i| Line::plain(&format!("line {i} {}", "x".repeat(i % 40))))
            .collect();
        for chunk in lines.chunks(100) {
            cold.freeze(chunk.iter().map(Line::view));
        }
        let want = lines_of(&cold);
        let records = Arc::new(Records::default());
        let mut places = Vec::new();
        for b in cold.stored_blocks() {
            let mut bytes = records.0.lock().unwrap();
            places.push(bytes.len() as u64);
            bytes.extend_from_slice(&b.header);
            bytes.extend_from_slice(&b.z().unwrap());
        }
        let source: Arc<dyn RecordSource> = records.clone();
        // A place that is not the block's record is refused.
        assert_eq!(cold.keep_in_records(&source, |k, _| Some(places[k] + 1)), 0);
        let heap = cold.memory_bytes();
        let freed = cold.keep_in_records(&source, |k, _| places.get(k).copied());
        assert!(freed > 0 && cold.memory_bytes() + freed <= heap, "{freed}");
        assert!(cold.stored_blocks().all(|b| b.heap_bytes() == 0));
        assert_eq!(lines_of(&cold), want);
        let clone = cold.clone();
        records.0.lock().unwrap()[places[1] as usize + RECORD_HEADER + 3] ^= 0x5a;
        let mut raw = std::mem::take(&mut *records.0.lock().unwrap());
        raw[places[2] as usize..].fill(0);
        *records.0.lock().unwrap() = raw;
        assert_eq!(lines_of(&clone), want, "a clone reads its own bytes");
        let got = lines_of(&cold);
        assert_eq!(got[..100], want[..100]);
        for line in &got[100..] {
            assert!(line.contains("100 history lines lost here"), "{line}");
        }
        // Taken back hot, or back into the heap: the damage shows, the
        // rest is intact.
        let (back, _) = cold.pop_back_block().unwrap();
        assert!(back.iter().all(|l| l.view().text().contains("lost here")));
        cold.keep_in_records(&source, |_, _| None);
        assert!(cold.stored_blocks().next().unwrap().heap_bytes() > 0);
        records.0.lock().unwrap().clear();
        let got = lines_of(&cold);
        assert_eq!(got[..100], want[..100]);
        assert!(got[100..].iter().all(|l| l.contains("lost here")));
    }

    #[test]
    fn base64_round_trips_and_refuses_what_is_not_base64() {
        for len in 0..20 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let text = base64_encode(&bytes);
            assert_eq!(base64_decode(&text), Some(bytes), "{text}");
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        for bad in ["Zm8", "Zm=8", "Z===", "Zm8=Zm8=", "Zm\u{e9}8"] {
            assert_eq!(base64_decode(bad), None, "{bad}");
        }
    }
}
