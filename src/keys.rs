//! Key names, as tmux's `send-keys` spells them, turned into the bytes a
//! terminal would send for them to a program in its current modes.
//!
//! Names: a single character (`a`, `é`, `;`), or one of `Enter`, `Escape`
//! (`Esc`), `Tab`, `BTab`, `Space`, `BSpace`, `Up`, `Down`, `Left`, `Right`,
//! `Home`, `End`, `PageUp` (`PgUp`, `PPage`), `PageDown` (`PgDn`, `NPage`),
//! `Insert` (`IC`), `Delete` (`DC`), `F1`..`F12`; with any of the prefixes
//! `C-` (control), `M-` (meta/alt), `S-` (shift), e.g. `C-c`, `M-Enter`,
//! `C-S-Up`; `^c` is `C-c`. Unlike tmux, a name that is not a key is an
//! error rather than typed as text: a typo must not reach a program.
//!
//! Encoding follows xterm: application cursor keys (DECCKM) turn `Up` into
//! `ESC O A`; modified cursor and function keys carry a `;m` parameter; Meta
//! prefixes ESC. When the program enabled the kitty keyboard protocol
//! (flags from `CSI > flags u`), ambiguous keys use its `CSI code;mods u`
//! form: with "disambiguate" (1) Escape and modified characters, with
//! "report all keys as escape codes" (8) every key.

use crate::term::Modes;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    Enter,
    Escape,
    Tab,
    /// Shift-Tab.
    BTab,
    Space,
    BSpace,
    Up,
    Down,
    Left,
    Right,
    Home,
    End,
    PageUp,
    PageDown,
    Insert,
    Delete,
    F(u8),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    Char(char),
    Named(Named),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mods {
    pub ctrl: bool,
    pub meta: bool,
    pub shift: bool,
}

impl Mods {
    fn any(self) -> bool {
        self.ctrl || self.meta || self.shift
    }

