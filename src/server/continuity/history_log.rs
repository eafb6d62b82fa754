//! The history log: every pane's scrollback lines, each as its packed
//! bytes (`LineRef::stored`, what the history itself holds) after a 4-byte
//! length, appended to one memfd that the keeper holds with the crash checkpoint
//! (and that a live upgrade hands to the new server), so a checkpoint
//! carries each terminal without its history (`"lines": []`) plus where
//! its lines are in the log (`HistoryRef`).
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
//! Each pane's lines are a list of chunks (byte ranges of the log), oldest
//! first, of at most `CHUNK_LINES` lines: lines evicted from the history
//! free their chunk once all of its lines are gone, and a freed range's
//! memory is given back (`punch_hole`) once no checkpoint the keeper may
//! still use refers to it (`Server::keeper_flush` calls `release` after
//! the next checkpoint is sent). Small appends (a pane printing a line
//! per checkpoint) are merged, like a binary counter, so a pane has at
//! most about `log2(CHUNK_LINES)` chunks below the full size: a merge
//! copies bytes, it does not encode again.
//!
//! Invariant: for every pane, its chunks hold the lines numbered
//! `first..next` in order, and `next` is at most the history's `pushed`.

use crate::handoff::manifest::HistoryRef;
use crate::term::Terminal;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::File;
use std::os::unix::fs::FileExt;

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

#[derive(Debug, Default)]
struct PaneLog {
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

pub struct HistoryLog {
    file: File,
    /// Where the next append goes: past everything written (by us, or by
    /// another server that used the file since: see `append`).
    end: u64,
    panes: HashMap<u64, PaneLog>,
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
            file,
            end,
            panes: HashMap::new(),
            freed: Vec::new(),
            free: BTreeMap::new(),
            buf: Vec::new(),
            syncs: 0,
        }
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// Brings pane `id`'s lines in the log up to `term`'s history and says
    /// where they are; `None` if its lines cannot be numbered (then they
    /// travel inside the terminal's encoding).
    pub fn sync(&mut self, id: u64, term: &Terminal) -> Result<Option<HistoryRef>, String> {
        let Some((epoch, oldest, pushed)) = term.history_numbering() else {
            self.forget(id);
            return Ok(None);
        };
        let mut pane = self.panes.remove(&id).unwrap_or_default();
        if pane.epoch != epoch || pane.next < oldest || pane.next > pushed || pane.first > oldest {
            // Renumbered, or fell behind by more than the history holds:
            // start over from what the history holds now.
            self.freed
                .extend(pane.chunks.iter().map(|c| (c.offset, c.len)));
            pane = PaneLog {
                epoch,
                first: oldest,
                next: oldest,
                chunks: VecDeque::new(),
                stamp: 0,
            };
        }
        while let Some(c) = pane.chunks.front().copied() {
            if pane.first + u64::from(c.lines) > oldest {
                break;
            }
            pane.chunks.pop_front();
            pane.first += u64::from(c.lines);
            self.freed.push((c.offset, c.len));
        }
        let result = self.append(&mut pane, term, pushed);
        self.syncs += 1;
        pane.stamp = self.syncs;
        let reference = HistoryRef {
            chunks: pane.chunks.iter().map(|c| (c.offset, c.len)).collect(),
            skip: oldest - pane.first,
            lines: pushed - oldest,
        };
        self.panes.insert(id, pane);
        result.map(|()| Some(reference))
    }

