//! The DEC and xterm sequences vte's `ansi` layer does not decode, or
//! decodes without what the model needs (a private marker, a second
//! parameter, the cursor's page): reports that read the model back
//! (DECRQCRA, DECXCPR and the other DSRs, DECRQM, DECRQSS, DECRQPSR, DA3,
//! XTWINOPS), left/right margins (DECSLRM), rectangular operations (DECFRA,
//! DECERA, DECSERA, DECCRA, DECCARA, DECRARA), selective erase (DECSCA,
//! DECSED, DECSEL), column operations (DECIC, DECDC, SL, SR), DECBI/DECFI,
//! DECSTR and DECSCL. `Terminal::feed` offers every sequence to `dispatch`
//! before vte; what it takes, vte never sees.
//!
//! Every count is bounded by the screen before any loop runs: a rectangle
//! is clipped to the screen, a column or line count to the margins, so one
//! sequence costs at most a screenful of cells whatever its parameters.

mod colors;
mod rectangles;
mod reports;
mod titles;

use super::boundary::Kind;
use super::screen::Screen;
use reports::{csi_reply, cursor_information, dec_dsr, tab_stops, winops};

/// Parameters kept at most; the rest are ignored (vte keeps 32).
const MAX_PARAMS: usize = 16;

/// One CSI (or DCS header) taken apart: private marker, parameters (0 for
/// an empty one, saturating at `u16::MAX`), intermediates, final byte.
struct Csi<'a> {
    marker: Option<u8>,
    params: [u16; MAX_PARAMS],
    len: usize,
    inter: &'a [u8],
    fin: u8,
}

impl Csi<'_> {
    /// Parameter `i`, `default` when missing or 0.
    fn get(&self, i: usize, default: u16) -> u16 {
        match self.params[..self.len].get(i) {
            Some(&v) if v != 0 => v,
            _ => default,
        }
    }

    /// Parameter `i` as given (0 when missing).
    fn raw(&self, i: usize) -> u16 {
        self.params[..self.len].get(i).copied().unwrap_or(0)
    }
}

/// Parses the body of a CSI (after `ESC [`, final byte included). `None`
/// for what vte would ignore (colons, a marker after parameters) and for
/// bytes vte skips inside a CSI (C0 controls): those go to vte.
fn parse(body: &[u8]) -> Option<Csi<'_>> {
    let (&fin, mut rest) = body.split_last()?;
    let mut marker = None;
    if let Some((&m, r)) = rest.split_first()
        && (0x3C..=0x3F).contains(&m)
    {
        marker = Some(m);
        rest = r;
    }
    let mut params = [0u16; MAX_PARAMS];
    let mut len = 0;
    let mut cur: Option<u16> = None;
    let mut i = 0;
    while let Some(&b) = rest.get(i) {
        match b {
            b'0'..=b'9' => {
                let v = cur.unwrap_or(0);
                cur = Some(v.saturating_mul(10).saturating_add(u16::from(b - b'0')));
            }
            b';' => {
                if len < MAX_PARAMS {
                    params[len] = cur.unwrap_or(0);
                    len += 1;
                }
                cur = None;
            }
            0x20..=0x2F => break,
            _ => return None,
        }
        i += 1;
    }
    if (cur.is_some() || len > 0) && len < MAX_PARAMS {
        params[len] = cur.unwrap_or(0);
        len += 1;
    }
    let inter = &rest[i..];
    if !inter.iter().all(|b| (0x20..=0x2F).contains(b)) || !(0x40..=0x7E).contains(&fin) {
        return None;
    }
    Some(Csi {
        marker,
        params,
        len,
        inter,
        fin,
    })
}

/// Handles `seq` if it is one of this module's; false, having done
/// nothing, otherwise.
pub fn dispatch(s: &mut Screen, seq: &[u8], kind: Kind) -> bool {
    match kind {
        Kind::Csi => {
            let Some(body) = seq.strip_prefix(b"\x1b[") else {
                return false;
            };
            match parse(body) {
                Some(csi) => csi_dispatch(s, &csi),
                None => false,
            }
        }
        Kind::Esc => match seq {
            b"\x1b6" => {
                s.back_index();
                true
            }
            b"\x1b9" => {
                s.forward_index();
                true
            }
            // SPA, EPA: start and end a guarded area (ISO protection).
            b"\x1bV" => {
                s.pen_extra.protected = true;
                s.protect_iso = true;
                true
            }
            b"\x1bW" => {
                s.pen_extra.protected = false;
                true
            }
            _ => false,
        },
        Kind::Dcs => reports::dcs_dispatch(s, seq),
        Kind::Osc => colors::osc_colors(s, seq) || titles::osc_titles(s, seq),
        _ => false,
    }
}

