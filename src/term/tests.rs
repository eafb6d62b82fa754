//! Unit tests of the model through its public API, one group per feature.

use super::*;
use crate::xorshift;

fn term(cols: u16, rows: u16) -> Terminal {
    Terminal::new(cols, rows, TermConfig::default())
}

fn feed(t: &mut Terminal, bytes: &[u8]) -> Vec<u8> {
    let mut fwd = Vec::new();
    t.feed(bytes, &mut fwd);
    fwd
}

fn screen(t: &Terminal) -> Vec<String> {
    t.visible_text()
}

fn with_sgr(t: &Terminal) -> Vec<String> {
    t.capture(&CaptureOptions {
        escapes: true,
        ..Default::default()
    })
    .lines
}

#[test]
fn text_wraps_and_scrolls_into_history() {
    let mut t = term(5, 2);
    feed(&mut t, b"abcdefg\r\nxy\r\nz");
    assert_eq!(screen(&t), ["xy", "z"]);
    assert_eq!(t.scrollback_len(), 2);
    let cap = t.capture(&CaptureOptions {
        start: Some(-2),
        end: Some(-1),
        escapes: false,
        join: false,
    });
    assert_eq!(cap.lines, ["abcde", "fg"]);
    assert_eq!(t.cursor(), (1, 1, true));
}

#[test]
fn pending_wrap_at_last_column() {
    let mut t = term(3, 2);
    feed(&mut t, b"abc");
    assert_eq!(t.cursor(), (2, 0, true));
    feed(&mut t, b"\rX");
    assert_eq!(screen(&t), ["Xbc", ""]);
    feed(&mut t, b"\x1b[?7lZZZZ");
    assert_eq!(screen(&t), ["XZZ", ""]);
}

#[test]
fn cursor_movement() {
    let mut t = term(10, 5);
    feed(
        &mut t,
        b"\x1b[3;4Ha\x1b[2Ab\x1b[5Cc\x1b[10Dd\x1b[20Be\x1b[Gf\x1b[2dg\x1b[8`h",
    );
    assert_eq!(screen(&t), ["d   b    c", " g     h", "   a", "", "fe"]);
    feed(&mut t, b"\x1b[1;1H\x1b[2Ex\x1b[Fy");
    assert_eq!(screen(&t)[2], "x  a");
    assert_eq!(screen(&t)[1], "yg     h");
}

#[test]
fn sgr_attributes_and_colours() {
    let mut t = term(20, 2);
    feed(&mut t, b"\x1b[1;3;4;31mA\x1b[0;38;5;200;48;2;1;2;3mB\x1b[7;9;2;5;8mC\x1b[mD\x1b[4:3;95;104mE\x1b[0m");
    let lines = with_sgr(&t);
    assert_eq!(
        lines[0],
        "\x1b[0;1;3;4;31mA\x1b[0;38;5;200;48;2;1;2;3mB\x1b[0;2;5;7;8;9;38;5;200;48;2;1;2;3mC\x1b[0mD\x1b[0;4:3;95;104mE\x1b[0m"
    );
    assert_eq!(screen(&t)[0], "ABCDE");
}

#[test]
fn wide_and_combining_characters() {
    let mut t = term(6, 2);
    feed(&mut t, "a中b".as_bytes());
    assert_eq!(t.cursor().0, 4);
    feed(&mut t, "e\u{301}".as_bytes());
    assert_eq!(screen(&t)[0], "a中be\u{301}");
    // Overwriting half of a wide char blanks the other half.
    feed(&mut t, b"\x1b[1;3HX");
    assert_eq!(screen(&t)[0], "a Xbe\u{301}");
    // A wide char that does not fit wraps early.
    feed(&mut t, "\x1b[1;6H中".as_bytes());
    assert_eq!(screen(&t), ["a Xbe\u{301}", "中"]);
}

#[test]
fn erase_operations() {
    let mut t = term(5, 3);
    feed(&mut t, b"aaaaa\r\nbbbbb\r\nccccc");
    feed(&mut t, b"\x1b[2;3H\x1b[K");
    assert_eq!(screen(&t), ["aaaaa", "bb", "ccccc"]);
    feed(&mut t, b"\x1b[1;2H\x1b[1K");
    assert_eq!(screen(&t)[0], "  aaa");
    feed(&mut t, b"\x1b[3;2H\x1b[2X");
    assert_eq!(screen(&t)[2], "c  cc");
    feed(&mut t, b"\x1b[2;1H\x1b[J");
    assert_eq!(screen(&t), ["  aaa", "", ""]);
    feed(&mut t, b"xy\x1b[1J");
    assert_eq!(screen(&t), ["", "", ""]);
    feed(&mut t, b"\x1b[1;1Hq\x1b[2J");
    assert_eq!(screen(&t), ["", "", ""]);
}

#[test]
fn insert_delete_chars_and_lines() {
    let mut t = term(5, 4);
    feed(&mut t, b"abcde\r\n1\r\n2\r\n3");
    feed(&mut t, b"\x1b[1;2H\x1b[2@");
    assert_eq!(screen(&t)[0], "a  bc");
    feed(&mut t, b"\x1b[3P");
    assert_eq!(screen(&t)[0], "ac");
    feed(&mut t, b"\x1b[2;1H\x1b[L");
    assert_eq!(screen(&t), ["ac", "", "1", "2"]);
    feed(&mut t, b"\x1b[2M");
    assert_eq!(screen(&t), ["ac", "2", "", ""]);
    feed(&mut t, b"\x1b[4h\x1b[1;1HZ\x1b[4l");
    assert_eq!(screen(&t)[0], "Zac");
}

#[test]
fn scroll_region_and_index() {
    let mut t = term(3, 5);
    feed(&mut t, b"1\r\n2\r\n3\r\n4\r\n5");
    feed(&mut t, b"\x1b[2;4r");
    assert_eq!(t.cursor(), (0, 0, true));
    feed(&mut t, b"\x1b[4;1H\n");
    assert_eq!(screen(&t), ["1", "3", "4", "", "5"]);
    assert_eq!(t.scrollback_len(), 0, "region scrolls do not feed history");
    feed(&mut t, b"\x1b[2;1H\x1bM");
    assert_eq!(screen(&t), ["1", "", "3", "4", "5"]);
    feed(&mut t, b"\x1b[S");
    assert_eq!(screen(&t), ["1", "3", "4", "", "5"]);
    feed(&mut t, b"\x1b[2T");
    assert_eq!(screen(&t), ["1", "", "", "3", "5"]);
    feed(&mut t, b"\x1b[4;2H\x1bEx\x1bDy");
    assert_eq!(screen(&t), ["1", "3", "x", " y", "5"]);
}

#[test]
fn origin_mode_and_cursor_report() {
    let mut t = term(10, 6);
    feed(&mut t, b"\x1b[3;5r\x1b[?6h\x1b[2;3H");
    assert_eq!(t.cursor(), (2, 3, true));
    let fwd = feed(&mut t, b"\x1b[6n");
    assert!(fwd.is_empty());
    assert_eq!(t.take_replies(), b"\x1b[2;3R");
    feed(&mut t, b"\x1b[9;1H");
    assert_eq!(t.cursor(), (0, 4, true), "origin mode clamps to the region");
}

#[test]
fn repeat_and_tabs() {
    let mut t = term(20, 2);
    feed(&mut t, b"x\x1b[3b\ta\x1b[3g\x1b[1;3H\x1bH\r\tb");
    assert_eq!(screen(&t)[0], "xxbx    a");
    feed(&mut t, b"\x1b[1;10H\x1b[Zc");
    assert_eq!(screen(&t)[0], "xxcx    a");
}

