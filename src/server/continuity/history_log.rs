//! The history log: every pane's scrollback, appended to one memfd that
//! the keeper holds with the crash checkpoint (and that a live upgrade
//! hands to the new server), so a checkpoint carries each terminal without
//! its history (`"lines": []`) plus where its lines are in the log
//! (`HistoryRef`). A history's compressed blocks (`term/cold.rs`) are
//! written as they are, one record each (`Terminal::history_blocks`: a
//! header, then the LZ4 bytes), when first seen; its newest lines, not yet
//! in a block, each as its packed bytes (`LineRef::stored`, what the
//! history itself holds) after a 4-byte length. So the log holds the
//! history compressed, as the serving process does, and a new server puts
//! the blocks back without compressing them again.
//!
//! Why: a line that scrolled off never changes (until an edit renumbers
//! the history: a reflow, a clear, which `Terminal::history_numbering`'s
//! epoch says), so it is written once, when the first checkpoint after it
//! comes, and never again; and written as the history packs it, so
//! writing it is a copy (JSON cost 10-15 ms per checkpoint for 10,000
//! coloured lines, the bulk of a flooding pane's checkpoint, and took a
//! quarter more room). A reader checks each line (`Line::from_stored`). An idle pane costs a checkpoint its visible
//! screen and state; a flooding one what scrolled in since the last one.
//! Before, each checkpoint held every pane's whole encoding, and the
//! serving process kept a copy of each in its heap as a cache (about as
//! much memory as the scrollback again), and re-encoded a busy pane's
//! whole history at every checkpoint.
//!
//! A block is immutable and known by its id: a record is written once,
//! named by every checkpoint while the history holds its block, and freed
//! when the block goes (evicted by a bound, dropped by the global budget,
//! taken back hot, cleared). Its lines also went into chunks while they
//! were hot; those chunks are freed once all of their lines are in blocks.
//!
//! Each pane's hot lines are a list of chunks (byte ranges of the log),
//! oldest first, of at most `CHUNK_LINES` lines: lines evicted from the
//! history (or frozen into a block) free their chunk once all of its lines
//! are gone, and a freed range's memory (a chunk's or a record's) is given
//! back (`punch_hole`) once no checkpoint the keeper may still use refers
//! to it (`Server::keeper_flush` calls `release` after the next checkpoint
//! is sent). Small appends (a pane printing a line
//! per checkpoint) are merged, like a binary counter, so a pane has at
//! most about `log2(CHUNK_LINES)` chunks below the full size: a merge
//! copies bytes, it does not encode again.
//!
//! Invariant: for every pane, its blocks are records of the history's
//! blocks as they were at its last sync, in order, and its chunks hold the
//! lines numbered `first..next` in order, `next` at most the history's
//! `pushed`.

use crate::handoff::manifest::HistoryRef;
use crate::model::PaneId;
use crate::term::{RecordSource, StoredBlock, Terminal};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

mod read;
pub use read::{LogCounts, read_history};

/// Lines per chunk, at most: a pane's lines are freed a chunk at a time,
/// so this bounds what a pane leaves unreclaimed at the front (about
/// 75 KiB of typical lines), while a 10,000-line history is 20 chunks.
const CHUNK_LINES: u32 = 512;
/// The pages a punched range gives back are whole pages.
const PAGE: u64 = 4096;

#[derive(Clone, Copy, Debug)]
struct Chunk {
    offset: u64,
    len: u64,
    lines: u32,
}

/// A block record in the log: where, and which block of the history.
#[derive(Clone, Copy, Debug)]
struct LoggedBlock {
    id: u64,
    offset: u64,
    len: u64,
    lines: u32,
}

/// Largest block record read back: a block's raw size is at most 4 MiB,
/// and LZ4 grows incompressible input by less than 1 %.
const MAX_RECORD: u64 = 5 << 20;

