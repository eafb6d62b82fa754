//! One client's frames: the status line, the borders and every shown
//! pane's cells composed from the panes' terminal models into one screen,
//! and the bytes that take the client's terminal from the frame it was
//! last sent to this one: only the cells that changed (a short unchanged
//! gap is rewritten rather than jumped over, a jump costing as much), the
//! cursor, and the focused pane's keyboard and mouse modes when they
//! change. Every update is wrapped in synchronized output (mode 2026), so a
//! terminal that knows it never shows half a frame.
//!
//! Not carried into a composed frame: combining marks, underline colours
//! and hyperlinks (a pane shown alone, `--pane-only`, keeps them all).

use super::geometry::{Geometry, Rect};
use super::titles::Title;
use crate::model::PaneId;
use crate::term::{Cell, Color, Style, Terminal};

/// One cell of a frame. The right half of a wide character is `'\0'`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub ch: char,
    pub style: Style,
}

const SPACER: char = '\0';

impl Slot {
    pub const BLANK: Slot = Slot {
        ch: ' ',
        style: Style::DEFAULT,
    };

    pub fn new(ch: char, style: Style) -> Slot {
        Slot { ch, style }
    }
}

/// A whole screen of slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub cols: u16,
    pub rows: u16,
    cells: Vec<Slot>,
}

impl Frame {
    pub fn blank(cols: u16, rows: u16) -> Frame {
        Frame {
            cols,
            rows,
            cells: vec![Slot::BLANK; usize::from(cols) * usize::from(rows)],
        }
    }

    pub fn get(&self, x: u16, y: u16) -> Slot {
        self.cells[usize::from(y) * usize::from(self.cols) + usize::from(x)]
    }

    fn set(&mut self, x: u16, y: u16, slot: Slot) {
        if x < self.cols && y < self.rows {
            let i = usize::from(y) * usize::from(self.cols) + usize::from(x);
            self.cells[i] = slot;
        }
    }

    /// The `cols` cells of row `y` from column `x` (inside the frame).
    fn row(&self, y: u16, x: u16, cols: u16) -> &[Slot] {
        let from = usize::from(y) * usize::from(self.cols) + usize::from(x);
        &self.cells[from..from + usize::from(cols)]
    }

    fn row_mut(&mut self, y: u16, x: u16, cols: u16) -> &mut [Slot] {
        let from = usize::from(y) * usize::from(self.cols) + usize::from(x);
        &mut self.cells[from..from + usize::from(cols)]
    }

    /// Row `y` as text (spacers left out), for tests.
    pub fn row_text(&self, y: u16) -> String {
        (0..self.cols)
            .map(|x| self.get(x, y).ch)
            .filter(|c| *c != SPACER)
            .collect()
    }
}

/// What one frame shows.
pub struct Scene<'a> {
    pub cols: u16,
    pub rows: u16,
    /// The tab laid out (its area may be larger than the client: clipped).
    pub geometry: &'a Geometry,
    /// The models of the panes in `geometry`.
    pub terminals: &'a dyn Fn(PaneId) -> Option<&'a Terminal>,
    /// The pane with the keyboard: its border marked, its cursor and modes.
    pub focus: PaneId,
    /// The status line's row and cells (exactly `cols` of them).
    pub status: Option<(u16, Vec<Slot>)>,
    /// Lines drawn over the panes, top left of the tab (the key list).
    pub overlay: Option<&'a [String]>,
    /// Pane titles, drawn over the borders (`titles.rs`).
    pub titles: &'a [Title],
    /// Where the cursor goes instead of the focused pane's: in a prompt's
    /// line being typed.
    pub line_cursor: Option<(u16, u16)>,
    /// The focused pane's cursor is not shown (it is in scroll mode).
    pub hide_cursor: bool,
    /// A pane in scroll mode: the rows its rectangle shows instead of its
    /// screen (history lines, the selection's cells inverted).
    pub scrolled: Option<(PaneId, &'a [Box<[Cell]>])>,
    /// The client's terminal reports the mouse (clicks focus a pane),
    /// whatever the focused pane asked for.
    pub mouse: bool,
}