#[test]
fn dec_special_graphics() {
    let mut t = term(10, 1);
    feed(&mut t, b"\x1b(0lqk\x1b(Bq\x1b)0\x0ex\x0fx");
    assert_eq!(screen(&t)[0], "┌─┐q│x");
}

#[test]
fn alternate_screen_variants() {
    let mut t = term(5, 2);
    feed(&mut t, b"main\x1b[?1049h\x1b[Halt");
    assert_eq!(screen(&t), ["alt", ""]);
    assert!(t.modes().alt_screen);
    feed(&mut t, b"\x1b[?1049l");
    assert_eq!(screen(&t), ["main", ""]);
    assert_eq!(t.cursor(), (4, 0, true));
    feed(&mut t, b"\x1b[?47h");
    assert_eq!(screen(&t), ["alt", ""], "47 does not clear");
    feed(&mut t, b"\x1b[?47l\x1b[?1047hX\x1b[?1047l\x1b[?47h");
    assert_eq!(screen(&t), ["", ""], "1047 clears on exit");
    feed(&mut t, b"\x1b[?47l");
    for _ in 0..5 {
        feed(&mut t, b"\x1b[?1049h\r\n\r\n\r\n\x1b[?1049l");
    }
    assert_eq!(t.scrollback_len(), 0, "alt screen never feeds history");
}

#[test]
fn modes_are_tracked() {
    let mut t = term(10, 2);
    feed(&mut t, b"\x1b[?1h\x1b=\x1b[?2004h\x1b[?1002h\x1b[?1006h\x1b[?1004h\x1b[?2026h\x1b[?25l\x1b[5 q\x1b[>4;2m");
    let m = t.modes();
    assert!(m.app_cursor_keys && m.app_keypad && m.bracketed_paste && m.focus_reporting);
    assert!(m.synchronized_output && !m.cursor_visible);
    assert_eq!(m.mouse, MouseMode::Button);
    assert_eq!(m.mouse_encoding, MouseEncoding::Sgr);
    assert_eq!(m.cursor_style, 5);
    assert_eq!(m.modify_other_keys, 2);
    feed(
        &mut t,
        b"\x1b[?1000l\x1b[?1002l\x1b[?9h\x1b[?1015h\x1b[?2026l\x1b>",
    );
    let m = t.modes();
    assert_eq!(m.mouse, MouseMode::X10);
    assert_eq!(m.mouse_encoding, MouseEncoding::Urxvt);
    assert!(!m.synchronized_output && !m.app_keypad);
    // Text after BSU is processed at once: the model never buffers.
    feed(&mut t, b"\x1b[?2026hvisible");
    assert_eq!(screen(&t)[0], "visible");
}

#[test]
fn kitty_keyboard_stack() {
    let mut t = term(10, 2);
    feed(&mut t, b"\x1b[>1u\x1b[>3u");
    assert_eq!(t.modes().kitty_flags(), 3);
    feed(&mut t, b"\x1b[=4;2u");
    assert_eq!(t.modes().kitty_flags(), 7);
    feed(&mut t, b"\x1b[?u");
    assert_eq!(t.take_replies(), b"\x1b[?7u");
    feed(&mut t, b"\x1b[<u");
    assert_eq!(t.modes().kitty_flags(), 1);
    feed(&mut t, b"\x1b[<5u");
    assert_eq!(t.modes().kitty_flags(), 0);
    for _ in 0..100 {
        feed(&mut t, b"\x1b[>1u");
    }
    assert_eq!(t.modes().kitty_stack.len(), modes::KITTY_STACK_MAX);
}

#[test]
fn title_stack_and_events() {
    let mut t = term(10, 2);
    feed(&mut t, b"\x1b]0;one\x07\x1b[22t\x1b]2;two\x1b\\\x07");
    assert_eq!(t.title(), "two");
    feed(&mut t, b"\x1b[23t");
    assert_eq!(t.title(), "one");
    assert_eq!(
        t.take_events(),
        [
            TermEvent::Title("one".into()),
            TermEvent::Title("two".into()),
            TermEvent::Bell,
            TermEvent::Title("one".into())
        ]
    );
}

#[test]
fn shell_integration_events() {
    let mut t = term(10, 2);
    feed(&mut t, b"\x1b]7;file://host/tmp/a%20b\x07\x1b]133;A\x07$ \x1b]133;B\x07\x1b]133;C\x07\x1b]133;D;2\x07\x1b]133;D\x1b\\");
    assert_eq!(t.cwd(), Some("/tmp/a b"));
    assert_eq!(
        t.take_events(),
        [
            TermEvent::Cwd("/tmp/a b".into()),
            TermEvent::Prompt,
            TermEvent::CommandStart,
            TermEvent::CommandFinished { exit: Some(2) },
            TermEvent::CommandFinished { exit: None },
        ]
    );
}

#[test]
fn queries_are_answered_and_not_forwarded() {
    let mut t = term(10, 3);
    let input: &[u8] = b"a\x1b[c\x1b[>c\x1b[5n\x1b[?2004$p\x1b[4$p\x1b[?u\x1b[>q\x1b]10;?\x07\x1b]11;?\x1b\\\x1b[18t\x1b[?4mb";
    let fwd = feed(&mut t, input);
    assert_eq!(fwd, b"ab");
    let replies = String::from_utf8(t.take_replies()).unwrap();
    assert_eq!(
        replies,
        "\x1b[?65;6;21;22;28c\x1b[>64;10;0c\x1b[0n\x1b[?2004;2$y\x1b[4;2$y\x1b[?0u\x1bP>|ptyd(0.1.0)\x1b\\\
         \x1b]10;rgb:e5e5/e5e5/e5e5\x07\x1b]11;rgb:0000/0000/0000\x1b\\\x1b[8;3;10t\x1b[>4;0m"
    );
    // Sequences that are no query pass through unchanged; a query the
    // model cannot answer is dropped (pixel sizes) or answered as unknown
    // (a capability), never passed on.
    let other: &[u8] = b"\x1b[1mx\x1b]2;t\x07";
    assert_eq!(feed(&mut t, other), other);
    assert!(t.take_replies().is_empty());
    assert_eq!(feed(&mut t, b"\x1b[14t\x1bP+q544e;436f\x1b\\"), b"");
    assert_eq!(
        t.take_replies(),
        b"\x1bP0+r544e\x1b\\\x1bP1+r436f=323536\x1b\\"
    );
}

#[test]
fn query_split_across_feeds_is_held_then_swallowed() {
    let mut t = term(10, 3);
    let mut fwd = feed(&mut t, b"x\x1b[");
    assert_eq!(t.pending_bytes(), 2);
    fwd.extend(feed(&mut t, b"6"));
    fwd.extend(feed(&mut t, b"ny"));
    assert_eq!(fwd, b"xy");
    assert_eq!(t.take_replies(), b"\x1b[1;2R");
    // Controls embedded in a swallowed query still reach clients.
    assert_eq!(feed(&mut t, b"\x1b[5\nn"), b"\n");
    assert_eq!(t.cursor().1, 1);
}

#[test]
fn oversized_osc_is_dropped_and_memory_stays_bounded() {
    let mut t = term(10, 2);
    let mut fwd = feed(&mut t, b"\x1b]2;");
    let chunk = vec![b'x'; 1 << 16];
    for _ in 0..64 {
        fwd.extend(feed(&mut t, &chunk));
        assert!(t.pending_bytes() <= boundary::MAX_SEQ);
    }
    fwd.extend(feed(&mut t, b"\x07ok"));
    assert_eq!(fwd, b"ok");
    assert_eq!(t.title(), "");
    assert_eq!(screen(&t)[0], "ok");
    // Exactly at the cap is still accepted.
    let mut t = term(10, 2);
    let mut seq = b"\x1b]2;".to_vec();
    seq.extend(std::iter::repeat_n(b'y', 64 * 1024 - 4));
    seq.push(7);
    feed(&mut t, &seq);
    assert_eq!(t.title().len(), screen::MAX_TITLE);
}