#[derive(Debug, Default)]
struct PaneLog {
    /// The history's blocks' records, oldest first.
    blocks: Vec<LoggedBlock>,
    /// `Terminal::history_numbering`'s epoch the chunks are numbered in.
    epoch: u64,
    /// Number of the first line of `chunks[0]` (or `next` if none).
    first: u64,
    /// Number of the line after the last one written.
    next: u64,
    chunks: VecDeque<Chunk>,
    /// Which `sync` (or `adopt_pane`) of the log last changed what this
    /// pane's reference names (`HistoryLog::stamp`).
    stamp: u64,
}

/// The log's memfd, shared with the histories whose blocks it holds: they
/// read their records from it (`RecordSource`), so their bytes are not in
/// the heap too.
#[derive(Debug)]
struct LogFile(File);

impl RecordSource for LogFile {
    fn read_record(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
}

pub struct HistoryLog {
    file: Arc<LogFile>,
    /// Where the next append goes: past everything written (by us, or by
    /// another server that used the file since: see `append`).
    end: u64,
    panes: HashMap<PaneId, PaneLog>,
    /// Ranges no pane refers to any more since the last `take_freed`.
    freed: Vec<(u64, u64)>,
    /// Ranges free and released, merged (start → end): a range's pages
    /// are whole only once its neighbours are free too.
    free: BTreeMap<u64, u64>,
    buf: Vec<u8>,
    /// Syncs so far, numbering each pane's `stamp`.
    syncs: u64,
}

impl HistoryLog {
    pub fn create() -> Result<HistoryLog, String> {
        let fd = crate::sys::anonymous_file(c"ptyd-history-log", b"")
            .map_err(|e| format!("creating the history log: {e}"))?;
        Ok(HistoryLog::adopt(File::from(fd)))
    }

    /// The log another server wrote (a live upgrade's, or the checkpoint's
    /// after a crash), knowing no pane yet (`adopt_pane`).
    pub fn adopt(file: File) -> HistoryLog {
        let end = file.metadata().map_or(0, |m| m.len());
        HistoryLog {
            file: Arc::new(LogFile(file)),
            end,
            panes: HashMap::new(),
            freed: Vec::new(),
            free: BTreeMap::new(),
            buf: Vec::new(),
            syncs: 0,
        }
    }

    pub fn file(&self) -> &File {
        &self.file.0
    }

    /// What a history reads the records it no longer holds from (see
    /// `Terminal::keep_history_in_records`).
    pub fn source(&self) -> Arc<dyn RecordSource> {
        Arc::clone(&self.file) as Arc<dyn RecordSource>
    }

    /// Where pane `id`'s block `k` (oldest first, as its last sync saw
    /// the history's blocks), of block id `block`, has its record; `None`
    /// if the log holds no record of it for that pane.
    pub fn record_of(&self, id: PaneId, k: usize, block: u64) -> Option<u64> {
        let blocks = &self.panes.get(&id)?.blocks;
        match blocks.get(k) {
            Some(b) if b.id == block => Some(b.offset),
            // A sync that failed part way names fewer blocks.
            _ => blocks.iter().find(|b| b.id == block).map(|b| b.offset),
        }
    }

