//! The colour OSCs: palette (4, 104), special (5, 105) and dynamic colours
//! (10-19, 110-119), set and queried.

use crate::term::screen::Screen;

/// The special colours OSC 5 numbers 0..=4 (bold, underline, blink,
/// reverse, italic), which OSC 4 reaches past the 256 palette entries.
const SPECIAL_BASE: u16 = 256;
const SPECIAL_COUNT: u16 = 5;
/// `Screen::colors` keys for the dynamic colours OSC 12..=19 (10 and 11
/// are `fg_override` and `bg_override`).
const DYNAMIC_BASE: u16 = 1000;

/// OSC 4, 5, 10..=19 (set or `?` query colours), 104, 105, 110..=119
/// (reset them): the model keeps what a program set and answers queries
/// from it. A sequence with a query is answered here and not forwarded; one
/// that only sets or resets goes on to the clients, which draw the colours.
pub(super) fn osc_colors(s: &mut Screen, seq: &[u8]) -> bool {
    let Some(body) = seq.strip_prefix(b"\x1b]") else {
        return false;
    };
    let (body, term): (&[u8], &[u8]) = if let Some(b) = body.strip_suffix(b"\x1b\\") {
        (b, b"\x1b\\")
    } else if let Some(b) = body.strip_suffix(b"\x07") {
        (b, b"\x07")
    } else {
        return false;
    };
    let Ok(body) = std::str::from_utf8(body) else {
        return false;
    };
    let mut parts = body.split(';');
    let Some(Ok(cmd)) = parts.next().map(str::parse::<u16>) else {
        return false;
    };
    let args: Vec<&str> = parts.collect();
    let mut replies: Vec<u8> = Vec::new();
    let answer = |replies: &mut Vec<u8>, prefix: String, rgb: (u8, u8, u8)| {
        replies.extend_from_slice(&crate::term::queries::color_report(
            &prefix,
            rgb,
            std::str::from_utf8(term).unwrap_or("\x1b\\"),
        ));
    };
    match cmd {
        4 | 5 => {
            for pair in args.chunks(2) {
                let [c, spec] = pair else { break };
                let Ok(c) = c.parse::<u16>() else { break };
                let key = if cmd == 5 {
                    c.checked_add(SPECIAL_BASE)
                } else {
                    Some(c)
                };
                let Some(key) = key.filter(|&k| k < SPECIAL_BASE + SPECIAL_COUNT) else {
                    break;
                };
                if *spec == "?" {
                    let rgb = s.color(key);
                    answer(&mut replies, format!("{cmd};{c}"), rgb);
                } else if let Some(rgb) = parse_color(spec) {
                    s.set_color_key(key, Some(rgb));
                }
            }
        }
        10..=19 => {
            for (n, spec) in (cmd..=19).zip(args) {
                if spec == "?" {
                    let rgb = s.dynamic_color(n);
                    answer(&mut replies, format!("{n}"), rgb);
                } else if let Some(rgb) = parse_color(spec) {
                    s.set_dynamic_color(n, Some(rgb));
                }
            }
        }
        104 | 105 => {
            let base = if cmd == 104 { 0 } else { SPECIAL_BASE };
            let all = if cmd == 104 {
                0..SPECIAL_BASE
            } else {
                SPECIAL_BASE..SPECIAL_BASE + SPECIAL_COUNT
            };
            let given: Vec<u16> = args
                .iter()
                .filter(|a| !a.is_empty())
                .filter_map(|a| a.parse::<u16>().ok()?.checked_add(base))
                .collect();
            if given.is_empty() {
                s.colors.retain(|(k, _)| !all.contains(k));
            } else {
                for k in given {
                    s.set_color_key(k, None);
                }
            }
        }
        110..=119 => s.set_dynamic_color(cmd - 100, None),
        _ => return false,
    }
    if !replies.is_empty() {
        s.reply(&replies);
    }
    true
}