#[test]
fn serde_round_trip_mid_sequence_and_rep() {
    let mut t = term(10, 3);
    feed(&mut t, b"\x1b[31mab\x1b]2;ti");
    let json = serde_json::to_string(&t).unwrap();
    let mut u: Terminal = serde_json::from_str(&json).unwrap();
    assert_eq!(t, u);
    let rest: &[u8] = b"tle\x07\x1b[3bc\xe4\xb8";
    assert_eq!(feed(&mut t, rest), feed(&mut u, rest));
    let json = serde_json::to_string(&t).unwrap();
    let mut u: Terminal = serde_json::from_str(&json).unwrap();
    assert_eq!(feed(&mut t, b"\xad\x1b[b"), feed(&mut u, b"\xad\x1b[b"));
    assert_eq!(t, u);
    assert_eq!(screen(&t)[0], "abbbbc中中");
    assert_eq!(t.title(), "title");
}

#[test]
fn redraw_recreates_state_on_a_fresh_terminal() {
    let mut t = term(12, 4);
    feed(
        &mut t,
        "\x1b]2;T\x07l1\r\n\x1b[1;32mgreen\x1b[0m 中\r\n\x1b7\x1b[?1049h\x1b[2;3Halt\x1b[?1h\x1b[?2004h\x1b[?1003h\x1b[?1006h\x1b[>1u\x1b[=5;1u\x1b[2;3r\x1b[4 q\x1b[3;5H\x1b[7m".as_bytes(),
    );
    let bytes = t.redraw(12, 4);
    let mut u = term(12, 4);
    feed(&mut u, &bytes);
    assert_eq!(u.visible_text(), t.visible_text());
    assert_eq!(with_sgr(&u), with_sgr(&t));
    assert_eq!(u.modes(), t.modes());
    assert_eq!(u.cursor(), t.cursor());
    assert_eq!(u.title(), "T");
    feed(&mut t, b"\x1b[?1049l");
    feed(&mut u, b"\x1b[?1049l");
    assert_eq!(u.visible_text(), t.visible_text());
    assert_eq!(with_sgr(&u), with_sgr(&t));
    assert_eq!(u.cursor(), t.cursor());
}

#[test]
fn redraw_keeps_pending_wrap() {
    let mut t = term(4, 2);
    feed(&mut t, b"abcd");
    let mut u = term(4, 2);
    feed(&mut u, &t.redraw(4, 2));
    feed(&mut t, b"e");
    feed(&mut u, b"e");
    assert_eq!(u.visible_text(), t.visible_text());
}

#[test]
fn resize_reflows_and_keeps_cursor_row() {
    let mut t = term(6, 4);
    feed(&mut t, "1\r\n2\r\nab中d\r\n4".as_bytes());
    t.resize(3, 2);
    assert_eq!(t.size(), (3, 2));
    assert_eq!(
        screen(&t),
        ["中d", "4"],
        "a wide char that would straddle the edge moves down"
    );
    assert_eq!(t.scrollback_len(), 3);
    assert_eq!(t.cursor(), (1, 1, true));
    t.resize(6, 4);
    assert_eq!(
        screen(&t),
        ["1", "2", "ab中d", "4"],
        "widening joins the line again and growing pulls history back"
    );
    assert_eq!(t.scrollback_len(), 0);
    feed(&mut t, b"\x1b[10;10Hz");
    assert_eq!(screen(&t)[3], "4    z");
}

#[test]
fn alt_screen_is_truncated_not_reflowed() {
    let mut t = term(6, 3);
    feed(&mut t, "main line\r\n\x1b[?1049h\x1b[Hab中d".as_bytes());
    t.resize(3, 3);
    assert_eq!(screen(&t), ["ab", "", ""], "cut wide char is blanked");
    feed(&mut t, b"\x1b[?1049l");
    assert_eq!(screen(&t), ["mai", "ine", ""]);
}

#[test]
fn reflow_rewraps_text_and_follows_the_cursor() {
    let mut t = term(10, 4);
    // A shell-like state: a long command line wrapped once, the cursor
    // right after it.
    feed(&mut t, b"$ echo 0123456789abcdef");
    assert_eq!(screen(&t), ["$ echo 012", "3456789abc", "def", ""]);
    // `cursor()` is (col, row, visible).
    assert_eq!(t.cursor(), (3, 2, true));
    t.resize(20, 4);
    assert_eq!(screen(&t), ["$ echo 0123456789abc", "def", "", ""]);
    assert_eq!(t.cursor(), (3, 1, true));
    t.resize(7, 4);
    assert_eq!(screen(&t), ["$ echo", "0123456", "789abcd", "ef"]);
    assert_eq!(t.cursor(), (2, 3, true));
    feed(&mut t, b"!");
    assert_eq!(screen(&t)[3], "ef!");
    // Text that fills the row exactly leaves the cursor pending a wrap.
    let mut t = term(10, 3);
    feed(&mut t, b"abcdefghijklmn");
    t.resize(7, 3);
    assert_eq!(screen(&t), ["abcdefg", "hijklmn", ""]);
    assert_eq!(t.cursor(), (6, 1, true));
    feed(&mut t, b"o");
    assert_eq!(screen(&t), ["abcdefg", "hijklmn", "o"]);
}

#[test]
fn reflow_keeps_styles_marks_and_links() {
    let mut t = term(8, 3);
    feed(
        &mut t,
        "\x1b[1;31mred\x1b[m e\u{301} \x1b]8;;https://x\x1b\\linked\x1b]8;;\x1b\\".as_bytes(),
    );
    let joined = |t: &Terminal| {
        t.capture(&CaptureOptions {
            escapes: true,
            join: true,
            start: Some(-10),
            ..Default::default()
        })
        .lines
        .into_iter()
        .filter(|l| !l.trim().is_empty())
        // Where a link crosses a row edge it is closed and reopened; the
        // edge moves with the width.
        .map(|l| {
            l.trim_end()
                .replace("\x1b]8;;\x1b\\\x1b]8;;https://x\x1b\\", "")
        })
        .collect::<Vec<_>>()
    };
    let before = joined(&t);
    for cols in [3, 20, 5, 8] {
        t.resize(cols, 3);
        assert_eq!(joined(&t), before, "at {cols} columns");
    }
    // The same with the history compressed a line or two per block: the
    // wrapped rows of one logical line, its link and its wide and combined
    // characters land in different blocks.
    for block in [1, 9, 40] {
        let mut t = term(8, 3);
        t.set_history_block_bytes(block);
        let line = "\x1b[1;31mred\x1b[m 中e\u{301} \x1b]8;;https://x\x1b\\linked\x1b]8;;\x1b\\";
        for _ in 0..6 {
            feed(&mut t, line.as_bytes());
            feed(&mut t, b"\r\n");
        }
        // All of it, and without the resets a row's end adds (where a
        // row ends moves with the width).
        let all = |t: &Terminal| {
            t.capture(&CaptureOptions {
                escapes: true,
                join: true,
                start: Some(-10_000),
                ..Default::default()
            })
            .lines
            .into_iter()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                l.trim_end()
                    .replace("\x1b]8;;\x1b\\\x1b]8;;https://x\x1b\\", "")
                    .replace("\x1b[0m", "")
            })
            .collect::<Vec<_>>()
        };
        let before = all(&t);
        assert_eq!(before.len(), 6);
        for cols in [3, 20, 5, 8, 4, 13] {
            t.resize(cols, 3);
            assert_eq!(all(&t), before, "block {block} at {cols} columns");
        }
    }
}