    /// Brings pane `id`'s lines in the log up to `term`'s history and says
    /// where they are; `None` if its lines cannot be numbered (then they
    /// travel inside the terminal's encoding).
    pub fn sync(&mut self, id: PaneId, term: &Terminal) -> Result<Option<HistoryRef>, String> {
        let Some((epoch, _, pushed)) = term.history_numbering() else {
            self.forget(id);
            return Ok(None);
        };
        let (blocks, hot) = term.history_blocks();
        let hot_first = pushed - hot as u64;
        let mut pane = self.panes.remove(&id).unwrap_or_default();
        let blocks = self.sync_blocks(&mut pane, blocks);
        if pane.epoch != epoch
            || pane.next < hot_first
            || pane.next > pushed
            || pane.first > hot_first
        {
            // Renumbered, or fell behind by more than the hot lines hold:
            // start over from the hot lines there are now.
            self.freed
                .extend(pane.chunks.iter().map(|c| (c.offset, c.len)));
            pane.epoch = epoch;
            pane.first = hot_first;
            pane.next = hot_first;
            pane.chunks.clear();
        }
        while let Some(c) = pane.chunks.front().copied() {
            if pane.first + u64::from(c.lines) > hot_first {
                break;
            }
            pane.chunks.pop_front();
            pane.first += u64::from(c.lines);
            self.freed.push((c.offset, c.len));
        }
        let result = blocks.and_then(|skip| self.append(&mut pane, term, pushed).map(|()| skip));
        self.syncs += 1;
        pane.stamp = self.syncs;
        let reference = result.map(|block_skip| HistoryRef {
            blocks: pane
                .blocks
                .iter()
                .map(|b| (b.offset, b.len, b.lines))
                .collect(),
            block_skip,
            chunks: pane.chunks.iter().map(|c| (c.offset, c.len)).collect(),
            skip: hot_first - pane.first,
            lines: hot as u64,
        });
        self.panes.insert(id, pane);
        reference.map(Some)
    }

    /// Makes `pane.blocks` the records of `blocks` (the history's, oldest
    /// first): a block seen before keeps its record, a new one is written,
    /// one gone frees its record. Returns the oldest block's lines evicted.
    fn sync_blocks<'a>(
        &mut self,
        pane: &mut PaneLog,
        blocks: impl Iterator<Item = StoredBlock<'a>>,
    ) -> Result<u32, String> {
        let mut known: HashMap<u64, LoggedBlock> =
            pane.blocks.drain(..).map(|b| (b.id, b)).collect();
        let mut skip = None;
        let mut result = Ok(());
        for block in blocks {
            skip.get_or_insert(block.skip);
            if let Some(logged) = known.remove(&block.id) {
                pane.blocks.push(logged);
                continue;
            }
            if result.is_err() {
                continue;
            }
            // Never over bytes another server wrote (see `append`).
            self.end = self.end.max(self.file().metadata().map_or(0, |m| m.len()));
            self.buf.clear();
            self.buf.extend_from_slice(&block.header);
            result = block
                .z()
                .map(|z| self.buf.extend_from_slice(&z))
                .map_err(|e| format!("reading a history block to write it to the history log: {e}"))
                .and_then(|()| {
                    self.file
                        .0
                        .write_all_at(&self.buf, self.end)
                        .map_err(|e| format!("writing a history block to the history log: {e}"))
                });
            if result.is_ok() {
                pane.blocks.push(LoggedBlock {
                    id: block.id,
                    offset: self.end,
                    len: self.buf.len() as u64,
                    lines: block.lines,
                });
                self.end += self.buf.len() as u64;
            }
        }
        self.freed.extend(known.values().map(|b| (b.offset, b.len)));
        result.map(|()| skip.unwrap_or(0))
    }

    /// Writes lines `pane.next..pushed` (hot ones) at the end of the log, as chunks
    /// of at most `CHUNK_LINES`, then merges small chunks.
    fn append(&mut self, pane: &mut PaneLog, term: &Terminal, pushed: u64) -> Result<(), String> {
        if pane.next >= pushed {
            return Ok(());
        }
        // Another server may have written after what we know (a new one in
        // probation, before it was taken back): never over its bytes.
        self.end = self.end.max(self.file().metadata().map_or(0, |m| m.len()));
        self.buf.clear();
        let mut chunks = Vec::new();
        let (mut start, mut lines) = (0usize, 0u32);
        for n in pane.next..pushed {
            let line = term
                .history_line_bytes(n)
                .ok_or_else(|| format!("history line {n} is not held"))?;
            let len = u32::try_from(line.len())
                .map_err(|_| format!("history line {n} is {} bytes", line.len()))?;
            self.buf.extend_from_slice(&len.to_le_bytes());
            self.buf.extend_from_slice(&line);
            lines += 1;
            if lines == CHUNK_LINES {
                chunks.push((start, self.buf.len(), lines));
                (start, lines) = (self.buf.len(), 0);
            }
        }
        if lines > 0 {
            chunks.push((start, self.buf.len(), lines));
        }
        self.file()
            .write_all_at(&self.buf, self.end)
            .map_err(|e| format!("writing the history log: {e}"))?;
        for (from, to, lines) in chunks {
            pane.chunks.push_back(Chunk {
                offset: self.end + from as u64,
                len: (to - from) as u64,
                lines,
            });
        }
        self.end += self.buf.len() as u64;
        pane.next = pushed;
        if self.buf.capacity() > 4 << 20 {
            self.buf = Vec::new();
        }
        self.merge_tail(pane)
    }