    /// xterm's and kitty's modifier parameter: 1 + bits.
    fn param(self) -> u8 {
        1 + u8::from(self.shift) + 2 * u8::from(self.meta) + 4 * u8::from(self.ctrl)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub code: Code,
    pub mods: Mods,
}

/// What the encoder needs of a pane's modes.
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyModes {
    pub app_cursor: bool,
    pub kitty_flags: u8,
}

impl KeyModes {
    pub fn of(modes: &Modes) -> KeyModes {
        KeyModes {
            app_cursor: modes.app_cursor_keys,
            kitty_flags: modes.kitty_flags(),
        }
    }
}

const KITTY_DISAMBIGUATE: u8 = 1;
const KITTY_ALL_AS_ESCAPES: u8 = 8;

fn named(name: &str) -> Option<Named> {
    use Named::*;
    let lower = name.to_ascii_lowercase();
    Some(match lower.as_str() {
        "enter" | "cr" | "return" => Enter,
        "escape" | "esc" => Escape,
        "tab" => Tab,
        "btab" => BTab,
        "space" => Space,
        "bspace" | "backspace" => BSpace,
        "up" => Up,
        "down" => Down,
        "left" => Left,
        "right" => Right,
        "home" => Home,
        "end" => End,
        "pageup" | "pgup" | "ppage" => PageUp,
        "pagedown" | "pgdn" | "npage" => PageDown,
        "insert" | "ic" => Insert,
        "delete" | "dc" => Delete,
        f if f.starts_with('f') => match f[1..].parse::<u8>() {
            Ok(n @ 1..=12) => F(n),
            _ => return None,
        },
        _ => return None,
    })
}

/// Parses one key name.
pub fn parse(name: &str) -> Result<Key, String> {
    let mut mods = Mods::default();
    let mut rest = name;
    if let Some(c) = rest.strip_prefix('^')
        && c.chars().count() == 1
    {
        mods.ctrl = true;
        rest = c;
    }
    // `get` is `None` inside a multi-byte character: no prefix there.
    while let Some(prefix) = rest.get(..2) {
        match prefix {
            "C-" | "c-" => mods.ctrl = true,
            "M-" | "m-" => mods.meta = true,
            "S-" | "s-" => mods.shift = true,
            _ => break,
        }
        rest = &rest[2..];
    }
    let mut chars = rest.chars();
    let code = match (chars.next(), chars.next()) {
        (Some(c), None) => Code::Char(c),
        _ => Code::Named(named(rest).ok_or_else(|| {
            format!(
                "unknown key {name:?}: use a character or a name like Enter, Escape, Tab, BSpace, Up, PageDown, F5, with C-, M-, S- prefixes (e.g. C-c); send text as TEXT instead"
            )
        })?),
    };
    Ok(Key { code, mods })
}

/// The bytes for `key` in `modes`. `None` for a combination no terminal
/// can send (e.g. `C-é` without the kitty protocol).
pub fn encode(key: Key, modes: KeyModes) -> Option<Vec<u8>> {
    let kitty = modes.kitty_flags;
    match key.code {
        Code::Char(c) => encode_char(c, key.mods, kitty),
        Code::Named(n) => Some(encode_named(n, key.mods, modes)),
    }
}

fn csi_u(code: u32, mods: Mods) -> Vec<u8> {
    if mods.any() {
        format!("\x1b[{code};{}u", mods.param()).into_bytes()
    } else {
        format!("\x1b[{code}u").into_bytes()
    }
}

fn encode_char(c: char, mods: Mods, kitty: u8) -> Option<Vec<u8>> {
    let all = kitty & KITTY_ALL_AS_ESCAPES != 0;
    if all || (kitty & KITTY_DISAMBIGUATE != 0 && (mods.ctrl || mods.meta)) {
        // kitty reports the unshifted key with the shift modifier.
        let base = if mods.shift {
            c.to_lowercase().next()?
        } else {
            c
        };
        return Some(csi_u(base as u32, mods));
    }
    let c = if mods.shift {
        c.to_uppercase().next()?
    } else {
        c
    };
    let mut out = Vec::new();
    if mods.meta {
        out.push(0x1b);
    }
    if mods.ctrl {
        let b = match c {
            'a'..='z' | 'A'..='Z' => (c.to_ascii_lowercase() as u8) & 0x1f,
            '@' | ' ' | '2' => 0,
            '[' | '3' => 0x1b,
            '\\' | '4' => 0x1c,
            ']' | '5' => 0x1d,
            '^' | '~' | '6' => 0x1e,
            '_' | '-' | '7' | '/' => 0x1f,
            '?' | '8' => 0x7f,
            _ => return None,
        };
        out.push(b);
    } else {
        let mut buf = [0u8; 4];
        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
    }
    Some(out)
}

fn encode_named(n: Named, mods: Mods, modes: KeyModes) -> Vec<u8> {
    use Named::*;
    let kitty = modes.kitty_flags;
    let all = kitty & KITTY_ALL_AS_ESCAPES != 0;
    let disambiguate = kitty & KITTY_DISAMBIGUATE != 0;
    // Keys with a C0 byte: legacy unless the kitty protocol asks otherwise.
    let c0 = match n {
        Enter => Some((13u32, b'\r')),
        Tab => Some((9, b'\t')),
        BSpace => Some((127, 0x7f)),
        Escape => Some((27, 0x1b)),
        Space => Some((32, b' ')),
        _ => None,
    };
    if let Some((code, byte)) = c0 {
        if all || (disambiguate && (n == Escape || mods.any())) {
            return csi_u(code, mods);
        }
        let mut out = Vec::new();
        if mods.meta {
            out.push(0x1b);
        }
        out.push(match (n, mods.ctrl) {
            (Space, true) => 0,
            (BSpace, true) => 0x08,
            _ => byte,
        });
        if n == Tab && mods.shift {
            return b"\x1b[Z".to_vec();
        }
        return out;
    }
    if n == BTab {
        return b"\x1b[Z".to_vec();
    }
    // `CSI 1 ; m X` / `SS3 X` letters, and `CSI n ; m ~` numbers.
    let letter = match n {
        Up => Some(b'A'),
        Down => Some(b'B'),
        Right => Some(b'C'),
        Left => Some(b'D'),
        Home => Some(b'H'),
        End => Some(b'F'),
        F(1) => Some(b'P'),
        F(2) => Some(b'Q'),
        F(3) => Some(b'R'),
        F(4) => Some(b'S'),
        _ => None,
    };
    if let Some(l) = letter {
        let is_f = matches!(n, F(_));
        return if mods.any() {
            format!("\x1b[1;{}{}", mods.param(), l as char).into_bytes()
        } else if is_f || modes.app_cursor {
            vec![0x1b, b'O', l]
        } else {
            vec![0x1b, b'[', l]
        };
    }
    let number = match n {
        Insert => 2,
        Delete => 3,
        PageUp => 5,
        PageDown => 6,
        F(5) => 15,
        F(6) => 17,
        F(7) => 18,
        F(8) => 19,
        F(9) => 20,
        F(10) => 21,
        F(11) => 23,
        F(12) => 24,
        _ => unreachable!("every other named key is handled above"),
    };
    if mods.any() {
        format!("\x1b[{number};{}~", mods.param()).into_bytes()
    } else {
        format!("\x1b[{number}~").into_bytes()
    }
}

/// Parses and encodes a list of key names, failing on the first bad one.
pub fn encode_all(names: &[String], modes: KeyModes) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for name in names {
        let key = parse(name)?;
        let bytes = encode(key, modes).ok_or_else(|| {
            format!(
                "key {name:?} has no encoding a terminal could send in the pane's current modes"
            )
        })?;
        out.extend(bytes);
    }
    Ok(out)
}