/// Whatever the widths, the logical lines (history and screen, wrapped rows
/// joined) are the same text before and after resizing.
#[test]
fn reflow_preserves_logical_lines() {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for case in 0..120 {
        let cols = 2 + next(30) as u16;
        let mut t = term(cols, 8);
        // Half the cases compress history in blocks of one to a few
        // lines, so block edges fall at every kind of cut.
        if case % 2 == 1 {
            t.set_history_block_bytes(1 + next(300) as usize);
        }
        let mut input = String::new();
        for _ in 0..next(30) + 1 {
            for _ in 0..next(50) {
                match next(14) {
                    0 => input.push(' '),
                    1 => input.push('中'),
                    2 => input.push('é'),
                    3 => input.push_str("\x1b]8;;http://x/\x07L\x1b]8;;\x07"),
                    4 => input.push_str("\x1b[31mR\x1b[0m"),
                    _ => input.push((b'a' + next(26) as u8) as char),
                }
            }
            input.push_str("\r\n");
        }
        feed(&mut t, input.as_bytes());
        let logical = |t: &Terminal| {
            let mut lines = t
                .capture(&CaptureOptions {
                    join: true,
                    start: Some(-1000),
                    ..Default::default()
                })
                .lines
                .into_iter()
                .map(|l| l.trim_end().to_string())
                .collect::<Vec<_>>();
            while lines.last().is_some_and(|l| l.is_empty()) {
                lines.pop();
            }
            lines
        };
        let before = logical(&t);
        for _ in 0..4 {
            let w = 2 + next(40) as u16;
            t.resize(w, 8);
            assert_eq!(
                logical(&t),
                before,
                "case {case}: {cols} -> {w} columns, input {input:?}"
            );
        }
    }
}

#[test]
fn inject_history_plain_and_sgr() {
    let mut t = term(10, 2);
    t.inject_history(&["plain".into(), "\x1b[1mbold\x1b[0m x".into()]);
    let cap = t.capture(&CaptureOptions {
        start: Some(-2),
        end: Some(-1),
        escapes: true,
        join: false,
    });
    assert_eq!(cap.lines, ["plain", "\x1b[0;1mbold\x1b[0m x\x1b[0m"]);
}

#[test]
fn scrollback_is_compact() {
    let mut t = term(80, 24);
    let line: Vec<u8> = (0..80).map(|i| b'a' + (i % 26) as u8).collect();
    for _ in 0..10_024 {
        feed(&mut t, &line);
        feed(&mut t, b"\r\n");
    }
    assert_eq!(t.scrollback_len(), 10_000);
    let raw = 10_000 * 80;
    let used = t.scrollback_memory_bytes();
    assert!(
        used <= 2 * raw,
        "scrollback uses {used} bytes for {raw} bytes of text"
    );
}

#[test]
fn scrollback_byte_bound() {
    let cfg = TermConfig {
        scrollback_bytes: 10_000,
        ..TermConfig::default()
    };
    let mut t = Terminal::new(80, 5, cfg);
    for _ in 0..1000 {
        feed(&mut t, &[b'x'; 80]);
    }
    assert!(t.scrollback_memory_bytes() <= 10_000 + 16 * 256);
    assert!(t.scrollback_len() < 120);
}

#[test]
fn ris_resets_modes_but_keeps_history() {
    let mut t = term(5, 2);
    feed(&mut t, b"a\r\nb\r\nc\x1b[?2004h\x1b[31m\x1b[2;2r");
    feed(&mut t, b"\x1bc");
    assert_eq!(screen(&t), ["", ""]);
    assert_eq!(t.modes(), Modes::default());
    assert_eq!(t.scrollback_len(), 1);
    feed(&mut t, b"x");
    assert_eq!(with_sgr(&t)[0], "x");
}

#[test]
fn cell_stays_small() {
    assert!(std::mem::size_of::<Cell>() <= 12);
}

#[test]
fn decaln_and_bce() {
    let mut t = term(3, 2);
    feed(&mut t, b"\x1b#8");
    assert_eq!(screen(&t), ["EEE", "EEE"]);
    feed(&mut t, b"\x1b[44m\x1b[2J\x1b[m");
    assert_eq!(with_sgr(&t)[0], "\x1b[0;44m   \x1b[0m");
}

#[test]
fn snapshot_is_compact() {
    let mut t = term(80, 24);
    for i in 0..30 {
        feed(&mut t, format!("line {i} with some text\r\n").as_bytes());
    }
    let json = serde_json::to_string(&t).unwrap();
    assert!(json.len() < 12_000, "snapshot is {} bytes", json.len());
}

/// `Screen::text` replaces vte for ground-state bytes; it must do exactly
/// what vte's ansi layer would do with them.
#[test]
fn ground_text_matches_vte() {
    let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
    const ALPHABET: &[&[u8]] = &[
        b"a",
        b"Z",
        b" ",
        b"\r",
        b"\n",
        b"\t",
        b"\x08",
        b"\x07",
        b"\x0e",
        b"\x0f",
        b"\x7f",
        b"\x00",
        b"\x1a",
        b"\x85",
        b"\x9b",
        b"\xc2\x85",
        b"\xe2\x82",
        b"\xff",
        b"\xc3\xa9",
        "中".as_bytes(),
        "\u{301}".as_bytes(),
        "👍".as_bytes(),
        b"\xf0\x9f\x91",
    ];
    for _ in 0..300 {
        let mut input = Vec::new();
        for _ in 0..(next() % 200) {
            input.extend_from_slice(ALPHABET[(next() % ALPHABET.len() as u64) as usize]);
        }
        let cols = 1 + (next() % 12) as u16;
        let rows = 1 + (next() % 5) as u16;
        let mut ours = Screen::new(cols, rows, TermConfig::default());
        ours.text(&input);
        let mut theirs = Screen::new(cols, rows, TermConfig::default());
        // vte holds an incomplete trailing character; ours prints U+FFFD for
        // it, which vte does once the run ends with ESC.
        let mut with_esc = input.clone();
        with_esc.push(0x1b);
        Processor::<NoSyncTimeout>::new().advance(&mut theirs, &with_esc);
        assert_eq!(ours, theirs, "input {input:?}");
    }
}

#[test]
fn rep_matches_vte() {
    for seq in [
        &b"\x1b[b"[..],
        b"\x1b[0b",
        b"\x1b[3b",
        b"\x1b[2;5b",
        b"\x1b[2:7b",
        b"\x1b[?3b",
        b"\x1b[3 b",
        b"\x1b[2\nb",
    ] {
        let mut ours = term(10, 3);
        feed(&mut ours, b"x");
        feed(&mut ours, seq);
        let mut theirs = Screen::new(10, 3, TermConfig::default());
        let mut p = Processor::<NoSyncTimeout>::new();
        p.advance(&mut theirs, b"x");
        p.advance(&mut theirs, seq);
        assert_eq!(ours.screen.grid(), theirs.grid(), "{seq:?}");
        assert_eq!(ours.screen.cursor, theirs.cursor, "{seq:?}");
    }
}

