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
    let log = |i: usize| Line::new(&format!("line {i} of a log that says the same"), &[], false);
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