/// The colour of the focused pane's border (tmux's `pane-active-border-style`).
pub fn active_border() -> Style {
    let mut s = Style::DEFAULT;
    s.set_fg(Color::Indexed(2));
    s
}

/// Where a shown pane's rows come from: its screen, or the rows its
/// scroll mode shows.
enum PaneRows<'a> {
    Screen(&'a Terminal),
    Scrolled(&'a [Box<[Cell]>]),
    Gone,
}

impl<'a> PaneRows<'a> {
    fn of(scene: &Scene<'a>, pane: PaneId) -> PaneRows<'a> {
        match scene.scrolled {
            Some((p, rows)) if p == pane => PaneRows::Scrolled(rows),
            _ => (scene.terminals)(pane).map_or(PaneRows::Gone, PaneRows::Screen),
        }
    }

    /// Row `r` from the pane's top (none past its last).
    fn row(&self, r: usize) -> Option<&'a [Cell]> {
        match self {
            PaneRows::Screen(t) => t.row_cells(r),
            PaneRows::Scrolled(rows) => rows.get(r).map(|row| &row[..]),
            PaneRows::Gone => None,
        }
    }
}

/// `pane`'s cells into its rectangle.
fn draw_pane(f: &mut Frame, scene: &Scene<'_>, pane: PaneId, rect: Rect) {
    let rows = PaneRows::of(scene, pane);
    if !matches!(rows, PaneRows::Gone) {
        draw_rows(f, rect, |r| rows.row(r));
    }
}

/// Composes `scene` into a frame.
pub fn compose(scene: &Scene<'_>) -> Frame {
    let mut f = Frame::blank(scene.cols, scene.rows);
    let g = scene.geometry;
    for &(pane, rect) in &g.panes {
        draw_pane(&mut f, scene, pane, rect);
    }
    let active = active_border();
    for b in &g.borders {
        for i in 0..b.len {
            let (x, y) = if b.vertical {
                (b.x, b.y + i)
            } else {
                (b.x + i, b.y)
            };
            let style = if g.touches(scene.focus, x, y) {
                active
            } else {
                Style::DEFAULT
            };
            f.set(x, y, Slot::new(g.border_char(x, y), style));
        }
    }
    for t in scene.titles {
        let style = if t.active { active } else { Style::DEFAULT };
        let mut x = t.x;
        for ch in t.text.chars() {
            put_char(&mut f, &mut x, t.y, t.x.saturating_add(t.cols), ch, style);
        }
    }
    if let Some(lines) = scene.overlay {
        let mut style = Style::DEFAULT;
        style.set_fg(Color::Indexed(0));
        style.set_bg(Color::Indexed(3));
        let width = lines
            .iter()
            .map(|l| unicode_width::UnicodeWidthStr::width(l.as_str()))
            .max()
            .unwrap_or(0)
            .min(usize::from(g.area.cols)) as u16;
        for (i, line) in lines.iter().enumerate().take(usize::from(g.area.rows)) {
            let y = g.area.y + i as u16;
            let mut x = g.area.x;
            for ch in line.chars().chain(std::iter::repeat(' ')) {
                if x >= g.area.x + width {
                    break;
                }
                put_char(&mut f, &mut x, y, g.area.x + width, ch, style);
            }
        }
    }
    if let Some((row, cells)) = &scene.status {
        for (x, slot) in cells.iter().enumerate().take(usize::from(scene.cols)) {
            f.set(x as u16, *row, *slot);
        }
    }
    f
}

/// Writes `ch` at `x` (advancing it by its width) if it fits before `end`.
fn put_char(f: &mut Frame, x: &mut u16, y: u16, end: u16, ch: char, style: Style) {
    let w = unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0) as u16;
    if w == 0 {
        return;
    }
    if *x + w > end {
        f.set(*x, y, Slot::new(' ', style));
        *x = end;
        return;
    }
    f.set(*x, y, Slot::new(ch, style));
    if w == 2 {
        f.set(*x + 1, y, Slot::new(SPACER, style));
    }
    *x += w;
}

