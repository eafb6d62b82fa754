//! Reading back what a `HistoryRef` names (a live upgrade's new server,
//! a replacement after a crash): block records passed on to be checked,
//! hot lines checked here.

use super::MAX_RECORD;
use crate::handoff::manifest::HistoryRef;
use crate::term::{RECORD_HEADER, RecordIn};
use std::fs::File;
use std::os::unix::fs::FileExt;

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
    pub(super) chunks: Vec<u32>,
    pub(super) sums: Vec<Option<u64>>,
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
pub(super) fn read_lines(
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