/// `csi_fast` replaces vte for SGR, CUP and EL; it must agree with vte on
/// any parameters, including odd ones (subparameters, overflow, too many).
#[test]
fn fast_csi_matches_vte() {
    let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
    const PARTS: &[&str] = &[
        "0",
        "1",
        "2",
        "3",
        "4",
        "5",
        "7",
        "9",
        "22",
        "24",
        "31",
        "38",
        "48",
        "58",
        "59",
        "39",
        "49",
        "97",
        "107",
        "2",
        "5",
        "255",
        "256",
        "70000",
        "",
        ";",
        ";",
        ":",
        ":",
        "38;2;1;2;3",
        "38:2::1:2:3",
        "48:5:9",
        "4:3",
    ];
    for _ in 0..5000 {
        let mut body = String::new();
        for _ in 0..(next() % 12) {
            body.push_str(PARTS[(next() % PARTS.len() as u64) as usize]);
            if next() % 2 == 0 {
                body.push(';');
            }
        }
        if next() % 50 == 0 {
            body = ";".repeat(30 + (next() % 5) as usize);
        }
        let fin = ["m", "m", "m", "H", "f", "K"][(next() % 6) as usize];
        let seq = format!("\x1b[{body}{fin}");
        let mut start = Screen::new(12, 5, TermConfig::default());
        start.text(b"abcdefghijkl\r\nmnopq\x1b");
        start.cursor.col = 3;
        start.cursor.row = 1;
        let mut ours = start.clone();
        let handled = csi_fast::try_dispatch(&mut ours, seq.as_bytes());
        let mut theirs = start.clone();
        Processor::<NoSyncTimeout>::new().advance(&mut theirs, seq.as_bytes());
        if handled {
            assert_eq!(ours, theirs, "{seq:?}");
        } else {
            assert_eq!(
                ours, start,
                "declined sequences must leave the screen alone: {seq:?}"
            );
        }
    }
}

#[test]
fn marks_on_trailing_blanks_survive_redraw_and_capture() {
    let mut t = term(6, 2);
    feed(&mut t, "a\x1b[2C\u{301}".as_bytes());
    assert_eq!(screen(&t)[0], "a  \u{301}");
    let mut u = term(6, 2);
    feed(&mut u, &t.redraw(6, 2));
    assert_eq!(u.visible_text(), t.visible_text());
}

#[test]
fn damaged_snapshot_is_repaired_not_panicking() {
    let mut t = term(10, 4);
    feed(&mut t, b"hello\r\nworld\x1b[2;5r");
    let mut v: serde_json::Value = serde_json::to_value(&t).unwrap();
    let screen = &mut v["screen"];
    screen["cols"] = serde_json::json!(25);
    screen["cursor"]["row"] = serde_json::json!(1000);
    screen["main"]["rows"] = serde_json::json!([]);
    screen["tabs"] = serde_json::json!([]);
    screen["scroll_bottom"] = serde_json::json!(99);
    let mut u: Terminal = serde_json::from_value(v).unwrap();
    feed(&mut u, b"\x1b[Hxyz\tq\r\n\n\n\n\x1b[99;99Hend");
    assert_eq!(u.size(), (25, 4));
    assert_eq!(u.visible_text().len(), 4);
}

/// Found by cargo-fuzz: a combining mark on the last column while a wrap is
/// pending was lost by redraw's re-print of that cell.
#[test]
fn regression_fuzz_mark_on_pending_wrap_cell() {
    let mut t = term(10, 1);
    feed(&mut t, b"\t\xff\xff\xd8\x95");
    let mut u = term(10, 1);
    feed(&mut u, &t.redraw(10, 1));
    assert_eq!(u.visible_text(), t.visible_text());
}

#[test]
fn inject_history_wide_chars_and_no_style_leak() {
    let mut t = term(10, 2);
    t.inject_history(&["中文字".into(), "\x1b[31mred".into(), "plain".into()]);
    let cap = t.capture(&CaptureOptions {
        start: Some(-3),
        end: Some(-1),
        escapes: true,
        join: false,
    });
    assert_eq!(cap.lines, ["中文字", "\x1b[0;31mred\x1b[0m", "plain"]);
}

#[test]
fn osc_payload_controls_are_ignored_like_vte() {
    let mut t = term(10, 2);
    feed(&mut t, b"\x1b]7;file://h/tm\np\x07\x1b]133;\nD;\t3\x07");
    assert_eq!(t.cwd(), Some("/tmp"));
    assert_eq!(
        t.take_events()[1],
        TermEvent::CommandFinished { exit: Some(3) }
    );
}

const LINKED: &[u8] = b"\x1b]8;id=a;https://example.com/\x1b\\link\x1b]8;;\x1b\\ \
\x1b[4:3;58;5;200mcurly\x1b[0m \x1b]8;;file:///x\x07\xe4\xbd\xa0\x1b[58;2;1;2;3mz\x1b[m";

#[test]
fn hyperlinks_and_underline_colours_survive_redraw() {
    let mut t = term(30, 4);
    feed(&mut t, LINKED);
    let want = with_sgr(&t);
    assert!(want[0].contains("\x1b]8;id=a;https://example.com/\x1b\\link"));
    assert!(want[0].contains("58;5;200mcurly"));
    // The link is still open at the cursor: the redraw must leave the
    // client's pen inside it, so what the program prints next is linked.
    let mut client = term(30, 4);
    feed(&mut client, &t.redraw(30, 4));
    feed(&mut t, b"!");
    feed(&mut client, b"!");
    assert_eq!(with_sgr(&client), with_sgr(&t));
    assert!(with_sgr(&t)[0].contains("\x1b]8;;file:///x\x1b\\\u{4f60}"));
}

#[test]
fn extras_follow_cells_into_scrollback_and_back() {
    let mut t = term(30, 3);
    feed(&mut t, LINKED);
    feed(&mut t, b"\r\n1\r\n2\r\n3");
    assert_eq!(t.scrollback_len(), 1);
    let history = t
        .capture(&CaptureOptions {
            start: Some(-1),
            end: Some(-1),
            escapes: true,
            join: false,
        })
        .lines;
    let mut fresh = term(30, 3);
    feed(&mut fresh, LINKED);
    assert_eq!(history[0], with_sgr(&fresh)[0]);
    // Serde keeps them, in the grid and in history.
    let json = serde_json::to_string(&t).unwrap();
    let back: Terminal = serde_json::from_str(&json).unwrap();
    assert_eq!(back, t);
    // Growing the screen pulls the line back with its extras.
    t.resize(30, 4);
    assert_eq!(with_sgr(&t)[0], with_sgr(&fresh)[0]);
}

#[test]
fn erasing_or_overwriting_drops_extras() {
    let mut t = term(20, 2);
    feed(&mut t, b"\x1b]8;;https://x\x1b\\abcd\x1b]8;;\x1b\\");
    feed(&mut t, b"\x1b[1;2HZ\x1b[1;4H\x1b[K");
    assert_eq!(
        with_sgr(&t)[0],
        "\x1b]8;;https://x\x1b\\a\x1b]8;;\x1b\\Z\x1b]8;;https://x\x1b\\c\x1b]8;;\x1b\\"
    );
    feed(&mut t, b"\x1b[2J");
    let json = serde_json::to_string(&t).unwrap();
    assert!(!json.contains("https://x"), "{json}");
}

#[test]
fn extras_are_bounded() {
    let mut t = term(10, 2);
    // A link longer than MAX_LINK is not kept (still forwarded).
    let long = format!("\x1b]8;;https://{}\x1b\\x", "a".repeat(cell::MAX_LINK));
    let fwd = feed(&mut t, long.as_bytes());
    assert_eq!(fwd, long.as_bytes());
    assert!(!with_sgr(&t)[0].contains("]8;"));
    // Thousands of distinct links over the same cells: the row's table
    // keeps only a bounded number of them.
    for i in 0..5000 {
        feed(&mut t, format!("\x1b[2;1H\x1b]8;;u{i}\x1b\\x").as_bytes());
    }
    let json = serde_json::to_string(&t).unwrap();
    assert!(json.len() < 4000, "{} bytes", json.len());
}