/// Draws the rows `row_cells` gives (from the top of the pane) into `r`.
fn draw_rows<'t>(f: &mut Frame, r: Rect, row_cells: impl Fn(usize) -> Option<&'t [Cell]>) {
    let shown = clip(r, f.cols, f.rows);
    for row in 0..shown.rows {
        let cells = row_cells(usize::from(row)).unwrap_or(&[]);
        row_slots(f.row_mut(r.y + row, shown.x, shown.cols), cells, r.cols);
    }
}

/// A pane row's `cells` as the slots of `out`: the part of a rectangle
/// `rect_cols` wide that the client shows (`out.len()` columns from the
/// left). A wide character needs both its columns in the rectangle; one
/// whose right half is cut off by the client's edge keeps its left half.
fn row_slots(out: &mut [Slot], cells: &[Cell], rect_cols: u16) {
    let mut col = 0;
    while col < out.len() {
        let cell = cells.get(col).copied().unwrap_or(Cell::BLANK);
        let style = cell.style.pen_part();
        if cell.is_spacer() {
            // An orphan right half (its left half is off the rect).
            out[col] = Slot::new(' ', style);
        } else if cell.is_wide() {
            if col + 1 < usize::from(rect_cols) {
                out[col] = Slot::new(cell.ch, style);
                if let Some(right) = out.get_mut(col + 1) {
                    *right = Slot::new(SPACER, style);
                }
                col += 1;
            } else {
                out[col] = Slot::new(' ', style);
            }
        } else {
            out[col] = Slot::new(cell.ch, style);
        }
        col += 1;
    }
}

/// Unchanged cells up to this many are rewritten rather than jumped over
/// (a cursor move is 6 to 8 bytes).
const GAP_REWRITE: u16 = 4;

/// The cursor and modes a client's terminal was last left with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tail {
    cursor: Option<(u16, u16)>,
    modes: Vec<u8>,
}

/// What one client's terminal shows now.
#[derive(Debug, Default)]
pub struct Compositor {
    last: Option<Frame>,
    tail: Option<Tail>,
    /// Kept from one in-place update to the next, not to allocate on
    /// every echo: a row being drawn, and the rows it replaced (with
    /// their row numbers).
    row: Vec<Slot>,
    replaced: Vec<Slot>,
    replaced_rows: Vec<u16>,
}

impl Compositor {
    /// The next update redraws everything (the terminal was used for
    /// something else, or is new).
    pub fn reset(&mut self) {
        self.last = None;
        self.tail = None;
    }

    /// The bytes that show `scene`; empty when the terminal shows it
    /// already.
    pub fn update(&mut self, scene: &Scene<'_>) -> Vec<u8> {
        self.update_with(scene, false)
    }

    /// As [`Compositor::update`], but only the focused pane's rectangle is
    /// brought up to date (and the cursor and modes): the rest of the
    /// terminal keeps what the last frame showed, for the next update to
    /// bring. A keystroke's echo goes out this way between two frames: a
    /// few bytes, not the other panes' flood. A whole update when there is
    /// no last frame of this size or the key list covers the panes.
    pub fn update_focused(&mut self, scene: &Scene<'_>) -> Vec<u8> {
        self.update_with(scene, true)
    }

    /// Whether [`Compositor::update_focused`] draws a scene of this size
    /// (and key list) in place, using nothing of it but the focused pane,
    /// its cursor and modes: the status line and titles can be left out.
    pub fn draws_focused_in_place(&self, cols: u16, rows: u16, overlay: bool) -> bool {
        !overlay
            && self
                .last
                .as_ref()
                .is_some_and(|l| (l.cols, l.rows) == (cols, rows))
    }