    /// Merges the newest two chunks while the older is no bigger than the
    /// newer and both fit one: a pane that adds a line per checkpoint then
    /// has a handful of small chunks, not one per checkpoint.
    fn merge_tail(&mut self, pane: &mut PaneLog) -> Result<(), String> {
        while pane.chunks.len() >= 2 {
            let b = pane.chunks[pane.chunks.len() - 1];
            let a = pane.chunks[pane.chunks.len() - 2];
            if a.lines > b.lines || a.lines + b.lines > CHUNK_LINES {
                break;
            }
            let merged = if a.offset + a.len == b.offset {
                Chunk {
                    offset: a.offset,
                    len: a.len + b.len,
                    lines: a.lines + b.lines,
                }
            } else {
                let mut bytes = vec![0; (a.len + b.len) as usize];
                let (first, second) = bytes.split_at_mut(a.len as usize);
                let file = self.file();
                file.read_exact_at(first, a.offset)
                    .and_then(|()| file.read_exact_at(second, b.offset))
                    .and_then(|()| file.write_all_at(&bytes, self.end))
                    .map_err(|e| format!("merging history log chunks: {e}"))?;
                self.freed.push((a.offset, a.len));
                self.freed.push((b.offset, b.len));
                let chunk = Chunk {
                    offset: self.end,
                    len: a.len + b.len,
                    lines: a.lines + b.lines,
                };
                self.end += chunk.len;
                chunk
            };
            pane.chunks.pop_back();
            pane.chunks.pop_back();
            pane.chunks.push_back(merged);
        }
        Ok(())
    }

    /// Pane `id` is gone (or its lines travel inline): its chunks are free.
    pub fn forget(&mut self, id: PaneId) {
        if let Some(pane) = self.panes.remove(&id) {
            self.freed
                .extend(pane.chunks.iter().map(|c| (c.offset, c.len)));
            self.freed
                .extend(pane.blocks.iter().map(|b| (b.offset, b.len)));
        }
    }

    /// Forgets every pane `live` says is gone.
    pub fn retain(&mut self, live: impl Fn(PaneId) -> bool) {
        let gone: Vec<PaneId> = self.panes.keys().copied().filter(|id| !live(*id)).collect();
        for id in gone {
            self.forget(id);
        }
    }

    /// Takes pane `id`'s lines as another server wrote them (`reference`,
    /// read by `read_history`, which counted each chunk's lines, and
    /// put back into `term` already): later checkpoints append after them
    /// rather than write them again. Blocks are taken only if `term` holds
    /// each as its record says (none was damaged); else they are written
    /// again, and the sweep gives the old records back.
    pub fn adopt_pane(
        &mut self,
        id: PaneId,
        term: &Terminal,
        reference: &HistoryRef,
        counts: &LogCounts,
    ) {
        let Some((epoch, _, pushed)) = term.history_numbering() else {
            return;
        };
        let (blocks, hot) = term.history_blocks();
        let hot_first = pushed - hot as u64;
        let lines: u64 = counts.chunks.iter().map(|&n| u64::from(n)).sum();
        if hot as u64 != reference.lines
            || counts.chunks.len() != reference.chunks.len()
            || lines != reference.skip + reference.lines
            || hot_first < reference.skip
        {
            return;
        }
        let blocks: Vec<StoredBlock> = blocks.collect();
        let same = blocks.len() == reference.blocks.len()
            && blocks
                .iter()
                .zip(&reference.blocks)
                .zip(&counts.sums)
                .all(|((b, r), sum)| b.lines == r.2 && Some(b.sum) == *sum);
        let blocks = if same {
            blocks
                .iter()
                .zip(&reference.blocks)
                .map(|(b, &(offset, len, lines))| LoggedBlock {
                    id: b.id,
                    offset,
                    len,
                    lines,
                })
                .collect()
        } else {
            Vec::new()
        };
        let chunks = reference
            .chunks
            .iter()
            .zip(&counts.chunks)
            .map(|(&(offset, len), &lines)| Chunk { offset, len, lines })
            .collect();
        self.syncs += 1;
        self.panes.insert(
            id,
            PaneLog {
                blocks,
                epoch,
                first: hot_first - reference.skip,
                next: pushed,
                chunks,
                stamp: self.syncs,
            },
        );
    }