#[test]
fn join_keeps_blanks_at_the_joint_with_escapes() {
    let mut t = term(10, 3);
    feed(
        &mut t,
        b"\x1b[31mabcd efgh\x1b[m \x1b]8;;u\x1b\\ijkl\x1b]8;;\x1b\\",
    );
    let cap = t.capture(&CaptureOptions {
        escapes: true,
        join: true,
        ..Default::default()
    });
    assert_eq!(
        cap.lines[0],
        "\x1b[0;31mabcd efgh\x1b[0m \x1b]8;;u\x1b\\ijkl\x1b]8;;\x1b\\"
    );
    assert_eq!(cap.wrapped, vec![false, false]);
    let plain = t.capture(&CaptureOptions::default());
    assert_eq!(plain.lines, vec!["abcd efgh", "ijkl", ""]);
    assert_eq!(plain.wrapped, vec![true, false, false]);
}

/// `feed` decodes text and SGR/CUP/EL straight from the input and hands
/// everything else to the boundary tracker; it must do exactly what the
/// tracker alone does, on any input cut at any points.
#[test]
fn fast_path_matches_general_path() {
    let mut next = xorshift(0x1234_5678_9abc_def1u64);
    const PARTS: &[&[u8]] = &[
        b"abc",
        b"hello world ",
        b"x",
        b" ",
        b"\r\n",
        b"\n",
        b"\r",
        b"\t",
        b"\x08",
        b"\x07",
        b"\x0e",
        b"\x0f",
        b"\x00",
        b"\x18",
        b"\x1a",
        b"\x7f",
        b"\x85",
        b"\xc3\xa9",
        b"\xe4\xb8\xad",
        b"\xe2\x82",
        b"\xcc\x81",
        b"\x1b[m",
        b"\x1b[0m",
        b"\x1b[1;31m",
        b"\x1b[38;5;200m",
        b"\x1b[38;2;1;2;300m",
        b"\x1b[48;2;1;2;3;4m",
        b"\x1b[38;5m",
        b"\x1b[38m",
        b"\x1b[4:3m",
        b"\x1b[38:2::1:2:3m",
        b"\x1b[4;58;5;200m",
        b"\x1b[58:2::1:2:3m",
        b"\x1b[59m",
        b"\x1b[0;4m",
        b"\x1b]8;id=x;https://example.com/\x1b\\",
        b"\x1b]8;;\x07",
        b"\x1b[;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;;1m",
        b"\x1b[70000;3H",
        b"\x1b[H",
        b"\x1b[2;5f",
        b"\x1b[K",
        b"\x1b[1K",
        b"\x1b[2K",
        b"\x1b[5K",
        b"\x1b[?25l",
        b"\x1b[?1049h",
        b"\x1b[?1049l",
        b"\x1b[4h",
        b"\x1b[4l",
        b"\x1b[?7l",
        b"\x1b[?7h",
        b"\x1b(0",
        b"\x1b(B",
        b"\x1b[2b",
        b"\x1b[c",
        b"\x1b[6n",
        b"\x1b[>q",
        b"\x1b[2;4r",
        b"\x1b[r",
        b"\x1b[1\n2H",
        b"\x1b[3\x1b[m",
        b"\x1b]0;title\x07",
        b"\x1b]11;?\x1b\\",
        b"\x1b]2;a\x1b[1m",
        b"\x1b7",
        b"\x1b8",
        b"\x1bM",
        b"\x1bP1$qm\x1b\\",
        b"\x1b",
        b"\x1b[",
        b"\x1b[1;",
        // Text broken by SGRs overwriting wide characters part-way: the
        // fast path fixes the row's ends once per span, not per word.
        b"\x1b[31mab\x1b[1mc\x1b[0m d",
        b"\x1b[41ma\x1b[42mbc\x1b[43md",
        b"\xe4\xb8\xad\xe4\xb8\xad\xe4\xb8\xad",
        b"\x1b[1;2H",
        b"\x1b[2;4H",
    ];
    // Coloured text over both halves of wide characters: the spans' ends
    // are blanked in the background of the first and of the last pen.
    let fixed: &[&[u8]] = &[
        b"\xe4\xb8\xad\xe4\xb8\xad\xe4\xb8\xad\x1b[1;2H\x1b[41ma\x1b[42mbc\x1b[43md\x1b[44m\r\n",
        b"\xe4\xb8\xad\xe4\xb8\xad\x1b[1;2H\x1b[41ma\x1b[42mb\x1b[43m\xe4\xb8\xad",
    ];
    for input in fixed {
        let mut fast = term(8, 2);
        let mut general = term(8, 2);
        fast.feed(input, &mut Vec::new());
        general.feed_general(input, &mut Vec::new());
        assert_eq!(fast, general, "input {input:?}");
    }
    for _ in 0..4000 {
        let mut input = Vec::new();
        for _ in 0..(next() % 60) {
            input.extend_from_slice(PARTS[(next() % PARTS.len() as u64) as usize]);
        }
        let cols = 1 + (next() % 12) as u16;
        let rows = 1 + (next() % 5) as u16;
        let mut fast = term(cols, rows);
        let mut general = term(cols, rows);
        let (mut fwd_fast, mut fwd_general) = (Vec::new(), Vec::new());
        let mut at = 0;
        while at < input.len() {
            let end = (at + 1 + (next() % 40) as usize).min(input.len());
            fast.feed(&input[at..end], &mut fwd_fast);
            general.feed_general(&input[at..end], &mut fwd_general);
            at = end;
        }
        assert_eq!(fast, general, "input {input:?}");
        assert_eq!(fwd_fast, fwd_general, "input {input:?}");
        assert_eq!(fast.take_replies(), general.take_replies());
        assert_eq!(fast.take_events(), general.take_events());
    }
}

#[test]
fn alternate_grid_is_allocated_only_while_needed() {
    let mut t = term(20, 5);
    feed(&mut t, b"prompt$ ");
    assert!(!t.screen.alt.is_allocated(), "a shell pane has one grid");
    feed(&mut t, b"\x1b[?1049h\x1b[Hvim");
    assert!(t.screen.alt.is_allocated());
    assert_eq!(screen(&t)[0], "vim");
    feed(&mut t, b"\x1b[?1049l");
    assert!(t.screen.alt.is_allocated(), "kept: 47 may show it again");
    feed(&mut t, b"\x1b[?1047h\x1b[?1047l");
    assert!(!t.screen.alt.is_allocated(), "1047 clears, so frees");
    // A resize while unallocated only changes the size it stands for.
    t.resize(30, 7);
    feed(&mut t, b"\x1b[?47h");
    assert_eq!(t.screen.alt.get().map(|g| g.lines()), Some(7));
    assert_eq!(screen(&t), vec![String::new(); 7]);
    // RIS starts over with one grid.
    feed(&mut t, b"\x1bc");
    assert!(!t.screen.alt.is_allocated());
}

#[test]
fn unallocated_alternate_grid_serializes_as_a_blank_grid() {
    let mut t = term(7, 3);
    feed(&mut t, b"hi");
    let lazy = serde_json::to_string(&t).unwrap();
    // The same terminal with the grid allocated (blank) writes the same
    // bytes: snapshots and upgrade manifests do not change.
    t.screen.alt.get_mut();
    assert_eq!(serde_json::to_string(&t).unwrap(), lazy);
    // Read back, a blank grid not showing is dropped again.
    let back: Terminal = serde_json::from_str(&lazy).unwrap();
    assert!(!back.screen.alt.is_allocated());
    assert!(back == t);
    // One with content, or showing, stays.
    feed(&mut t, b"\x1b[?47hX\x1b[?47l");
    let back: Terminal = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
    assert!(back.screen.alt.is_allocated());
    assert!(back == t);
}

