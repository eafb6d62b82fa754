//! Serialization round trip: a terminal serialized and deserialized at any
//! byte offset of a stream (inside escape sequences, strings, UTF-8
//! characters) must end in exactly the state, forwarded bytes, replies and
//! events of one that saw the whole stream in one piece.

use ptyd::term::{TermConfig, TermEvent, Terminal};

mod rng;

use rng::Rng;

/// A stream exercising every parser state, plus queries and invalid bytes.
fn stream(rng: &mut Rng, fragments: usize) -> Vec<u8> {
    const PIECES: &[&[u8]] = &[
        b"hello ",
        "wide 中文 ".as_bytes(),
        "e\u{301}\u{302}".as_bytes(),
        b"\r\n",
        b"\x1b[31;1m",
        b"\x1b[38;2;10;20;30;48;5;100m",
        b"\x1b[0m",
        b"\x1b[5;10H",
        b"\x1b[2J",
        b"\x1b[3b",
        b"\x1b]0;title \xe2\x9c\x93\x07",
        b"\x1b]2;esc-terminated\x1b\\",
        b"\x1b]2;cut-by-csi\x1b[1m",
        b"\x1b]7;file:///tmp\x07",
        b"\x1b]133;D;1\x07",
        b"\x1bP1$r0m\x1b\\",
        b"\x1b_apc payload\x1b\\",
        b"\x1b^pm\x1b\\",
        b"\x1b[c",
        b"\x1b[6n",
        b"\x1b[?2004$p",
        b"\x1b]11;?\x07",
        b"\x1b[>q",
        b"\x1b[?1049h",
        b"\x1b[?1049l",
        b"\x1b[2;5r",
        b"\x1b(0lqk\x1b(B",
        b"\x1b[5\nn",
        b"\x1b[1\x1b[2m",
        b"\x1b[1;2\x18x",
        b"\xff\xfe\xe2\x82",
        b"\xc3",
        b"\x1b",
        b"\x07",
        b"\x1b[>1u\x1b[=3;2u",
        b"\x1b[?1003h\x1b[?1006h",
        b"\x1b[4h ins \x1b[4l",
        b"\x1bM\x1bD\x1bE",
        b"\x1b7\x1b8",
        b"\x1b[22t\x1b[23t",
        // State the conformance work added: margins, reverse wrap, levels,
        // protection, kept modes, colours, icon titles, saved modes.
        b"\x1b[?69h\x1b[3;12s",
        b"\x1b[?69l",
        b"\x1b[?45h\x1b[?1045h\x08\x08",
        b"\x1b[63;1\"p",
        b"\x1b[65;1\"p",
        b"\x1b[1\"qprot\x1b[0\"q\x1b[?2J",
        b"\x1bVguard\x1bW\x1b[2K",
        b"\x1b[2*x\x1b[1;1;3;5;1;7$r",
        b"\x1b[?5h\x1b[?67h\x1b[2h",
        b"\x1b]4;3;rgb:10/20/30\x1b\\\x1b]12;#abc\x07\x1b]5;1;rgb:1/2/3\x07",
        b"\x1b]104;3\x07\x1b]112\x07",
        b"\x1b]1;icon\x07\x1b[22;1t\x1b]2;win\x07\x1b[23;2t",
        b"\x1b[?7;45s\x1b[?7l\x1b[?7;45r",
        b"\x1b[2'}\x1b[1'~\x1b[2 @\x1b[1 A\x1b6\x1b9",
        b"\x1b[42;2;2;4;6$x\x1b[1;1;2;2;4;4$v\x1b[2;2;3;3$z",
        b"\x1b[1;0;1;1;5;5*y\x1b[?6n\x1b[1$w\x1bP$qs\x1b\\",
        b"\x1b[!p",
        b"q\x1b[300b",
    ];
    let mut out = Vec::new();
    for _ in 0..fragments {
        out.extend_from_slice(PIECES[rng.below(PIECES.len() as u64) as usize]);
        if rng.below(4) == 0 {
            for _ in 0..rng.below(30) {
                out.push(b'a' + rng.below(26) as u8);
            }
        }
    }
    out
}

struct Outcome {
    term: Terminal,
    forward: Vec<u8>,
    replies: Vec<u8>,
    events: Vec<TermEvent>,
}

fn run(cols: u16, rows: u16, input: &[u8], cuts: &[usize]) -> Outcome {
    let mut term = Terminal::new(cols, rows, TermConfig::default());
    let (mut forward, mut replies, mut events) = (Vec::new(), Vec::new(), Vec::new());
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        term.feed(&input[at..cut], &mut forward);
        replies.extend(term.take_replies());
        events.extend(term.take_events());
        at = cut;
        if cut < input.len() {
            let json = serde_json::to_string(&term).expect("serialize");
            let back: Terminal = serde_json::from_str(&json).expect("deserialize");
            assert!(
                back == term,
                "state changed by the round trip at byte {cut}"
            );
            term = back;
        }
    }
    Outcome {
        term,
        forward,
        replies,
        events,
    }
}

fn check(cols: u16, rows: u16, input: &[u8], cuts: &[usize]) {
    let whole = run(cols, rows, input, &[]);
    let split = run(cols, rows, input, cuts);
    assert!(
        split.term == whole.term,
        "final state differs, cuts {cuts:?}"
    );
    assert_eq!(
        split.forward, whole.forward,
        "forwarded bytes differ, cuts {cuts:?}"
    );
    assert_eq!(
        split.replies, whole.replies,
        "replies differ, cuts {cuts:?}"
    );
    assert_eq!(split.events, whole.events, "events differ, cuts {cuts:?}");
    assert_eq!(split.term.visible_text(), whole.term.visible_text());
}

#[test]
fn every_single_cut_point() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let input = stream(&mut rng, 60);
    for cut in 0..=input.len() {
        check(20, 6, &input, &[cut]);
    }
}

#[test]
fn many_random_cuts() {
    for seed in 1..=40u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let input = stream(&mut rng, 150);
        let mut cuts: Vec<usize> = (0..20)
            .map(|_| rng.below(input.len() as u64 + 1) as usize)
            .collect();
        cuts.sort_unstable();
        check(30, 8, &input, &cuts);
    }
}

#[test]
fn byte_at_a_time_with_round_trips() {
    let mut rng = Rng(77);
    let input = stream(&mut rng, 25);
    let cuts: Vec<usize> = (1..input.len()).collect();
    check(15, 4, &input, &cuts);
}

#[test]
fn round_trip_inside_an_oversized_string() {
    let mut input = b"ok\x1b]2;".to_vec();
    input.extend(std::iter::repeat_n(b'x', 70_000));
    input.extend_from_slice(b"\x07after");
    check(10, 2, &input, &[10, 65_000, 69_999, 70_006]);
}