    /// Draws the focused pane (`rect`, `r` of it shown) over `f`, the
    /// last frame, and appends what changed to `body`: only the rows that
    /// differ are kept aside for the comparison. Returns where the cursor
    /// is left.
    fn draw_focused_in_place(
        &mut self,
        f: &mut Frame,
        scene: &Scene<'_>,
        rect: Rect,
        body: &mut Vec<u8>,
    ) -> Option<(u16, u16)> {
        let r = clip(rect, f.cols, f.rows);
        let rows = PaneRows::of(scene, scene.focus);
        let width = usize::from(r.cols);
        self.row.clear();
        self.row.resize(width, Slot::BLANK);
        self.replaced.clear();
        self.replaced_rows.clear();
        for y in r.y..r.y + r.rows {
            let cells = rows.row(usize::from(y - rect.y)).unwrap_or(&[]);
            row_slots(&mut self.row, cells, rect.cols);
            let shown = f.row_mut(y, r.x, r.cols);
            if *shown != self.row[..] {
                self.replaced.extend_from_slice(shown);
                self.replaced_rows.push(y);
                shown.copy_from_slice(&self.row);
            }
        }
        if self.replaced_rows.is_empty() {
            return None;
        }
        let (replaced, replaced_rows) = (&self.replaced, &self.replaced_rows);
        let f: &Frame = f;
        diff(
            |y| match replaced_rows.iter().position(|&at| at == y) {
                Some(i) => &replaced[i * width..(i + 1) * width],
                None => f.row(y, r.x, r.cols),
            },
            f,
            r,
            body,
        )
    }

    fn update_with(&mut self, scene: &Scene<'_>, focused_only: bool) -> Vec<u8> {
        let same_size = self
            .last
            .as_ref()
            .is_some_and(|l| (l.cols, l.rows) == (scene.cols, scene.rows));
        let mut body = Vec::new();
        let mut at = None;
        let full = !same_size;
        let rect = scene.geometry.rect_of(scene.focus);
        let partial = focused_only
            && self.draws_focused_in_place(scene.cols, scene.rows, scene.overlay.is_some());
        // A keystroke's echo is on the latency path: the focused pane is
        // drawn over the last frame in place and only its rectangle
        // compared, rather than copying and comparing the whole screen.
        let frame = match (self.last.take(), rect) {
            (Some(mut f), Some(rect)) if partial => {
                at = self.draw_focused_in_place(&mut f, scene, rect, &mut body);
                f
            }
            (Some(f), None) if partial => f,
            (last, _) => {
                let f = compose(scene);
                let whole = Rect::new(0, 0, f.cols, f.rows);
                if full {
                    body.extend_from_slice(
                        b"\x1b[0m\x1b[r\x1b[?6l\x1b[?7h\x1b[4l\x1b(B\x1b)B\x0f\x1b[H\x1b[2J",
                    );
                    let blank = vec![Slot::BLANK; usize::from(f.cols)];
                    at = diff(|_| &blank[..], &f, whole, &mut body);
                } else if let Some(last) = &last {
                    at = diff(|y| last.row(y, 0, last.cols), &f, whole, &mut body);
                }
                f
            }
        };
        let focus = (scene.terminals)(scene.focus);
        let pane_cursor = focus.and_then(|t| {
            let (col, row, visible) = t.cursor();
            let r = scene.geometry.rect_of(scene.focus)?;
            let (x, y) = (r.x + col, r.y + row);
            (visible
                && !scene.hide_cursor
                && scene.overlay.is_none()
                && col < r.cols
                && row < r.rows
                && x < scene.cols
                && y < scene.rows)
                .then_some((x, y))
        });
        let cursor = scene
            .line_cursor
            .filter(|(x, y)| *x < scene.cols && *y < scene.rows)
            .or(pane_cursor);
        let (mut modes, modes_off) = match focus {
            Some(t) => t.focus_modes(),
            None => (Vec::new(), &b""[..]),
        };
        if scene.mouse {
            // Clicks and drags, or all motion if the pane wants it; always
            // in SGR, which the server translates for the pane.
            if !modes.windows(8).any(|w| w == b"\x1b[?1003") {
                modes.extend_from_slice(b"\x1b[?1002h");
            }
            modes.extend_from_slice(b"\x1b[?1006h");
        }
        let tail = Tail { cursor, modes };
        if body.is_empty() && self.tail.as_ref() == Some(&tail) {
            self.last = Some(frame);
            return Vec::new();
        }
        let mut out = Vec::with_capacity(body.len() + 64);
        out.extend_from_slice(b"\x1b[?2026h\x1b[?25l");
        out.extend_from_slice(&body);
        // The last cell written may have left the cursor where it goes.
        if let Some((x, y)) = tail.cursor
            && (at != Some((x, y)) || body.is_empty())
        {
            cup(&mut out, x, y);
        }
        out.extend_from_slice(b"\x1b[?2026l");
        if full || self.tail.as_ref().is_none_or(|t| t.modes != tail.modes) {
            out.extend_from_slice(modes_off);
            out.extend_from_slice(&tail.modes);
        }
        if tail.cursor.is_some() {
            out.extend_from_slice(b"\x1b[?25h");
        } else {
            out.extend_from_slice(b"\x1b[?25l");
        }
        self.last = Some(frame);
        self.tail = Some(tail);
        out
    }
}