#[test]
fn flat_redraw_shows_the_active_screen_without_switching() {
    let mut t = term(10, 3);
    feed(&mut t, b"main\x1b[?1049h\x1b[2;1Halt");
    let bytes = t.redraw_flat(10, 3);
    assert!(!bytes.windows(7).any(|w| w == b"\x1b[?1049"), "{bytes:?}");
    let mut u = term(10, 3);
    feed(&mut u, &bytes);
    assert_eq!(screen(&u), ["", "alt", ""]);
    assert!(!u.modes().alt_screen);
    assert_eq!(u.cursor(), t.cursor());
    // Switching counts, whether or not the switch shows on a client.
    let before = t.screen_switches();
    feed(&mut t, b"\x1b[?1049l");
    assert_eq!(t.screen_switches(), before + 1);
    feed(&mut t, b"\x1b[?1049l");
    assert_eq!(t.screen_switches(), before + 1, "no change, no switch");
}

#[test]
fn views_of_another_size_are_clipped_or_padded_and_sent_as_changes() {
    let mut t = term(10, 3);
    feed(&mut t, b"0123456789\r\nshort\r\nlast");
    let mut cache = ViewCache::default();
    // Narrower and shorter: clipped, never wrapped.
    let first = t.view_update(6, 2, &mut cache);
    let mut small = term(6, 2);
    feed(&mut small, &first);
    assert_eq!(screen(&small), ["012345", "short"]);
    // Wider and taller: padded with blanks.
    let mut big_cache = ViewCache::default();
    let mut big = term(14, 5);
    feed(&mut big, &t.view_update(14, 5, &mut big_cache));
    assert_eq!(screen(&big), ["0123456789", "short", "last", "", ""]);
    assert_eq!(big.cursor(), t.cursor());
    // Next updates carry only the rows that changed.
    feed(&mut t, b"\x1b[2;1Hchanged");
    let update = t.view_update(14, 5, &mut big_cache);
    assert!(
        !update.windows(4).any(|w| w == b"0123"),
        "unchanged row resent"
    );
    feed(&mut big, &update);
    assert_eq!(screen(&big), ["0123456789", "changed", "last", "", ""]);
    assert_eq!(big.cursor(), t.cursor());
    let update = t.view_update(6, 2, &mut cache);
    feed(&mut small, &update);
    assert_eq!(screen(&small), ["012345", "change"]);
    // A mode change redraws in full: the client must drop modes too.
    feed(&mut t, b"\x1b[?2004h");
    feed(&mut big, &t.view_update(14, 5, &mut big_cache));
    assert!(big.modes().bracketed_paste);
    feed(&mut t, b"\x1b[?2004l");
    feed(&mut big, &t.view_update(14, 5, &mut big_cache));
    assert_eq!(big.modes(), t.modes());
}

#[test]
fn history_replay_scrolls_the_newest_lines_into_the_client_history() {
    let mut t = term(10, 3);
    for i in 1..=20 {
        feed(&mut t, format!("line{i}\r\n").as_bytes());
    }
    assert_eq!(t.scrollback_len(), 18);
    let bytes = t.history_replay(5, 1 << 20, 4);
    let mut client = term(10, 4);
    feed(&mut client, b"before\r\n");
    feed(&mut client, &bytes);
    let all = client.capture(&CaptureOptions {
        start: Some(-100),
        ..Default::default()
    });
    let lines: Vec<&str> = all.lines.iter().map(String::as_str).collect();
    assert_eq!(
        lines,
        [
            "before", "line14", "line15", "line16", "line17", "line18", "", "", "", ""
        ],
        "the 5 newest history lines in the client's history, its screen blank"
    );
    assert!(t.history_replay(0, 1 << 20, 4).is_empty());
    // The byte bound keeps the newest lines that fit.
    let few = t.history_replay(18, 40, 4);
    assert!(few.len() < 120, "{}", few.len());
}

#[test]
fn history_lines_are_numbered_from_the_first_line_pushed() {
    let mut t = term(10, 2);
    for i in 1..=6 {
        feed(&mut t, format!("l{i}\r\n").as_bytes());
    }
    // History l1..l5, screen "l6" and the empty cursor row.
    let all = t.history_lines(0, 100, false);
    assert_eq!((all.history_start, all.screen_start, all.first), (0, 5, 0));
    assert_eq!(all.lines, ["l1", "l2", "l3", "l4", "l5", "l6", ""]);
    // A line keeps its number while output arrives.
    feed(&mut t, b"l7\r\n");
    let two = t.history_lines(3, 2, false);
    assert_eq!(
        (two.first, two.lines.clone()),
        (3, vec!["l4".into(), "l5".into()])
    );
    // Clamped to what exists.
    let far = t.history_lines(1000, 5, false);
    assert!(far.lines.is_empty());
}

#[test]
fn printed_lines_show_on_the_screen_as_if_just_output() {
    let mut t = term(10, 3);
    t.print_lines(&[
        "one".into(),
        "\x1b[31mtwo\x1b[0m".into(),
        "three\x07".into(),
        "--- marker".into(),
    ]);
    assert_eq!(screen(&t), ["three", "--- marker", ""]);
    assert_eq!(t.cursor(), (0, 2, true));
    assert_eq!(t.scrollback_len(), 2);
    assert!(with_sgr(&t).iter().all(|l| !l.contains('\x07')));
}

/// The encoding without history lines, decoded, with the lines put back
/// from their numbers (`history_numbering`, `history_line_bytes`: what the
/// history log stores), is the terminal, whatever it went through: output
/// scrolling (lines evicted by the bound), ED 3, reflowing and growing
/// resizes (which take lines back), RIS, the alternate screen, injected
/// history, a decode (a fresh history).
#[test]
fn history_lines_put_back_make_the_same_terminal() {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut below = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let config = TermConfig {
        scrollback_lines: 200,
        ..TermConfig::default()
    };
    let mut t = Terminal::new(30, 6, config);
    // Blocks of a few lines: most of the history is compressed.
    t.set_history_block_bytes(150);
    let mut n = 0;
    let mut longest = 0;
    for step in 0..300 {
        match below(100) {
            0..60 => {
                let mut out = String::new();
                for _ in 0..=below(40) {
                    n += 1;
                    let width = below(70) as usize;
                    match below(4) {
                        0 => out.push_str(&format!("\x1b[3{}m{n}\x1b[0m é", below(8))),
                        1 => out.push_str(&format!("\x1b]8;;http://x/{n}\x07{n}\x1b]8;;\x07")),
                        _ => out.push_str(&n.to_string()),
                    }
                    out.push_str(&"y".repeat(width));
                    out.push_str("\r\n");
                }
                feed(&mut t, out.as_bytes());
            }
            60..66 => {
                feed(&mut t, b"\x1b[3J");
            }
            66..76 => {
                let (cols, rows) = (20 + below(30) as u16, 3 + below(8) as u16);
                t.resize(cols, rows);
            }
            76..79 => {
                feed(&mut t, b"\x1bc");
            }
            79..84 => {
                feed(
                    &mut t,
                    b"\x1b[?1049hon alt\r\n\r\n\r\n\r\n\r\n\r\n\r\n\x1b[?1049l",
                );
            }
            84..88 => t.inject_history(&[format!("injected {step}"), "more".into()]),
            88..92 => {
                t = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
                t.set_history_block_bytes(150);
            }
            _ => {}
        }
        let plain = serde_json::to_string(&t).unwrap();
        let without = t.to_json_without_history().unwrap();
        assert!(without.get().contains("\"lines\":[]"), "step {step}");
        let mut back: Terminal = serde_json::from_str(without.get()).unwrap();
        let (_, oldest, pushed) = t.history_numbering().unwrap();
        let lines = (oldest..pushed)
            .map(|n| Line::from_stored(&t.history_line_bytes(n).unwrap()).unwrap())
            .collect();
        back.restore_history(Vec::new(), lines);
        // Both decoded: a decode starts the grids' row rings at 0. Blocks
        // are cut where the pushes cut them, so the lines are compared,
        // and the rest without them.
        let decoded: Terminal = serde_json::from_str(&plain).unwrap();
        assert_eq!(
            back.to_json_without_history().unwrap().get(),
            decoded.to_json_without_history().unwrap().get(),
            "step {step}"
        );
        let all = |t: &Terminal| t.history_lines(0, usize::MAX, true);
        assert_eq!(all(&back), all(&decoded), "step {step}");
        assert_eq!(all(&back), all(&t), "step {step}");
        // As the history log keeps them: the blocks as records, the hot
        // lines by number. The blocks come back as they were cut.
        let (blocks, hot) = t.history_blocks();
        let records = blocks
            .map(|b| crate::term::RecordIn {
                bytes: Some([&b.header[..], &b.z().unwrap()].concat()),
                lines: b.lines,
                skip: b.skip,
            })
            .collect();
        let hot = (pushed - hot as u64..pushed)
            .map(|n| Line::from_stored(&t.history_line_bytes(n).unwrap()).unwrap())
            .collect();
        let mut from_blocks: Terminal = serde_json::from_str(without.get()).unwrap();
        from_blocks.restore_history(records, hot);
        assert_eq!(
            serde_json::to_string(&from_blocks).unwrap(),
            serde_json::to_string(&decoded).unwrap(),
            "step {step}"
        );
        assert_eq!(all(&from_blocks), all(&t), "step {step}");
        longest = longest.max(t.scrollback_len());
    }
    // The bound was reached: lines were evicted under the cache.
    assert_eq!(longest, 200);
}

