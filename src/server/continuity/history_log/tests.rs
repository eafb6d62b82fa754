use super::read::read_lines;
use super::*;
use crate::term::{RECORD_HEADER, TermConfig};

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
    let r = HistoryLog::create()
        .unwrap()
        .sync(PaneId::new(1), &t)
        .unwrap()
        .unwrap();
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