    /// Whether ranges were freed since the last `take_freed`.
    pub fn has_freed(&self) -> bool {
        !self.freed.is_empty()
    }

    /// The ranges freed since the last call: the caller releases them once
    /// the keeper holds a checkpoint that no longer refers to them.
    pub fn take_freed(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.freed)
    }

    /// Gives back the memory of ranges nothing refers to any more: the
    /// whole pages of each, merged with the free ranges around it.
    pub fn release(&mut self, ranges: Vec<(u64, u64)>) {
        for (offset, len) in ranges {
            if len == 0 {
                continue;
            }
            let (mut start, mut end) = (offset, offset + len);
            if let Some((&s, &e)) = self.free.range(..=start).next_back()
                && e >= start
            {
                start = s;
                end = end.max(e);
                self.free.remove(&s);
            }
            while let Some((&s, &e)) = self.free.range(start..=end).next() {
                end = end.max(e);
                self.free.remove(&s);
            }
            self.free.insert(start, end);
            let (from, to) = (start.div_ceil(PAGE) * PAGE, end / PAGE * PAGE);
            if to > from {
                let _ = crate::sys::punch_hole(self.file(), from, to - from);
            }
        }
    }

    /// Gives back everything no pane of ours refers to: what another
    /// server wrote and freed, or wrote after its last checkpoint, before
    /// this one took the log over (a live upgrade's old server, a crashed
    /// one), which this one never knew as chunks. Only once the keeper
    /// holds a checkpoint of ours that refers to exactly our chunks.
    pub fn sweep(&mut self) {
        let mut named: Vec<(u64, u64)> = self
            .panes
            .values()
            .flat_map(|p| {
                let chunks = p.chunks.iter().map(|c| (c.offset, c.offset + c.len));
                chunks.chain(p.blocks.iter().map(|b| (b.offset, b.offset + b.len)))
            })
            .collect();
        named.sort_unstable();
        self.end = self.end.max(self.file().metadata().map_or(0, |m| m.len()));
        let mut gaps = Vec::new();
        let mut at = 0;
        for (start, end) in named {
            if start > at {
                gaps.push((at, start - at));
            }
            at = at.max(end);
        }
        if self.end > at {
            gaps.push((at, self.end - at));
        }
        self.free.clear();
        self.release(gaps);
    }

    /// Bytes of the log in memory (its pages not punched), for
    /// `server.status`.
    pub fn allocated_bytes(&self) -> u64 {
        use std::os::unix::fs::MetadataExt;
        self.file().metadata().map_or(0, |m| m.blocks() * 512)
    }

    /// Which sync last changed what pane `id`'s reference names (`None`
    /// for a pane the log does not know): a reference taken at that sync
    /// is good while the stamp is the same, since only a sync (or
    /// forgetting the pane) frees a range a reference names.
    pub fn stamp(&self, id: PaneId) -> Option<u64> {
        self.panes.get(&id).map(|p| p.stamp)
    }

    /// Panes with lines in the log.
    pub fn panes(&self) -> usize {
        self.panes.len()
    }
}

#[cfg(test)]
mod tests;
