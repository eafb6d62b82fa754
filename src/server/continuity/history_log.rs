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
use crate::term::{RECORD_HEADER, RecordIn, RecordSource, StoredBlock, Terminal};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

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

/// What a `HistoryRef` names, read from the log: the blocks' records (for
/// `Terminal::restore_history`, which checks them) and the hot
/// lines, checked, oldest first.
pub struct ReadBack {
    pub blocks: Vec<RecordIn>,
    pub lines: Vec<crate::term::Line>,
    pub counts: LogCounts,
}

/// What `adopt_pane` needs to know of what was read: each chunk's line
/// count and each block record's checksum (`None`: its header unreadable).
#[derive(Clone, Debug, Default)]
pub struct LogCounts {
    chunks: Vec<u32>,
    sums: Vec<Option<u64>>,
}

/// Reads what `reference` names from the log. A block record that cannot
/// be read is passed on as damaged (its lines become a marker line); a
/// damaged line, or a count that does not add up, is an error.
pub fn read_history(file: &File, reference: &HistoryRef) -> Result<ReadBack, String> {
    let mut blocks = Vec::with_capacity(reference.blocks.len());
    let mut sums = Vec::with_capacity(reference.blocks.len());
    for (k, &(offset, len, lines)) in reference.blocks.iter().enumerate() {
        let bytes = (len >= RECORD_HEADER as u64 && len <= MAX_RECORD)
            .then(|| {
                let mut bytes = vec![0; len as usize];
                file.read_exact_at(&mut bytes, offset).ok().map(|()| bytes)
            })
            .flatten();
        sums.push(bytes.as_deref().and_then(crate::term::record_checksum));
        let skip = if k == 0 { reference.block_skip } else { 0 };
        blocks.push(RecordIn { bytes, lines, skip });
    }
    let (lines, chunks) = read_lines(file, reference)?;
    Ok(ReadBack {
        blocks,
        lines,
        counts: LogCounts { chunks, sums },
    })
}

