//! No input may panic the model or grow it without bound. Stable Rust has
//! no cargo-fuzz here, so this is a deterministic random-input test: byte
//! soups biased towards escape syntax, extreme parameters, resizes, capture,
//! redraw and serialization in between. (`fuzz/` holds a cargo-fuzz target
//! for nightly.)

use ptyd::term::{CaptureOptions, TermConfig, Terminal};

mod rng;

use rng::Rng;

fn soup(rng: &mut Rng, len: usize) -> Vec<u8> {
    const SYNTAX: &[u8] =
        b"\x1b[]P_^X;:?>=<!$ \"'0123456789\x07\x18\x1a\x9c\\mhlHJKrtuqcnpb@PLMSTXZ";
    const WORDS: &[&[u8]] = &[
        b"\x1b[65535;65535H",
        b"\x1b[65535@",
        b"\x1b[65535P",
        b"\x1b[65535L",
        b"\x1b[65535M",
        b"\x1b[65535S",
        b"\x1b[65535T",
        b"\x1b[65535X",
        b"\x1b[999b",
        b"\x1b[65535I",
        b"\x1b[65535Z",
        b"\x1b[1;65535r",
        b"\x1b[?1049h",
        b"\x1b[?47l",
        b"\x1b[?6h",
        b"\x1b[?7l",
        b"\x1b[4h",
        b"\x1b[>65535u",
        b"\x1b[<65535u",
        b"\x1b#8",
        b"\x1bc",
        "中\u{301}\u{200d}👍🏽".as_bytes(),
        b"\xf0\x9f",
        b"\xed\xa0\x80",
        b"\x1b]8;id=x;https://example.com/\x1b\\",
        b"\x1b]8;;\x07",
        b"\x1b[4;58;5;99m",
        b"\x1b[58:2::1:2:3m",
        b"\x1b[59m",
    ];
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        match rng.below(10) {
            0..=3 => out.push(rng.below(256) as u8),
            4..=7 => out.push(SYNTAX[rng.below(SYNTAX.len() as u64) as usize]),
            _ => out.extend_from_slice(WORDS[rng.below(WORDS.len() as u64) as usize]),
        }
    }
    out
}

#[test]
fn random_input_never_panics() {
    for seed in 1..=150u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let cfg = TermConfig {
            scrollback_lines: 50,
            ..TermConfig::default()
        };
        let mut t = Terminal::new(rng.below(120) as u16, rng.below(40) as u16, cfg);
        let mut fwd = Vec::new();
        for step in 0..40 {
            let len = rng.below(400) as usize;
            t.feed(&soup(&mut rng, len), &mut fwd);
            assert!(t.pending_bytes() <= 64 * 1024 + 16);
            match step % 8 {
                0 => t.resize(rng.below(200) as u16, rng.below(60) as u16),
                1 => {
                    let (c, r) = t.size();
                    let mut u = Terminal::new(c, r, TermConfig::default());
                    u.feed(&t.redraw(c, r), &mut Vec::new());
                    assert!(
                        u.take_replies().is_empty(),
                        "redraw must not contain queries"
                    );
                    assert_eq!(
                        u.visible_text(),
                        t.visible_text(),
                        "redraw must reproduce the screen (seed {seed})"
                    );
                    let styled = CaptureOptions {
                        escapes: true,
                        ..CaptureOptions::default()
                    };
                    assert_eq!(
                        u.capture(&styled).lines,
                        t.capture(&styled).lines,
                        "redraw must reproduce styles and links (seed {seed})"
                    );
                    assert_eq!(
                        u.cursor(),
                        t.cursor(),
                        "redraw must restore the cursor (seed {seed})"
                    );
                    assert_eq!(
                        u.modes(),
                        t.modes(),
                        "redraw must restore the modes (seed {seed})"
                    );
                }
                2 => {
                    let start = rng.below(200) as i64 - 100;
                    let end = rng.below(200) as i64 - 100;
                    let _ = t.capture(&CaptureOptions {
                        start: Some(start),
                        end: Some(end),
                        escapes: seed % 2 == 0,
                        join: false,
                    });
                }
                3 => {
                    let json = serde_json::to_string(&t).unwrap();
                    t = serde_json::from_str(&json).unwrap();
                }
                4 => t.inject_history(&[String::from_utf8_lossy(&soup(&mut rng, 50)).into_owned()]),
                _ => {}
            }
            let _ = t.take_replies();
            let _ = t.take_events();
            let _ = t.redraw(rng.below(300) as u16, rng.below(100) as u16);
            fwd.clear();
        }
        assert!(t.scrollback_len() <= 50);
    }
}

#[test]
fn unterminated_strings_of_every_kind_stay_bounded() {
    for opener in [
        &b"\x1b]0;"[..],
        b"\x1bP1q",
        b"\x1b_G",
        b"\x1b^",
        b"\x1bX",
        b"\x1b[1;2;3",
    ] {
        let mut t = Terminal::new(80, 24, TermConfig::default());
        let mut fwd = Vec::new();
        t.feed(opener, &mut fwd);
        let chunk = vec![b'7'; 1 << 16];
        for _ in 0..40 {
            t.feed(&chunk, &mut fwd);
            assert!(t.pending_bytes() <= 64 * 1024 + 16);
        }
        assert!(fwd.is_empty(), "an oversized sequence is never forwarded");
        t.feed(b"\x07\x1b\\\x1b[mok", &mut fwd);
        assert_eq!(t.visible_text()[0].trim_end(), "ok");
    }
}