    /// Writes lines `pane.next..pushed` at the end of the log, as chunks
    /// of at most `CHUNK_LINES`, then merges small chunks.
    fn append(&mut self, pane: &mut PaneLog, term: &Terminal, pushed: u64) -> Result<(), String> {
        if pane.next >= pushed {
            return Ok(());
        }
        // Another server may have written after what we know (a new one in
        // probation, before it was taken back): never over its bytes.
        self.end = self.end.max(self.file.metadata().map_or(0, |m| m.len()));
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
        self.file
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
                self.file
                    .read_exact_at(first, a.offset)
                    .and_then(|()| self.file.read_exact_at(second, b.offset))
                    .and_then(|()| self.file.write_all_at(&bytes, self.end))
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
    pub fn forget(&mut self, id: u64) {
        if let Some(pane) = self.panes.remove(&id) {
            self.freed
                .extend(pane.chunks.iter().map(|c| (c.offset, c.len)));
        }
    }

    /// Forgets every pane `live` says is gone.
    pub fn retain(&mut self, live: impl Fn(u64) -> bool) {
        let gone: Vec<u64> = self.panes.keys().copied().filter(|id| !live(*id)).collect();
        for id in gone {
            self.forget(id);
        }
    }

    /// Takes pane `id`'s lines as another server wrote them (`reference`,
    /// read by `read_lines`, which counted each chunk's lines, and decoded
    /// into `term` already): later checkpoints append after them rather
    /// than write them again.
    pub fn adopt_pane(&mut self, id: u64, term: &Terminal, reference: &HistoryRef, counts: &[u32]) {
        let Some((epoch, oldest, pushed)) = term.history_numbering() else {
            return;
        };
        let lines: u64 = counts.iter().map(|&n| u64::from(n)).sum();
        if pushed - oldest != reference.lines
            || counts.len() != reference.chunks.len()
            || lines != reference.skip + reference.lines
            || oldest < reference.skip
        {
            return;
        }
        let chunks = reference
            .chunks
            .iter()
            .zip(counts)
            .map(|(&(offset, len), &lines)| Chunk { offset, len, lines })
            .collect();
        self.panes.insert(
            id,
            PaneLog {
                epoch,
                first: oldest - reference.skip,
                next: pushed,
                chunks,
                stamp: {
                    self.syncs += 1;
                    self.syncs
                },
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
                let _ = crate::sys::punch_hole(&self.file, from, to - from);
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
            .flat_map(|p| p.chunks.iter().map(|c| (c.offset, c.offset + c.len)))
            .collect();
        named.sort_unstable();
        self.end = self.end.max(self.file.metadata().map_or(0, |m| m.len()));
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
        self.file.metadata().map_or(0, |m| m.blocks() * 512)
    }

    /// Which sync last changed what pane `id`'s reference names (`None`
    /// for a pane the log does not know): a reference taken at that sync
    /// is good while the stamp is the same, since only a sync (or
    /// forgetting the pane) frees a range a reference names.
    pub fn stamp(&self, id: u64) -> Option<u64> {
        self.panes.get(&id).map(|p| p.stamp)
    }

    /// Panes with lines in the log.
    pub fn panes(&self) -> usize {
        self.panes.len()
    }
}

/// The lines a `HistoryRef` names, read from the log and checked: the
/// history's lines oldest first, and how many lines each chunk holds (for
/// `adopt_pane`).
pub fn read_lines(
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
        let (lines, counts) = read_lines(log.file(), r).unwrap();
        assert_eq!(counts.len(), r.chunks.len());
        back.restore_history(lines);
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
        let mut t = Terminal::new(30, 6, config);
        let mut log = HistoryLog::create().unwrap();
        let mut n = 0;
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
                }
                80..83 => feed(&mut t, b"\x1b[3J"),
                83..88 => t.resize(20 + below(30) as u16, 3 + below(8) as u16),
                88..90 => feed(&mut t, b"\x1bc"),
                90..93 => feed(&mut t, b"\x1b[?1049hon alt\r\n\r\n\r\n\x1b[?1049l"),
                93..96 => t.inject_history(&[format!("injected {step}"), "more".into()]),
                96..98 => {
                    t = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
                }
                _ => {}
            }
            let end_before = log.end;
            let r = log.sync(1, &t).unwrap().unwrap();
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
                assert!(log.end - end_before <= bytes + small, "step {step}");
            }
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
        }
        // Its memory is about the history's, not all that went through.
        let named: u64 = log
            .sync(1, &t)
            .unwrap()
            .unwrap()
            .chunks
            .iter()
            .map(|c| c.1)
            .sum();
        assert!(
            log.allocated_bytes() <= named + 64 * PAGE,
            "{} > {named}",
            log.allocated_bytes()
        );
    }

    /// A new server that adopts the log appends after what it names and
    /// writes no line again; a pane it does not know starts over.
    #[test]
    fn an_adopted_log_goes_on_where_the_other_server_left_it() {
        let mut t = Terminal::new(20, 4, TermConfig::default());
        let mut old = HistoryLog::create().unwrap();
        for i in 0..50 {
            feed(&mut t, format!("line {i}\r\n").as_bytes());
            old.sync(7, &t).unwrap();
        }
        let r = old.sync(7, &t).unwrap().unwrap();
        let mut new = HistoryLog::adopt(old.file().try_clone().unwrap());
        let without = t.to_json_without_history().unwrap();
        let mut back: Terminal = serde_json::from_str(without.get()).unwrap();
        let (lines, counts) = read_lines(new.file(), &r).unwrap();
        back.restore_history(lines);
        new.adopt_pane(7, &back, &r, &counts);
        let end = new.end;
        let again = new.sync(7, &back).unwrap().unwrap();
        assert_eq!(again, r);
        assert_eq!(new.end, end, "nothing written again");
        feed(&mut back, b"one more\r\n");
        let more = new.sync(7, &back).unwrap().unwrap();
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
                old.sync(1, &t).unwrap();
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
        old.sync(2, &gone).unwrap();
        old.forget(2);
        let r = old.sync(1, &t).unwrap().unwrap();
        let before = old.allocated_bytes();
        let mut new = HistoryLog::adopt(old.file().try_clone().unwrap());
        let (lines, counts) = read_lines(new.file(), &r).unwrap();
        let without = t.to_json_without_history().unwrap();
        let mut back: Terminal = serde_json::from_str(without.get()).unwrap();
        back.restore_history(lines);
        new.adopt_pane(1, &back, &r, &counts);
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
        let r = log.sync(1, &t).unwrap().unwrap();
        log.file().write_all_at(&[0; 4], r.chunks[0].0).unwrap();
        assert!(read_lines(log.file(), &r).is_err());
        let mut short = r.clone();
        short.lines += 1;
        let log2 = HistoryLog::create().unwrap();
        assert!(read_lines(log2.file(), &short).is_err());
    }
}