/// Work done (cells written or moved, loop steps: `screen::WORK`) by
/// feeding `input` to `t`.
fn work_of(t: &mut Terminal, input: &[u8]) -> u64 {
    let before = screen::WORK.with(|w| w.get());
    feed(t, input);
    screen::WORK.with(|w| w.get()) - before
}

/// No sequence costs more than a few screenfuls of work however large its
/// count: REP, ICH, DCH, IL, DL, ECH, SU, SD, CUF, CUB, CHT, CBT, DECIC,
/// DECDC, SL, SR, the rectangle operations, in and out of margins, at
/// the largest count a parameter can hold. Before the bound REP alone drew
/// 65535 cells for `a\e[999999999b`.
#[test]
fn huge_counts_do_bounded_work() {
    let (cols, rows) = (80u16, 25u16);
    let screen = u64::from(cols) * u64::from(rows);
    let counts: [&[u8]; 2] = [b"999999999", b"65535"];
    let finals: [&[u8]; 17] = [
        b"b", b"@", b"P", b"L", b"M", b"X", b"S", b"T", b"C", b"D", b"I", b"Z", b"'}", b"'~",
        b" @", b" A", b"E",
    ];
    let setups: [&[u8]; 4] = [
        b"",
        b"\x1b[5;20r\x1b[10;10H",
        b"\x1b[?69h\x1b[10;40s\x1b[5;20r\x1b[10;15H",
        b"\x1b[?7l\x1b[?45h\x1b[?1045h\x1b[?7h\x1b[25;80H",
    ];
    for setup in setups {
        for count in counts {
            for fin in finals {
                let mut t = term(cols, rows);
                feed(&mut t, setup);
                feed(&mut t, b"abc");
                let mut seq = b"\x1b[".to_vec();
                seq.extend_from_slice(count);
                seq.extend_from_slice(fin);
                let work = work_of(&mut t, &seq);
                assert!(
                    work <= 3 * screen,
                    "{} after {} did {work} units of work",
                    String::from_utf8_lossy(&seq).escape_debug(),
                    String::from_utf8_lossy(setup).escape_debug()
                );
            }
        }
    }
    // The rectangle operations and DECRQCRA on the whole screen (and past
    // it) touch each cell once.
    for seq in [
        &b"\x1b[88;1;1;65535;65535$x"[..],
        b"\x1b[1;1;65535;65535$z",
        b"\x1b[1;1;65535;65535${",
        b"\x1b[1;1;65535;65535;1;1;1$v",
        b"\x1b[1;1;65535;65535;1;4;5;7$r",
        b"\x1b[1;1;65535;65535;1;4;5;7$t",
        b"\x1b[1;1;1;1;65535;65535*y",
        b"\x1b[?2J",
    ] {
        let mut t = term(cols, rows);
        let work = work_of(&mut t, seq);
        assert!(work <= 2 * screen, "{seq:?} did {work} units of work");
    }
}

/// REP repeats as printing does, wrapping inside the margins, and a huge
/// count leaves the screen and cursor exactly as the full count would.
#[test]
fn rep_with_a_huge_count_ends_where_the_full_count_would() {
    for (count, setup) in [
        (7_000u32, &b""[..]),
        (65_535, b"\x1b[3;5r\x1b[?69h\x1b[3;9s\x1b[4;4H"),
    ] {
        let mut bounded = term(12, 6);
        feed(&mut bounded, setup);
        feed(&mut bounded, format!("xy\x1b[{count}b").as_bytes());
        let mut full = term(12, 6);
        feed(&mut full, setup);
        feed(&mut full, b"xy");
        for _ in 0..count {
            feed(&mut full, b"y");
        }
        assert_eq!(bounded.visible_text(), full.visible_text(), "count {count}");
        assert_eq!(bounded.cursor(), full.cursor(), "count {count}");
    }
}

/// Pixel sizes are answered only once the server gave the client's cell
/// size; before that the query passes on to the clients.
#[test]
fn pixel_size_reports_need_the_clients_cell_size() {
    let mut t = term(80, 25);
    // Unknown: neither answered nor passed on to the client's terminal,
    // which would answer for its whole window.
    assert_eq!(feed(&mut t, b"\x1b[14t\x1b[15t\x1b[16t"), b"");
    assert!(t.take_replies().is_empty());
    t.set_cell_pixels(Some((9, 18)));
    assert_eq!(feed(&mut t, b"\x1b[14t\x1b[16t"), b"");
    assert_eq!(t.take_replies(), b"\x1b[4;450;720t\x1b[6;18;9t");
    let back: Terminal = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
    assert_eq!(back, t);
}

/// Two clients of different sizes taking turns: vim, in the alternate
/// screen, sets its scroll region at the other client's size; the pane
/// then goes back to the first size and vim exits. tmux 3.3a shows the
/// shell's full screen afterwards (top row `22` of `seq 1 60` and a
/// prompt on 40 rows), not a region left at 24 rows (`38`).
#[test]
fn a_region_set_at_another_size_does_not_outlive_the_alternate_screen() {
    for (at_small, region) in [
        (&b"\x1b[1;24r"[..], "DECSTBM"),
        (b"\x1b[?69h\x1b[1;24r\x1b[5;70s", "DECSTBM+DECSLRM"),
    ] {
        let mut t = term(120, 40);
        feed(&mut t, b"\x1b[?1049h\x1b[1;40r");
        t.resize(80, 24);
        feed(&mut t, at_small);
        t.resize(120, 40);
        feed(&mut t, b"\x1b[?1049l\x1b[H\x1b[2J");
        for i in 1..=60 {
            feed(&mut t, format!("{i}\r\n").as_bytes());
        }
        feed(&mut t, b"$ ");
        let s = screen(&t);
        assert_eq!(
            (s[0].as_str(), s[39].as_str()),
            ("22", "$"),
            "{region}: {s:?}"
        );
    }
}