/// A colour as X11 parses it for xterm: `rgb:R/G/B` (1 to 4 hex digits a
/// component, scaled), `#RGB` with 1 to 4 digits a component (the high
/// bits), `rgbi:R/G/B` (intensities 0.0 to 1.0). Named colours and the CIE
/// and TekHVC spaces are not parsed: the colour is left as it was.
fn parse_color(spec: &str) -> Option<(u8, u8, u8)> {
    if let Some(rest) = spec.strip_prefix("rgb:") {
        let mut it = rest.split('/').map(|h| {
            if h.is_empty() || h.len() > 4 {
                return None;
            }
            let v = u32::from_str_radix(h, 16).ok()?;
            let max = (1u32 << (4 * h.len())) - 1;
            Some(((v * 0xffff / max) >> 8) as u8)
        });
        let rgb = (it.next()??, it.next()??, it.next()??);
        return it.next().is_none().then_some(rgb);
    }
    if let Some(rest) = spec.strip_prefix("rgbi:") {
        let mut it = rest.split('/').map(|f| {
            let v: f64 = f.parse().ok()?;
            (0.0..=1.0).contains(&v).then(|| (v * 255.0).round() as u8)
        });
        let rgb = (it.next()??, it.next()??, it.next()??);
        return it.next().is_none().then_some(rgb);
    }
    let hex = spec.strip_prefix('#')?;
    if hex.is_empty()
        || hex.len() % 3 != 0
        || hex.len() > 12
        || !hex.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    let n = hex.len() / 3;
    let comp = |i: usize| {
        let v = u32::from_str_radix(&hex[i * n..(i + 1) * n], 16).ok()?;
        Some(((v << (16 - 4 * n)) >> 8) as u8)
    };
    Some((comp(0)?, comp(1)?, comp(2)?))
}

impl Screen {
    /// Palette entry or special colour `key` (see `SPECIAL_BASE`): what a
    /// program set, else xterm's default (the foreground for the special
    /// colours).
    fn color(&self, key: u16) -> (u8, u8, u8) {
        match self.colors.binary_search_by_key(&key, |(k, _)| *k) {
            Ok(i) => self.colors[i].1,
            Err(_) if key < SPECIAL_BASE => crate::term::queries::palette(key as u8),
            Err(_) => self.dynamic_color(10),
        }
    }

    fn set_color_key(&mut self, key: u16, rgb: Option<(u8, u8, u8)>) {
        match (self.colors.binary_search_by_key(&key, |(k, _)| *k), rgb) {
            (Ok(i), Some(rgb)) => self.colors[i].1 = rgb,
            (Ok(i), None) => {
                self.colors.remove(i);
            }
            (Err(i), Some(rgb)) => self.colors.insert(i, (key, rgb)),
            (Err(_), None) => {}
        }
    }

    /// Dynamic colour `n` (10..=19): what a program set, else the
    /// configured foreground (text, cursor, pointer, Tektronix text and
    /// cursor, highlight text) or background (the others).
    pub fn dynamic_color(&self, n: u16) -> (u8, u8, u8) {
        let fg = self.fg_override.unwrap_or(self.config.foreground);
        let bg = self.bg_override.unwrap_or(self.config.background);
        match n {
            10 => fg,
            11 => bg,
            _ => match self
                .colors
                .binary_search_by_key(&(DYNAMIC_BASE + n), |(k, _)| *k)
            {
                Ok(i) => self.colors[i].1,
                Err(_) if matches!(n, 12 | 13 | 15 | 18 | 19) => fg,
                Err(_) => bg,
            },
        }
    }

    fn set_dynamic_color(&mut self, n: u16, rgb: Option<(u8, u8, u8)>) {
        match n {
            10 => self.fg_override = rgb,
            11 => self.bg_override = rgb,
            12..=19 => self.set_color_key(DYNAMIC_BASE + n, rgb),
            _ => {}
        }
    }
}