/// The hot lines a `HistoryRef` names, read from the log and checked,
/// oldest first, and how many lines each chunk holds (for `adopt_pane`).
fn read_lines(
    file: &File,
    reference: &HistoryRef,
) -> Result<(Vec<crate::term::Line>, Vec<u32>), String> {
    let mut out = Vec::with_capacity(reference.lines.min(1 << 20) as usize);
    let mut counts = Vec::with_capacity(reference.chunks.len());
    let mut skip = reference.skip;
    let mut bytes = Vec::new();
    for &(offset, len) in &reference.chunks {
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= 1 << 30)
            .ok_or_else(|| format!("a history log chunk of {len} bytes"))?;
        bytes.resize(len, 0);
        file.read_exact_at(&mut bytes, offset)
            .map_err(|e| format!("reading the history log at {offset}: {e}"))?;
        let mut count = 0u32;
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let damaged = || format!("a damaged history log line in the chunk at {offset}");
            let (head, tail) = rest.split_first_chunk::<4>().ok_or_else(damaged)?;
            let n = u32::from_le_bytes(*head) as usize;
            let line = tail.get(..n).ok_or_else(damaged)?;
            rest = &tail[n..];
            count += 1;
            if skip > 0 {
                skip -= 1;
                continue;
            }
            out.push(crate::term::Line::from_stored(line).ok_or_else(damaged)?);
        }
        counts.push(count);
    }
    if out.len() as u64 != reference.lines {
        return Err(format!(
            "the history log holds {} lines where {} were written",
            out.len(),
            reference.lines
        ));
    }
    Ok((out, counts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::TermConfig;

    fn feed(t: &mut Terminal, bytes: &[u8]) {
        t.feed(bytes, &mut Vec::new());
    }

    /// What a checkpoint's reader gets: the terminal without its lines,
    /// with the log's lines put back.
    fn read_back(log: &HistoryLog, t: &Terminal, r: &HistoryRef) -> String {
        let without = t.to_json_without_history().unwrap();
        let mut back: Terminal = serde_json::from_str(without.get()).unwrap();
        let read = read_history(log.file(), r).unwrap();
        assert_eq!(read.counts.chunks.len(), r.chunks.len());
        back.restore_history(read.blocks, read.lines);
        serde_json::to_string(&back).unwrap()
    }

    /// The terminal as a decode of its plain encoding gives it (a decode
    /// starts the grids' row rings at 0).
    fn plain(t: &Terminal) -> String {
        let decoded: Terminal = serde_json::from_str(&serde_json::to_string(t).unwrap()).unwrap();
        serde_json::to_string(&decoded).unwrap()
    }

    /// Whatever the terminal goes through between syncs (output that
    /// scrolls and evicts, ED 3, resizes that reflow or take lines back,
    /// RIS, the alternate screen, injected history, a decode), the lines
    /// the log names are its history; each line is written once while its
    /// numbering holds; small appends are merged, so a pane keeps a few
    /// chunks; and giving back freed ranges never touches a named one.
    #[test]
    fn the_log_always_names_the_history() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut below = |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let config = TermConfig {
            scrollback_lines: 1200,
            ..TermConfig::default()
        };
        let mut t = Terminal::new(30, 6, config.clone());
        // Blocks of a few dozen lines: most of the history is in blocks.
        t.set_history_block_bytes(1500);
        // The same history with its blocks in the heap: what `t`, whose
        // blocks are read from the log, must read as.
        let mut twin = Terminal::new(30, 6, config);
        twin.set_history_block_bytes(1500);
        let mut log = HistoryLog::create().unwrap();
        let mut n = 0;
        let mut logged = std::collections::HashSet::new();
        let mut blocks_seen = 0;
        for step in 0..300 {
            let before = t.history_numbering();
            match below(100) {
                0..80 => {
                    let mut out = String::new();
                    let most = if below(10) == 0 { 600 } else { 3 };
                    for _ in 0..=below(most) {
                        n += 1;
                        match below(4) {
                            0 => out.push_str(&format!("\x1b[3{}m{n}\x1b[0m é", below(8))),
                            1 => out.push_str(&format!("\x1b]8;;http://x/{n}\x07{n}\x1b]8;;\x07")),
                            _ => out.push_str(&n.to_string()),
                        }
                        out.push_str(&"y".repeat(below(50) as usize));
                        out.push_str("\r\n");
                    }
                    feed(&mut t, out.as_bytes());
                    feed(&mut twin, out.as_bytes());
                }
                80..83 => both(&mut t, &mut twin, |t| feed(t, b"\x1b[3J")),
                83..88 => {
                    let (cols, rows) = (20 + below(30) as u16, 3 + below(8) as u16);
                    both(&mut t, &mut twin, |t| t.resize(cols, rows));
                }
                88..90 => both(&mut t, &mut twin, |t| feed(t, b"\x1bc")),
                90..93 => both(&mut t, &mut twin, |t| {
                    feed(t, b"\x1b[?1049hon alt\r\n\r\n\r\n\x1b[?1049l")
                }),
                93..96 => both(&mut t, &mut twin, |t| {
                    t.inject_history(&[format!("injected {step}"), "more".into()])
                }),
                96..98 => {
                    t = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
                    t.set_history_block_bytes(1500);
                }
                _ => {}
            }
            let end_before = log.end;
            let r = log.sync(PaneId::new(1), &t).unwrap().unwrap();
            let source = log.source();
            t.keep_history_in_records(&source, |k, b| log.record_of(PaneId::new(1), k, b));
            let (mut blocks, _) = t.history_blocks();
            assert!(
                blocks.all(|b| b.heap_bytes() == 0),
                "step {step}: block bytes left in the heap"
            );
            assert_eq!(plain(&t), plain(&twin), "step {step}");
            assert_eq!(read_back(&log, &t, &r), plain(&t), "step {step}");
            // Only new lines were encoded (merges copy, they add the
            // copied bytes, not more than the pane's small chunks).
            let (epoch, oldest, pushed) = t.history_numbering().unwrap();
            if before.is_some_and(|(e, _, p)| e == epoch && p >= oldest) {
                let new = pushed - before.unwrap().2;
                let mut bytes = 0;
                for k in pushed - new..pushed {
                    bytes += t.history_line_bytes(k).unwrap().len() as u64 + 4;
                }
                let small: u64 = r.chunks.iter().map(|c| c.1).sum();
                // And the blocks frozen since, each once.
                let blocks: u64 = r
                    .blocks
                    .iter()
                    .filter(|b| !logged.contains(&b.0))
                    .map(|b| b.1)
                    .sum();
                assert!(
                    log.end - end_before <= bytes + small + blocks,
                    "step {step}"
                );
            }
            // A block's record stays where it was written while it lives.
            let (held, _) = t.history_blocks();
            assert_eq!(held.count(), r.blocks.len(), "step {step}");
            blocks_seen = blocks_seen.max(r.blocks.len());
            logged = r.blocks.iter().map(|b| b.0).collect();
            let full = u64::from(CHUNK_LINES);
            let lines = r.skip + r.lines;
            assert!(
                r.chunks.len() as u64 <= lines / full + 2 * 10,
                "step {step}: {} chunks for {lines} lines",
                r.chunks.len()
            );
            // Freed ranges go (as when the next checkpoint is sent): what
            // is named stays readable.
            let freed = log.take_freed();
            log.release(freed);
            assert_eq!(
                read_back(&log, &t, &r),
                plain(&t),
                "step {step}, after releasing"
            );
            assert_eq!(plain(&t), plain(&twin), "step {step}, after releasing");
        }
        assert!(blocks_seen > 5, "{blocks_seen} blocks at most");
        // Its memory is about the history's, not all that went through.
        let named: u64 = log
            .sync(PaneId::new(1), &t)
            .unwrap()
            .unwrap()
            .chunks
            .iter()
            .map(|c| c.1)
            .sum::<u64>()
            + block_bytes(&log);
        assert!(
            log.allocated_bytes() <= named + 64 * PAGE,
            "{} > {named}",
            log.allocated_bytes()
        );
    }

    fn both(a: &mut Terminal, b: &mut Terminal, f: impl Fn(&mut Terminal)) {
        f(a);
        f(b);
    }

    /// Bytes of the block records the log's panes name.
    fn block_bytes(log: &HistoryLog) -> u64 {
        log.panes
            .values()
            .flat_map(|p| p.blocks.iter().map(|b| b.len))
            .sum()
    }

    /// Lines a log would print, compressible as logs are.
    fn log_lines(t: &mut Terminal, from: usize, to: usize) {
        for i in from..to {
            let line = format!(
                "2026-12-02T13:{:02}:{:02} INFO worker {} handled request {i} in {} ms\r\n",
                i / 60 % 60,
                i % 60,
                i % 7,
                i % 13
            );
            feed(t, line.as_bytes());
        }
    }

    /// The log holds a history compressed, as the history does: its
    /// blocks once each, with a block or two of hot lines uncompressed.
    #[test]
    fn the_log_holds_the_history_compressed() {
        let config = TermConfig {
            scrollback_lines: 10_000,
            ..TermConfig::default()
        };
        let mut t = Terminal::new(80, 24, config);
        let mut log = HistoryLog::create().unwrap();
        for k in 0..40 {
            log_lines(&mut t, k * 500, (k + 1) * 500);
            log.sync(PaneId::new(1), &t).unwrap();
            let freed = log.take_freed();
            log.release(freed);
        }
        let r = log.sync(PaneId::new(1), &t).unwrap().unwrap();
        assert!(r.blocks.len() > 10, "{} blocks", r.blocks.len());
        let raw: u64 = (t.history_numbering().unwrap().1..t.history_numbering().unwrap().2)
            .map(|n| t.history_line_bytes(n).unwrap().len() as u64 + 4)
            .sum();
        assert!(
            log.allocated_bytes() * 2 < raw,
            "{} bytes in the log for {raw} of lines",
            log.allocated_bytes()
        );
        assert_eq!(read_back(&log, &t, &r), plain(&t));
    }

    /// A block record damaged in the log (junk over its bytes, or its
    /// header) reads back as one marker line where its lines were: every
    /// other line is intact, and a server adopting the log writes the
    /// blocks again rather than name the damaged record.
    #[test]
    fn a_damaged_block_record_is_a_marker() {
        let mut t = Terminal::new(80, 24, TermConfig::default());
        t.set_history_block_bytes(2000);
        log_lines(&mut t, 0, 600);
        let r = HistoryLog::create().unwrap().sync(PaneId::new(1), &t).unwrap().unwrap();
        assert!(r.blocks.len() >= 4);
        let all = |t: &Terminal| t.history_lines(0, usize::MAX, false).lines;
        let want = all(&t);
        let lost = r.blocks[1].2 as usize;
        let before = r.blocks[0].2 as usize - r.block_skip as usize;
        for at in [RECORD_HEADER as u64 + 10, 0, 13] {
            let mut dup = HistoryLog::create().unwrap();
            let r2 = dup.sync(PaneId::new(1), &t).unwrap().unwrap();
            dup.file()
                .write_all_at(b"junk junk junk", r2.blocks[1].0 + at)
                .unwrap();
            let without = t.to_json_without_history().unwrap();
            let mut back: Terminal = serde_json::from_str(without.get()).unwrap();
            let read = read_history(dup.file(), &r2).unwrap();
            back.restore_history(read.blocks, read.lines);
            let got = all(&back);
            assert_eq!(got[..before], want[..before], "junk at {at}");
            assert!(
                got[before].contains(&format!("{lost} history lines lost here")),
                "junk at {at}: {}",
                got[before]
            );
            assert_eq!(got[before + 1..], want[before + lost..], "junk at {at}");
            let mut new = HistoryLog::adopt(dup.file().try_clone().unwrap());
            new.adopt_pane(PaneId::new(1), &back, &r2, &read.counts);
            let again = new.sync(PaneId::new(1), &back).unwrap().unwrap();
            let damaged = r2.blocks[1].0;
            assert!(
                again.blocks.iter().all(|b| b.0 > damaged),
                "junk at {at}: a record adopted"
            );
            assert_eq!(read_back(&new, &back, &again), plain(&back));
        }
    }

    /// A new server that adopts the log appends after what it names and
    /// writes no line again; a pane it does not know starts over.
    #[test]
    fn an_adopted_log_goes_on_where_the_other_server_left_it() {
        let mut t = Terminal::new(20, 4, TermConfig::default());
        let mut old = HistoryLog::create().unwrap();
        for i in 0..50 {
            feed(&mut t, format!("line {i}\r\n").as_bytes());
            old.sync(PaneId::new(7), &t).unwrap();
        }
        let r = old.sync(PaneId::new(7), &t).unwrap().unwrap();
        let mut new = HistoryLog::adopt(old.file().try_clone().unwrap());
        let without = t.to_json_without_history().unwrap();
        let mut back: Terminal = serde_json::from_str(without.get()).unwrap();
        let read = read_history(new.file(), &r).unwrap();
        back.restore_history(read.blocks, read.lines);
        new.adopt_pane(PaneId::new(7), &back, &r, &read.counts);
        let end = new.end;
        let again = new.sync(PaneId::new(7), &back).unwrap().unwrap();
        assert_eq!(again, r);
        assert_eq!(new.end, end, "nothing written again");
        feed(&mut back, b"one more\r\n");
        let more = new.sync(PaneId::new(7), &back).unwrap().unwrap();
        assert_eq!(read_back(&new, &back, &more), plain(&back));
        // One line written, after what it adopted.
        let newest = back.history_numbering().unwrap().2 - 1;
        let line = back.history_line_bytes(newest).unwrap();
        assert_eq!(new.end - end, line.len() as u64 + 4);
    }

    /// What another server left in the log (its freed ranges it never gave
    /// back, lines written after its checkpoint) goes at the sweep; what
    /// our panes name stays.
    #[test]
    fn a_sweep_gives_back_what_no_pane_names() {
        let mut t = Terminal::new(20, 4, TermConfig::default());
        let mut old = HistoryLog::create().unwrap();
        for i in 0..3000 {
            feed(
                &mut t,
                format!("line {i} of the old server's pane\r\n").as_bytes(),
            );
            if i % 50 == 0 {
                old.sync(PaneId::new(1), &t).unwrap();
            }
        }
        // Lines nobody will name: another pane's, freed and never given back.
        let mut gone = Terminal::new(20, 4, TermConfig::default());
        for i in 0..3000 {
            feed(
                &mut gone,
                format!("gone {i} with some padding text\r\n").as_bytes(),
            );
        }
        old.sync(PaneId::new(2), &gone).unwrap();
        old.forget(PaneId::new(2));
        let r = old.sync(PaneId::new(1), &t).unwrap().unwrap();
        let before = old.allocated_bytes();
        let mut new = HistoryLog::adopt(old.file().try_clone().unwrap());
        let read = read_history(new.file(), &r).unwrap();
        let without = t.to_json_without_history().unwrap();
        let mut back: Terminal = serde_json::from_str(without.get()).unwrap();
        back.restore_history(read.blocks, read.lines);
        new.adopt_pane(PaneId::new(1), &back, &r, &read.counts);
        new.sweep();
        let named: u64 = r.chunks.iter().map(|c| c.1).sum();
        assert!(new.allocated_bytes() < before, "nothing given back");
        assert!(new.allocated_bytes() <= named + 2 * PAGE * (r.chunks.len() as u64 + 1));
        assert_eq!(read_back(&new, &back, &r), plain(&back));
    }

    /// A range read back as zeroes (given back while still named, which
    /// must not happen) is an error, not a wrong history.
    #[test]
    fn a_damaged_log_is_refused() {
        let mut t = Terminal::new(20, 4, TermConfig::default());
        feed(&mut t, b"a\r\nb\r\nc\r\nd\r\ne\r\nf\r\n");
        let mut log = HistoryLog::create().unwrap();
        let r = log.sync(PaneId::new(1), &t).unwrap().unwrap();
        log.file().write_all_at(&[0; 4], r.chunks[0].0).unwrap();
        assert!(read_lines(log.file(), &r).is_err());
        let mut short = r.clone();
        short.lines += 1;
        let log2 = HistoryLog::create().unwrap();
        assert!(read_lines(log2.file(), &short).is_err());
    }
}