/// The part of `r` on a screen of `cols` x `rows`.
fn clip(r: Rect, cols: u16, rows: u16) -> Rect {
    let (x, y) = (r.x.min(cols), r.y.min(rows));
    let right = r.x.saturating_add(r.cols).min(cols);
    let bottom = r.y.saturating_add(r.rows).min(rows);
    Rect::new(x, y, right - x, bottom - y)
}

fn cup(out: &mut Vec<u8>, x: u16, y: u16) {
    out.extend_from_slice(format!("\x1b[{};{}H", y + 1, x + 1).as_bytes());
}

/// Appends what takes a terminal showing `old_row` (the cells of a row
/// under `r`) to `new`, within `r` (inside `new`; the cells outside are
/// the same),
/// leaving the SGR state reset; nothing if they are equal. Returns where
/// the cursor is left, if known.
fn diff<'o>(
    old_row: impl Fn(u16) -> &'o [Slot],
    new: &Frame,
    r: Rect,
    out: &mut Vec<u8>,
) -> Option<(u16, u16)> {
    let mut pen = Style::DEFAULT;
    let start = out.len();
    let mut at: Option<(u16, u16)> = None;
    let end_x = r.x + r.cols;
    for y in r.y..r.y + r.rows {
        let was = old_row(y);
        // Most rows of most updates are unchanged: one comparison each.
        if was == new.row(y, r.x, r.cols) {
            continue;
        }
        let old = |x: u16| was[usize::from(x - r.x)];
        let changed = |x: u16| {
            let now = new.get(x, y);
            now != old(x)
                // A wide character's halves go together.
                || (x + 1 < end_x && new.get(x + 1, y).ch == SPACER && new.get(x + 1, y) != old(x + 1))
        };
        let mut x = r.x;
        while x < end_x {
            if !changed(x) {
                x += 1;
                continue;
            }
            // A changed right half is redrawn from its left half.
            let mut from = x;
            if new.get(from, y).ch == SPACER && from > r.x {
                from -= 1;
            }
            // The run: changed cells, and short unchanged gaps between.
            let mut end = x + 1;
            let mut gap = 0;
            let mut probe = end;
            while probe < end_x && gap <= GAP_REWRITE {
                if changed(probe) {
                    end = probe + 1;
                    gap = 0;
                } else {
                    gap += 1;
                }
                probe += 1;
            }
            if at != Some((from, y)) {
                cup(out, from, y);
            }
            let mut c = from;
            while c < end {
                let slot = new.get(c, y);
                if slot.style != pen {
                    slot.style.write_sgr(out);
                    pen = slot.style;
                }
                if slot.ch == SPACER {
                    out.push(b' ');
                    c += 1;
                    continue;
                }
                let mut buf = [0u8; 4];
                out.extend_from_slice(slot.ch.encode_utf8(&mut buf).as_bytes());
                let wide = c + 1 < end_x && new.get(c + 1, y).ch == SPACER;
                c += if wide { 2 } else { 1 };
            }
            // Past the last column the terminal's cursor waits to wrap:
            // the next run always moves it.
            at = (c < new.cols).then_some((c, y));
            x = c.max(end);
        }
    }
    if out.len() > start && pen != Style::DEFAULT {
        out.extend_from_slice(b"\x1b[0m");
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::TermConfig;
    use crate::view::geometry::lay_out;
    use crate::workspace::layout::{Direction, Layout};

    fn p(n: u64) -> PaneId {
        PaneId::new(n)
    }

    fn term(cols: u16, rows: u16, text: &str) -> Terminal {
        let mut t = Terminal::new(cols, rows, TermConfig::default());
        t.feed(text.as_bytes(), &mut Vec::new());
        t
    }

    /// Feeds `bytes` to a fresh terminal the frame's size, for what a
    /// client would show.
    fn shown(cols: u16, rows: u16, bytes: &[u8]) -> Terminal {
        let mut t = Terminal::new(cols, rows, TermConfig::default());
        t.feed(bytes, &mut Vec::new());
        t
    }

    #[test]
    fn panes_borders_and_status_compose_and_updates_send_only_changes() {
        let mut layout = Layout::Pane(p(1));
        layout.split(p(1), p(2), Direction::Horizontal, 0.5);
        let g = lay_out(&layout, None, Rect::new(0, 0, 21, 4));
        let left = term(10, 4, "left\r\nL2");
        let mut right = term(10, 4, "right");
        let status: Vec<Slot> = "[main] 0:tab*"
            .chars()
            .chain(std::iter::repeat(' '))
            .take(21)
            .map(|c| Slot::new(c, Style::DEFAULT))
            .collect();
        let mut comp = Compositor::default();
        let bytes = {
            let (l, r) = (&left, &right);
            let lookup = move |id: PaneId| if id == p(1) { Some(l) } else { Some(r) };
            let scene = Scene {
                cols: 21,
                rows: 5,
                geometry: &g,
                terminals: &lookup,
                focus: p(2),
                status: Some((4, status.clone())),
                overlay: None,
                titles: &[],
                line_cursor: None,
                hide_cursor: false,
                scrolled: None,
                mouse: false,
            };
            comp.update(&scene)
        };
        assert!(bytes.starts_with(b"\x1b[?2026h"));
        let seen = shown(21, 5, &bytes);
        let text = seen.visible_text();
        assert_eq!(text[0], "left      │right");
        assert_eq!(text[1], "L2        │");
        assert_eq!(text[4].trim_end(), "[main] 0:tab*");
        // The cursor is the focused pane's, in its rectangle.
        assert_eq!(seen.cursor(), (16, 0, true));

        right.feed(b"!", &mut Vec::new());
        let (l, r) = (&left, &right);
        let lookup = move |id: PaneId| if id == p(1) { Some(l) } else { Some(r) };
        let scene = Scene {
            cols: 21,
            rows: 5,
            geometry: &g,
            terminals: &lookup,
            focus: p(2),
            status: Some((4, status)),
            overlay: None,
            titles: &[],
            line_cursor: None,
            hide_cursor: false,
            scrolled: None,
            mouse: false,
        };
        let update = comp.update(&scene);
        let body = String::from_utf8_lossy(&update);
        assert!(body.contains("\x1b[1;17H!"), "{body:?}");
        assert_eq!(body, "\x1b[?2026h\x1b[?25l\x1b[1;17H!\x1b[?2026l\x1b[?25h");
        assert!(comp.update(&scene).is_empty(), "nothing changed");
    }

    #[test]
    fn focused_updates_of_a_clipped_pane_with_wide_characters_show_what_a_whole_frame_does() {
        let mut layout = Layout::Pane(p(1));
        layout.split(p(1), p(2), Direction::Horizontal, 0.5);
        // The client is narrower than the tab: the focused pane is cut.
        let g = lay_out(&layout, None, Rect::new(0, 0, 21, 4));
        let (cols, rows) = (17, 4);
        let left = term(10, 4, "left");
        let mut right = term(10, 4, "ab");
        let update = |comp: &mut Compositor, r: &Terminal, focused: bool| {
            let lookup = |id: PaneId| if id == p(1) { Some(&left) } else { Some(r) };
            let scene = Scene {
                cols,
                rows,
                geometry: &g,
                terminals: &lookup,
                focus: p(2),
                status: None,
                overlay: None,
                titles: &[],
                line_cursor: None,
                hide_cursor: false,
                scrolled: None,
                mouse: false,
            };
            if focused {
                comp.update_focused(&scene)
            } else {
                comp.update(&scene)
            }
        };
        let mut comp = Compositor::default();
        let mut screen = update(&mut comp, &right, false);
        for typed in [
            "日本",
            "\r\nxyz",
            "\x1b[1;1H語",
            "\x1b[2;5H\x1b[31m字",
            // A wide character in the last column the client shows.
            "\x1b[3;6H字",
        ] {
            right.feed(typed.as_bytes(), &mut Vec::new());
            let echo = update(&mut comp, &right, true);
            assert!(!echo.is_empty(), "{typed:?} changed the focused pane");
            screen.extend_from_slice(&echo);
            let whole = update(&mut Compositor::default(), &right, false);
            assert_eq!(
                shown(cols, rows, &screen).visible_text(),
                shown(cols, rows, &whole).visible_text(),
                "after {typed:?}"
            );
            assert_eq!(
                update(&mut comp, &right, false),
                Vec::<u8>::new(),
                "nothing left"
            );
        }
    }

    #[test]
    fn a_focused_update_brings_only_the_focused_pane_and_the_next_the_rest() {
        let mut layout = Layout::Pane(p(1));
        layout.split(p(1), p(2), Direction::Horizontal, 0.5);
        let g = lay_out(&layout, None, Rect::new(0, 0, 21, 4));
        let mut left = term(10, 4, "left");
        let mut right = term(10, 4, "right");
        let mut comp = Compositor::default();
        let update = |comp: &mut Compositor, l: &Terminal, r: &Terminal, focused: bool| {
            let lookup = move |id: PaneId| if id == p(1) { Some(l) } else { Some(r) };
            let scene = Scene {
                cols: 21,
                rows: 4,
                geometry: &g,
                terminals: &lookup,
                focus: p(2),
                status: None,
                overlay: None,
                titles: &[],
                line_cursor: None,
                hide_cursor: false,
                scrolled: None,
                mouse: false,
            };
            if focused {
                comp.update_focused(&scene)
            } else {
                comp.update(&scene)
            }
        };
        let mut screen = update(&mut comp, &left, &right, false);
        left.feed(b"\r\nflood", &mut Vec::new());
        right.feed(b"!", &mut Vec::new());
        let echo = update(&mut comp, &left, &right, true);
        assert_eq!(
            String::from_utf8_lossy(&echo),
            "\x1b[?2026h\x1b[?25l\x1b[1;17H!\x1b[?2026l\x1b[?25h",
            "only the focused pane's change"
        );
        screen.extend_from_slice(&echo);
        let text = shown(21, 4, &screen).visible_text();
        assert_eq!(text[0], "left      │right!");
        assert_eq!(text[1], "          │");
        let rest = update(&mut comp, &left, &right, false);
        assert!(String::from_utf8_lossy(&rest).contains("flood"));
        screen.extend_from_slice(&rest);
        let seen = shown(21, 4, &screen);
        assert_eq!(seen.visible_text()[1], "flood     │");
        assert_eq!(
            seen.cursor(),
            (17, 0, true),
            "the cursor back in the focused pane"
        );
    }
}