fn csi_dispatch(s: &mut Screen, c: &Csi<'_>) -> bool {
    match (c.marker, c.inter, c.fin) {
        // DECSLRM is a VT400 feature; below that `CSI s` is SCOSC.
        (None, b"", b's') if s.modes.lr_margins && s.conformance() >= 4 => {
            let right = (c.len > 1 && c.raw(1) != 0).then(|| usize::from(c.raw(1)));
            s.set_lr_margins(usize::from(c.raw(0)), right);
        }
        (None, b"", b'n') => match c.raw(0) {
            5 => s.reply(b"\x1b[0n"),
            6 => {
                let (row, col) = s.origin_position();
                s.reply(&csi_reply(b"", &[row, col], b"R"));
            }
            _ => s.swallow = true,
        },
        (Some(b'?'), b"", b'n') => dec_dsr(s, c),
        (Some(b'='), b"", b'c') if c.raw(0) == 0 => s.reply(b"\x1bP!|00000000\x1b\\"),
        (None, b"", b'c') if c.raw(0) == 0 => {
            let da1 = super::queries::da1(s.conformance());
            s.reply(&da1);
        }
        (Some(b'>'), b"", b'c') if c.raw(0) == 0 => {
            let da2 = super::queries::da2(s.conformance());
            s.reply(&da2);
        }
        (None, b"!", b'p') => s.soft_reset(),
        (None, b"\"", b'p') => s.set_conformance(c.raw(0)),
        (None, b"\"", b'q') => {
            s.pen_extra.protected = c.raw(0) == 1;
            s.protect_iso = false;
        }
        // Below VT300 level there is no DECRQM (nor an answer).
        (_, b"$", b'p') if s.conformance() < 3 => s.swallow = true,
        (None, b"$", b'p') => {
            let mode = c.raw(0);
            let state = s.modes.ansi_state(mode);
            s.reply(&csi_reply(b"", &[mode, u16::from(state)], b"$y"));
        }
        (Some(b'?'), b"$", b'p') => {
            let mode = c.raw(0);
            let state = s.modes.private_state(mode);
            s.reply(&csi_reply(b"?", &[mode, u16::from(state)], b"$y"));
        }
        (None, b"", b'b') => {
            s.repeat(c.get(0, 1));
        }
        (None, b"", b't') => return winops(s, c),
        (None, b"$", b'w') => match c.raw(0) {
            1 => {
                let r = cursor_information(s);
                s.reply(&r);
            }
            2 => {
                let r = tab_stops(s);
                s.reply(&r);
            }
            _ => s.swallow = true,
        },
        (Some(b'?'), b"", b's') => {
            for &mode in &c.params[..c.len] {
                let state = s.modes.private_state(mode);
                if state == 0 {
                    continue;
                }
                let on = state == 1;
                match s.saved_modes.iter().position(|(m, _)| *m == mode) {
                    Some(i) => s.saved_modes[i].1 = on,
                    None if s.saved_modes.len() < 256 => s.saved_modes.push((mode, on)),
                    None => {}
                }
            }
        }
        (Some(b'?'), b"", b'r') => {
            for &mode in &c.params[..c.len] {
                if let Some(&(_, on)) = s.saved_modes.iter().find(|(m, _)| *m == mode) {
                    s.set_private(mode, on);
                }
            }
        }
        (Some(b'?'), b"", b'J') => s.selective_erase_display(c.raw(0)),
        (Some(b'?'), b"", b'K') => s.selective_erase_line(c.raw(0)),
        (None, b"'", b'}') => s.insert_columns(usize::from(c.get(0, 1))),
        (None, b"'", b'~') => s.delete_columns(usize::from(c.get(0, 1))),
        (None, b" ", b'@') => s.shift_left(usize::from(c.get(0, 1))),
        (None, b" ", b'A') => s.shift_right(usize::from(c.get(0, 1))),
        (None, b"*", b'x') => s.rect_extent = c.raw(0).min(2) as u8,
        (None, b"*", b'|') | (None, b"$", b'|') => {
            // DECSNLS, DECSCPP: the pane's size is its client's to set.
        }
        _ => return rectangles::dispatch(s, c),
    }
    true
}