/// Bracketed paste: the end marker is removed from the text first, so the
/// text cannot end the paste early and have the rest run as typed keys.
/// The detach key's spelling (`C-\\`, `^\\`, `C-a`, `^A`) to its control
/// byte: the attach client's `--detach-key` and the config's `detach_key`.
pub fn parse_detach_key(spec: &str) -> Result<u8, String> {
    let rest = spec
        .strip_prefix("C-")
        .or_else(|| spec.strip_prefix("^"))
        .unwrap_or("");
    match rest.as_bytes() {
        [c] if (0x40..0x80).contains(&c.to_ascii_uppercase()) => Ok(c.to_ascii_uppercase() & 0x1f),
        _ => Err(format!(
            "detach key {spec:?} not understood; use the form C-x or ^x, e.g. C-\\ or C-a"
        )),
    }
}

pub fn bracketed_paste(text: &[u8]) -> Vec<u8> {
    const END: &[u8] = b"\x1b[201~";
    let mut out = b"\x1b[200~".to_vec();
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(END) {
            i += END.len();
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out.extend_from_slice(END);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(name: &str, modes: KeyModes) -> Vec<u8> {
        encode(parse(name).unwrap(), modes).unwrap()
    }

    const PLAIN: KeyModes = KeyModes {
        app_cursor: false,
        kitty_flags: 0,
    };

    #[test]
    fn control_and_meta_characters() {
        assert_eq!(enc("C-c", PLAIN), b"\x03");
        assert_eq!(enc("^C", PLAIN), b"\x03");
        assert_eq!(enc("C-[", PLAIN), b"\x1b");
        assert_eq!(enc("C-Space", PLAIN), b"\x00");
        assert_eq!(enc("M-x", PLAIN), b"\x1bx");
        assert_eq!(enc("C-M-a", PLAIN), b"\x1b\x01");
        assert_eq!(enc("S-a", PLAIN), b"A");
        assert_eq!(enc("é", PLAIN), "é".as_bytes());
        assert_eq!(enc("-", PLAIN), b"-");
        assert_eq!(enc("C--", PLAIN), b"\x1f");
        assert_eq!(encode(parse("C-é").unwrap(), PLAIN), None);
    }

    #[test]
    fn named_keys_in_normal_and_application_cursor_mode() {
        assert_eq!(enc("Enter", PLAIN), b"\r");
        assert_eq!(enc("Escape", PLAIN), b"\x1b");
        assert_eq!(enc("BSpace", PLAIN), b"\x7f");
        assert_eq!(enc("BTab", PLAIN), b"\x1b[Z");
        assert_eq!(enc("Up", PLAIN), b"\x1b[A");
        let app = KeyModes {
            app_cursor: true,
            kitty_flags: 0,
        };
        assert_eq!(enc("Up", app), b"\x1bOA");
        assert_eq!(enc("Home", app), b"\x1bOH");
        assert_eq!(enc("C-Up", app), b"\x1b[1;5A");
        assert_eq!(enc("F1", PLAIN), b"\x1bOP");
        assert_eq!(enc("S-F3", PLAIN), b"\x1b[1;2R");
        assert_eq!(enc("F5", PLAIN), b"\x1b[15~");
        assert_eq!(enc("C-F12", PLAIN), b"\x1b[24;5~");
        assert_eq!(enc("PgDn", PLAIN), b"\x1b[6~");
        assert_eq!(enc("M-Delete", PLAIN), b"\x1b[3;3~");
    }

    #[test]
    fn kitty_flags_change_ambiguous_keys() {
        let k1 = KeyModes {
            app_cursor: false,
            kitty_flags: 1,
        };
        assert_eq!(enc("Escape", k1), b"\x1b[27u");
        assert_eq!(enc("C-c", k1), b"\x1b[99;5u");
        assert_eq!(enc("M-x", k1), b"\x1b[120;3u");
        assert_eq!(enc("Enter", k1), b"\r");
        assert_eq!(enc("a", k1), b"a");
        let k8 = KeyModes {
            app_cursor: false,
            kitty_flags: 1 | 8,
        };
        assert_eq!(enc("Enter", k8), b"\x1b[13u");
        assert_eq!(enc("a", k8), b"\x1b[97u");
        assert_eq!(enc("S-a", k8), b"\x1b[97;2u");
    }

    #[test]
    fn unknown_names_are_errors() {
        for bad in ["Entr", "F13", "C-", "Hyper-x", ""] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
        assert!(encode_all(&["C-c".into(), "nope".into()], PLAIN).is_err());
    }

    #[test]
    fn a_paste_cannot_end_itself_early() {
        assert_eq!(
            bracketed_paste(b"a\x1b[201~rm -rf\n"),
            b"\x1b[200~arm -rf\n\x1b[201~"
        );
    }
}
