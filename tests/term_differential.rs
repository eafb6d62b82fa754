//! Differential test against the `vt100` crate: random streams built only
//! from features both emulators implement must leave the same visible text.
//! A deterministic xorshift PRNG keeps failures reproducible (the failing
//! seed and the stream are printed).

use ptyd::term::{TermConfig, Terminal};

mod rng;

use rng::Rng;

/// One random fragment of terminal output.
fn fragment(rng: &mut Rng, out: &mut Vec<u8>, rows: u64, cols: u64) {
    let n = |rng: &mut Rng, max: u64| (rng.below(max) + 1).to_string();
    let piece: String = match rng.below(30) {
        // vt100 keeps a pending wrap as "cursor one past the last column",
        // xterm (and this model) as "on the last column, wrap flag set"; the
        // two disagree on what a following move or edit touches. So text
        // ends with a CUF, CR or CRLF, which clears the flag in both.
        0..=10 => {
            let len = rng.below(20) + 1;
            let mut s: String = (0..len)
                .map(|_| match rng.below(12) {
                    0 => '中',
                    1 => 'é',
                    _ => (b'a' + rng.below(26) as u8) as char,
                })
                .collect();
            s.push_str(["\x1b[C", "\r", "\r\n"][rng.below(3) as usize]);
            s
        }
        11 => "\r\n".into(),
        12 => "\n".into(),
        13 => "\r".into(),
        14 => "\x08".into(),
        15 => "\t".into(),
        16 => format!("\x1b[{};{}H", n(rng, rows + 2), n(rng, cols + 2)),
        17 => format!(
            "\x1b[{}{}",
            n(rng, 5),
            ["A", "B", "C", "D"][rng.below(4) as usize]
        ),
        18 => format!("\x1b[{}J", rng.below(3)),
        19 => format!("\x1b[{}K", rng.below(3)),
        20 => format!("\x1b[{}X", n(rng, 6)),
        21 => format!("\x1b[{}@", n(rng, 4)),
        22 => format!("\x1b[{}P", n(rng, 4)),
        23 => format!("\x1b[{}L", n(rng, 3)),
        24 => format!("\x1b[{}M", n(rng, 3)),
        25 => format!("\x1b[{}{}", n(rng, 3), ["S", "T"][rng.below(2) as usize]),
        // Scroll regions are left out: vt100 scrolls the whole screen when
        // the cursor is below the region at the last row, xterm does not.
        26 => "\x1b[?25l".into(),
        27 => ["\x1bM", "\x1b[r"][rng.below(2) as usize].into(),
        28 => format!("\x1b[{};{}m", rng.below(2), 30 + rng.below(8)),
        _ => [
            "\x1b[?1049h\x1b[H\x1b[2J",
            "\x1b[?1049l",
            "\x1b[G",
            "\x1b[2d",
        ][rng.below(4) as usize]
            .into(),
    };
    out.extend_from_slice(piece.as_bytes());
}

fn ours(cols: u16, rows: u16, input: &[u8]) -> Vec<String> {
    let mut t = Terminal::new(cols, rows, TermConfig::default());
    let mut fwd = Vec::new();
    t.feed(input, &mut fwd);
    let mut v: Vec<String> = t
        .visible_text()
        .into_iter()
        .map(|s| s.trim_end().to_owned())
        .collect();
    let (col, row, _) = t.cursor();
    v.push(format!("cursor {row},{col}"));
    v
}

fn theirs(cols: u16, rows: u16, input: &[u8]) -> Vec<String> {
    let (Some(r), Some(c)) = (
        std::num::NonZeroU16::new(rows),
        std::num::NonZeroU16::new(cols),
    ) else {
        unreachable!()
    };
    let mut p = vt100::Parser::new(r, c, 0);
    p.process(input);
    let mut v: Vec<String> = p
        .screen()
        .rows(0, cols)
        .map(|s| s.trim_end().to_owned())
        .collect();
    let (row, col) = p.screen().cursor_position();
    v.push(format!("cursor {row},{}", col.min(cols - 1)));
    v
}

#[test]
fn same_visible_text_as_vt100() {
    let mut failures = Vec::new();
    for seed in 1..=2000u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let cols = 10 + rng.below(30) as u16;
        let rows = 3 + rng.below(10) as u16;
        let mut input = Vec::new();
        let mut cuts = Vec::new();
        for _ in 0..200 {
            fragment(&mut rng, &mut input, u64::from(rows), u64::from(cols));
            cuts.push(input.len());
        }
        if ours(cols, rows, &input) != theirs(cols, rows, &input) {
            // Report the shortest failing prefix: the state before the last
            // fragment and that fragment.
            let cut = cuts
                .iter()
                .copied()
                .find(|&c| ours(cols, rows, &input[..c]) != theirs(cols, rows, &input[..c]));
            let cut = cut.unwrap_or(input.len());
            let prev = cuts
                .iter()
                .copied()
                .take_while(|&c| c < cut)
                .last()
                .unwrap_or(0);
            let shown = format!(
                "before: {:#?}\nlast fragment: {:?}",
                ours(cols, rows, &input[..prev]),
                String::from_utf8_lossy(&input[prev..cut])
            );
            let (a, b) = (
                ours(cols, rows, &input[..cut]),
                theirs(cols, rows, &input[..cut]),
            );
            failures.push((seed, cols, rows, shown, a, b));
        }
    }
    if let Some((seed, cols, rows, input, a, b)) = failures.first() {
        panic!(
            "{} of 2000 streams differ; first: seed {seed} size {cols}x{rows}\n{input}\nours   {a:#?}\nvt100  {b:#?}",
            failures.len()
        );
    }
}
