//! Scroll mode and the mouse inside the tab view. A client's scroll mode
//! belongs to its view, not to the pane: the compositor draws that pane's
//! rectangle from the pane's history at the client's position (the other
//! panes stay live around it, another client of the same pane sees its
//! live screen), and the keys of the mode are taken here before the
//! view's own (the prefix and its bindings still work). The mode itself
//! (keys, search, selection) is `view::scroll_mode`, shared with
//! `--pane-only`'s client.
//!
//! The mouse, when config `mouse` is on: the wheel over a pane goes to its
//! program if that asked for mouse reports, else scrolls the pane (into
//! scroll mode; down at the bottom leaves it); a press on a border and a
//! drag moves that split's border; a drag inside a pane selects from the
//! press to the pointer (in scroll mode, entered for the drag) and the
//! release copies the selection to the client's clipboard (OSC 52), as
//! tmux and zellij do. Clicks (focus, reports to the program) are
//! `view_mouse`'s.

use super::connection::ConnId;
use crate::model::{PaneId, TabId};
use crate::protocol::frame;
use crate::server::Server;
use crate::term::{Cell, INVERSE, MouseEncoding, MouseMode, Terminal};
use crate::view::bindings::{self, Mode, MouseEvent};
use crate::view::geometry::{Geometry, Rect, lay_out};
use crate::view::scroll_mode::{self, Key, Lines, Needle, Point, Scroll, Selection, Step};
use crate::workspace::layout::{Rect as LayoutRect, Side};
use std::convert::Infallible;

/// Lines one wheel notch scrolls.
const WHEEL_LINES: i64 = 3;

/// One client's scroll mode over a pane of its tab.
#[derive(Debug)]
pub struct PaneScroll {
    pub pane: PaneId,
    pub state: Scroll,
    /// Entered by a mouse drag: the release leaves it again.
    by_drag: bool,
    /// The history's numbering it shows lines in.
    numbering: Numbering,
}

/// Which numbering of a pane's history lines a scroll mode holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Numbering {
    /// The one it was entered under (`Terminal::history_numbering`'s
    /// epoch): a width change renumbers lines, and the mode starts again
    /// at the bottom.
    Seen(Option<u64>),
    /// Another server's, carried over (a live upgrade, or a client coming
    /// back after a crash): the pane's terminal came with its line count,
    /// so its numbering goes on; taken as this server's at the first draw.
    Carried,
}

impl PaneScroll {
    /// The mode as a VIEW frame tells it and a live upgrade carries it;
    /// `None` for one a mouse drag opened (the button held down is not
    /// carried, so nothing would end it).
    pub fn spec(&self) -> Option<crate::protocol::methods::ScrollSpec> {
        use crate::protocol::methods::{ScrollSpec, SearchSpec, SelectionSpec};
        if self.by_drag {
            return None;
        }
        let s = &self.state;
        let search = |q: &Option<(String, bool)>| {
            q.as_ref().map(|(text, back)| SearchSpec {
                text: text.clone(),
                back: *back,
            })
        };
        Some(ScrollSpec {
            pane: self.pane,
            start: s.start,
            end: s.end,
            top: s.top,
            cursor: s.cursor,
            selection: s.selection.map(|sel| SelectionSpec {
                anchor: (sel.anchor.line, sel.anchor.col),
                head: (sel.head.line, sel.head.col),
                lines: sel.lines,
            }),
            search: search(&s.search),
            prompt: search(&s.prompt),
        })
    }

    /// A mode carried over from another server (`spec`), at its position
    /// as far as the lines allow: the first draw checks it against the
    /// pane (which must be in the view's tab) and its lines.
    pub fn carried(spec: &crate::protocol::methods::ScrollSpec) -> PaneScroll {
        let point = |(line, col): (u64, u16)| Point { line, col };
        let search = |q: &Option<crate::protocol::methods::SearchSpec>| {
            q.as_ref().map(|q| (q.text.clone(), q.back))
        };
        let mut state = Scroll::resume(spec.start, spec.end, spec.top, spec.cursor);
        state.selection = spec.selection.map(|sel| Selection {
            anchor: point(sel.anchor),
            head: point(sel.head),
            lines: sel.lines,
        });
        state.search = search(&spec.search);
        state.prompt = search(&spec.prompt);
        PaneScroll {
            pane: spec.pane,
            state,
            by_drag: false,
            numbering: Numbering::Carried,
        }
    }
}

/// What a mouse button held down is doing.
#[derive(Debug, Clone, Copy)]
enum Drag {
    /// Moving the border at column (`vertical`) or row `at`; `along` is
    /// where on the border the press was.
    Border { vertical: bool, at: u16, along: u16 },
    /// Pressed inside `pane`, not moved yet.
    Pressed { pane: PaneId, x: u16, y: u16 },
    /// Selecting in `pane`'s scroll mode.
    Select { pane: PaneId },
}

/// A view's scroll mode and mouse drag.
#[derive(Debug, Default)]
pub struct ViewScroll {
    pub active: Option<PaneScroll>,
    drag: Option<Drag>,
}

impl ViewScroll {
    /// `SCROLL 12/240` for the status line.
    pub fn indicator(&self) -> Option<String> {
        self.active
            .as_ref()
            .map(|s| format!("SCROLL {}", s.state.position()))
    }

    /// The search being typed or what the last key found.
    pub fn message(&self) -> Option<String> {
        let m = self.active.as_ref()?.state.message();
        (!m.is_empty()).then_some(m)
    }

    /// The scroll mode to tell the client and to carry over (see
    /// `PaneScroll::spec`).
    pub fn spec(&self) -> Option<crate::protocol::methods::ScrollSpec> {
        self.active.as_ref()?.spec()
    }

    /// Takes up a scroll mode carried over from another server.
    pub fn resume(&mut self, spec: &crate::protocol::methods::ScrollSpec) {
        self.active = Some(PaneScroll::carried(spec));
    }

    /// Whether `pane` is in this view's scroll mode.
    fn scrolls(&self, pane: PaneId) -> bool {
        self.active.as_ref().is_some_and(|s| s.pane == pane)
    }
}

/// A pane's lines straight from its terminal model.
struct TermLines<'a>(&'a Terminal);

impl Lines for TermLines<'_> {
    type Error = Infallible;
    fn plain(&mut self, n: u64) -> Result<Option<(String, bool)>, Infallible> {
        let h = self.0.history_lines(n, 1, false);
        Ok((h.first == n)
            .then(|| h.lines.into_iter().zip(h.wrapped).next())
            .flatten())
    }

    /// All of the history, however long: the lines are read where the
    /// model keeps them.
    fn find_line(
        &mut self,
        needle: &Needle,
        from: u64,
        back: bool,
        range: (u64, u64),
    ) -> Result<Option<u64>, Infallible> {
        let mut scratch = String::new();
        Ok(self
            .0
            .find_line(from, back, range, |text| needle.matches(text, &mut scratch)))
    }
}

fn ok<T>(r: Result<T, Infallible>) -> T {
    match r {
        Ok(v) => v,
        Err(never) => match never {},
    }
}

/// Line numbers of `t`: the oldest in history, and one past the screen's
/// last row.
fn line_range(t: &Terminal) -> (u64, u64) {
    let h = t.history_lines(u64::MAX, 0, false);
    (h.history_start, h.screen_start + u64::from(t.size().1))
}

/// The cell of `rect` nearest to `(x, y)`, as a line and column of a
/// scroll mode showing `state`.
fn point_in(state: &Scroll, rect: Rect, x: u16, y: u16) -> Point {
    let col = x.saturating_sub(rect.x).min(rect.cols.saturating_sub(1));
    let row = y.saturating_sub(rect.y).min(rect.rows.saturating_sub(1));
    Point {
        line: (state.top + u64::from(row)).min(state.end.saturating_sub(1)),
        col,
    }
}

impl Server {
    fn view_scroll(&mut self, conn: ConnId) -> Option<&mut ViewScroll> {
        Some(&mut self.conns.get_mut(&conn)?.tab_view_mut()?.scroll)
    }

    /// Opens client `conn`'s scroll mode over `pane` (a pane of its tab),
    /// at the bottom, or a page up (`page_up`). False if the pane is not
    /// shown.
    pub(in crate::server) fn enter_scroll(
        &mut self,
        conn: ConnId,
        pane: PaneId,
        page_up: bool,
        by_drag: bool,
    ) -> bool {
        let Some(rect) = self.view_geometry(conn).and_then(|g| g.rect_of(pane)) else {
            return false;
        };
        let Some(t) = self.panes.get(&pane.get()).map(|p| p.screen()) else {
            return false;
        };
        let (start, end) = line_range(t);
        let mut state = Scroll::new(start, end, usize::from(rect.rows));
        if page_up {
            state.scroll_by(-(state.rows as i64));
        }
        let numbering = Numbering::Seen(t.history_numbering().map(|n| n.0));
        let Some(s) = self.view_scroll(conn) else {
            return false;
        };
        s.active = Some(PaneScroll {
            pane,
            state,
            by_drag,
            numbering,
        });
        self.mark_view_stale(conn);
        true
    }

    /// Takes up the scroll mode client `conn`'s last VIEW told it, handed
    /// back by the client coming back after a crash of the serving process.
    pub(in crate::server) fn resume_scroll(
        &mut self,
        conn: ConnId,
        spec: &crate::protocol::methods::ScrollSpec,
    ) {
        if let Some(s) = self.view_scroll(conn) {
            s.resume(spec);
        }
        self.mark_view_stale(conn);
    }

    fn leave_scroll(&mut self, conn: ConnId) {
        if let Some(s) = self.view_scroll(conn) {
            s.active = None;
        }
        self.mark_view_stale(conn);
    }

    /// The rows client `conn`'s scrolled pane shows in geometry `g`, the
    /// selection or the cursor's line inverted; `None` without a scroll
    /// mode (one whose pane is gone from the view ends here).
    pub(in crate::server) fn scrolled_rows(
        &mut self,
        conn: ConnId,
        g: &Geometry,
    ) -> Option<(PaneId, Vec<Box<[Cell]>>)> {
        let v = self.conns.get_mut(&conn)?.tab_view_mut()?;
        let ps = v.scroll.active.as_mut()?;
        let (Some(rect), Some(p)) = (g.rect_of(ps.pane), self.panes.get(&ps.pane.get())) else {
            v.scroll.active = None;
            v.scroll.drag = None;
            return None;
        };
        let t = p.screen();
        let (start, end) = line_range(t);
        let seen = Numbering::Seen(t.history_numbering().map(|n| n.0));
        if ps.numbering == Numbering::Carried {
            ps.numbering = seen;
            ps.state.set_rows(usize::from(rect.rows));
            ps.state.forget_after(end);
        } else if seen != ps.numbering {
            ps.state = Scroll::new(start, end, usize::from(rect.rows));
            ps.numbering = seen;
        }
        ps.state.forget_before(start);
        if ps.state.rows != usize::from(rect.rows) {
            ps.state.set_rows(usize::from(rect.rows));
        }
        let s = &ps.state;
        let rows = (0..u64::from(rect.rows))
            .map(|r| {
                let n = s.top + r;
                let mut cells = t
                    .numbered_cells(n)
                    .filter(|_| n < s.end)
                    .unwrap_or_else(|| vec![Cell::BLANK; usize::from(rect.cols)].into());
                for (col, cell) in cells.iter_mut().enumerate() {
                    if s.highlighted(n, col.min(usize::from(u16::MAX)) as u16) {
                        cell.style.fg ^= INVERSE;
                    }
                }
                cells
            })
            .collect();
        Some((ps.pane, rows))
    }

    /// Keys client `conn` typed while its view has a pane in scroll mode:
    /// the mode's keys, mouse reports, and the prefix with its binding
    /// (run by the view as ever). False, taking nothing, without a scroll
    /// mode.
    pub(in crate::server) fn scroll_keys(&mut self, conn: ConnId, bytes: &[u8]) -> bool {
        let Some(c) = self.conns.get(&conn) else {
            return false;
        };
        let Some(read_only) = c.attachment().map(|a| a.read_only) else {
            return false;
        };
        let Some(v) = c.tab_view() else {
            return false;
        };
        let Some(pane) = v.scroll.active.as_ref().map(|s| s.pane) else {
            return false;
        };
        // The view moved to another tab (or the pane left it) since.
        if self.tree.tab_of(pane) != Some(v.tab) {
            self.leave_scroll(conn);
            return false;
        }
        let mut i = 0;
        while i < bytes.len() {
            let rest = &bytes[i..];
            let Some(v) = self.conns.get(&conn).and_then(|c| c.tab_view()) else {
                return true;
            };
            if v.scroll.active.is_none() {
                self.view_feed_keys(conn, rest);
                return true;
            }
            if v.keys != Mode::Typing || v.has_overlay() || rest[0] == v.prefix {
                let used = if v.keys == Mode::Typing && !v.has_overlay() {
                    1
                } else {
                    bindings::key_at(rest).map_or(rest.len(), |(_, n)| n)
                };
                self.view_feed_keys(conn, &rest[..used]);
                i += used;
                continue;
            }
            if let Some((event, used)) = bindings::mouse_at(rest) {
                self.view_pointer(conn, event, read_only);
                i += used;
                continue;
            }
            let Some((key, used)) = scroll_mode::key_at(rest) else {
                break;
            };
            i += used;
            self.scroll_key(conn, key);
        }
        true
    }

    fn scroll_key(&mut self, conn: ConnId, key: Key) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let Some(ps) = c.tab_view_mut().and_then(|v| v.scroll.active.as_mut()) else {
            return;
        };
        let Some(p) = self.panes.get(&ps.pane.get()) else {
            self.leave_scroll(conn);
            return;
        };
        match ok(ps.state.key(key, &mut TermLines(p.screen()))) {
            Step::Stay => self.mark_view_stale(conn),
            Step::Leave => self.leave_scroll(conn),
            Step::Copy(text) => {
                self.leave_scroll(conn);
                self.copy_to_client(conn, &text);
            }
        }
    }

    /// Puts `text` on client `conn`'s clipboard (OSC 52 to its terminal).
    fn copy_to_client(&mut self, conn: ConnId, text: &str) {
        let bytes = scroll_mode::osc52(text);
        let queued = self.conns.get_mut(&conn).is_some_and(|c| {
            bytes
                .chunks(frame::MAX_FRAME_PAYLOAD)
                .all(|chunk| c.queue_frame(frame::server::OUTPUT, chunk))
        });
        if queued {
            let n = text.chars().count();
            self.view_say(conn, format!("copied {n} characters"));
        } else {
            self.drop_too_slow(conn);
        }
    }

    /// Whether `pane` takes the mouse from client `conn`: its program
    /// asked for reports and this view does not scroll it.
    fn pane_takes_mouse(&self, conn: ConnId, pane: PaneId) -> bool {
        let scrolled = self
            .conns
            .get(&conn)
            .and_then(|c| c.tab_view())
            .is_some_and(|v| v.scroll.scrolls(pane));
        !scrolled
            && self
                .panes
                .get(&pane.get())
                .is_some_and(|p| p.screen().modes().mouse != MouseMode::Off)
    }

    /// A mouse report from client `conn`'s terminal: wheels, border drags
    /// and selections here, clicks in `view_mouse`.
    pub(in crate::server) fn view_pointer(
        &mut self,
        conn: ConnId,
        event: MouseEvent,
        read_only: bool,
    ) {
        if read_only {
            return;
        }
        let Some(tab) = self.view_tab(conn) else {
            return;
        };
        let Some(g) = self.view_geometry(conn) else {
            return;
        };
        let motion = event.button & 32 != 0;
        let drag = self.view_scroll(conn).and_then(|s| s.drag.take());
        if let Some(drag) = drag
            && (motion || event.release)
        {
            self.drag_on(conn, tab, &g, drag, event);
            return;
        }
        if event.button & 64 != 0 {
            if !event.release {
                self.wheel(conn, &g, event);
            }
            return;
        }
        if event.is_left_press() {
            if g.pane_at(event.x, event.y).is_none() && g.is_border(event.x, event.y) {
                let vertical = g.borders.iter().any(|b| {
                    b.vertical
                        && b.x == event.x
                        && (b.y..b.y.saturating_add(b.len)).contains(&event.y)
                });
                let (at, along) = if vertical {
                    (event.x, event.y)
                } else {
                    (event.y, event.x)
                };
                if let Some(s) = self.view_scroll(conn) {
                    s.drag = Some(Drag::Border {
                        vertical,
                        at,
                        along,
                    });
                }
                return;
            }
            if let Some(pane) = g.pane_at(event.x, event.y)
                && !self.pane_takes_mouse(conn, pane)
            {
                if self.view_of(conn).is_some_and(|v| v.focus != pane) {
                    self.view_focus(conn, pane);
                }
                if let Some(s) = self.view_scroll(conn) {
                    s.drag = Some(Drag::Pressed {
                        pane,
                        x: event.x,
                        y: event.y,
                    });
                    // A new press drops the selection it may have had.
                    if let Some(active) = s.active.as_mut().filter(|a| a.pane == pane) {
                        active.state.selection = None;
                    }
                }
                self.mark_view_stale(conn);
                return;
            }
        }
        self.view_mouse(conn, event, read_only);
    }

    /// The wheel over a pane: to its program if it asked for the mouse,
    /// else scroll mode in its rectangle (up enters it, down at the
    /// bottom leaves it).
    fn wheel(&mut self, conn: ConnId, g: &Geometry, event: MouseEvent) {
        let Some(pane) = g.pane_at(event.x, event.y) else {
            return;
        };
        let Some(rect) = g.rect_of(pane) else {
            return;
        };
        if self.pane_takes_mouse(conn, pane) {
            let Some(modes) = self.panes.get(&pane.get()).map(|p| p.screen().modes()) else {
                return;
            };
            let sgr = modes.mouse_encoding == MouseEncoding::Sgr;
            let bytes = event.encode(event.x - rect.x, event.y - rect.y, sgr);
            if let Err((msg, _)) = self.type_into(conn, pane.get(), &bytes) {
                self.log.log("input_dropped", &msg);
            }
            return;
        }
        // Left and right wheels (buttons 6 and 7) do not scroll lines.
        if event.button & 2 != 0 {
            return;
        }
        let down = event.button & 1 != 0;
        let scrolled = self.view_scroll(conn).is_some_and(|s| s.scrolls(pane));
        if !scrolled {
            if down {
                return;
            }
            if self.view_of(conn).is_some_and(|v| v.focus != pane) {
                self.view_focus(conn, pane);
            }
            if !self.enter_scroll(conn, pane, false, false) {
                return;
            }
        }
        let Some(s) = self.view_scroll(conn) else {
            return;
        };
        let Some(active) = s.active.as_mut() else {
            return;
        };
        active
            .state
            .scroll_by(if down { WHEEL_LINES } else { -WHEEL_LINES });
        if down && active.state.at_bottom() && active.state.selection.is_none() {
            s.active = None;
        }
        self.mark_view_stale(conn);
    }

    /// Motion or the release of a button held down since `drag` began.
    fn drag_on(&mut self, conn: ConnId, tab: TabId, g: &Geometry, drag: Drag, event: MouseEvent) {
        let next = match drag {
            Drag::Border {
                vertical,
                at,
                along,
            } => {
                let to = if vertical { event.x } else { event.y };
                let at = self.move_border(tab, g, vertical, at, along, to);
                Some(Drag::Border {
                    vertical,
                    at,
                    along,
                })
            }
            Drag::Pressed { pane, x, y } if (x, y) != (event.x, event.y) => {
                let rect = g.rect_of(pane);
                let scrolled = self.view_scroll(conn).is_some_and(|s| s.scrolls(pane));
                if rect.is_none() || (!scrolled && !self.enter_scroll(conn, pane, false, true)) {
                    return;
                }
                if let (Some(rect), Some(active)) =
                    (rect, self.view_scroll(conn).and_then(|s| s.active.as_mut()))
                {
                    let anchor = point_in(&active.state, rect, x, y);
                    active.state.selection = Some(Selection {
                        anchor,
                        head: anchor,
                        lines: false,
                    });
                }
                self.select_to(conn, g, pane, event);
                Some(Drag::Select { pane })
            }
            Drag::Pressed { .. } => Some(drag),
            Drag::Select { pane } => {
                self.select_to(conn, g, pane, event);
                Some(drag)
            }
        };
        if event.release {
            if let Some(Drag::Select { pane }) = next {
                self.copy_selection(conn, pane);
            }
            return;
        }
        if let Some(s) = self.view_scroll(conn) {
            s.drag = next;
        }
    }

    /// Moves the selection's end to the pointer, scrolling a line when it
    /// is above or below the pane.
    fn select_to(&mut self, conn: ConnId, g: &Geometry, pane: PaneId, event: MouseEvent) {
        let Some(rect) = g.rect_of(pane) else {
            return;
        };
        let Some(active) = self
            .view_scroll(conn)
            .and_then(|s| s.active.as_mut())
            .filter(|a| a.pane == pane)
        else {
            return;
        };
        if event.y < rect.y {
            active.state.scroll_by(-1);
        } else if u32::from(event.y) >= rect.bottom() {
            active.state.scroll_by(1);
        }
        let head = point_in(&active.state, rect, event.x, event.y);
        if let Some(sel) = active.state.selection.as_mut() {
            sel.head = head;
        }
        self.mark_view_stale(conn);
    }

    /// The button was let go after a selection: it goes to the client's
    /// clipboard, and a scroll mode the drag opened closes.
    fn copy_selection(&mut self, conn: ConnId, pane: PaneId) {
        let Some(active) = self
            .conns
            .get_mut(&conn)
            .and_then(|c| c.tab_view_mut())
            .and_then(|v| v.scroll.active.as_mut())
            .filter(|a| a.pane == pane)
        else {
            return;
        };
        let Some(p) = self.panes.get(&pane.get()) else {
            return;
        };
        let text = match active.state.selection {
            Some(sel) => ok(sel.text(&mut TermLines(p.screen()))),
            None => return,
        };
        if active.by_drag {
            self.leave_scroll(conn);
        } else {
            active.state.selection = None;
            self.mark_view_stale(conn);
        }
        if !text.is_empty() {
            self.copy_to_client(conn, &text);
        }
    }

    /// Moves the border at `at` (a column if `vertical`, else a row; the
    /// press was at `along` on it) to `to` as far as the panes allow;
    /// returns where it is now. The split it belongs to is found by
    /// trying each pane's nearest split that way on a copy of the layout:
    /// the one whose move takes the border from under the pointer.
    fn move_border(
        &mut self,
        tab: TabId,
        g: &Geometry,
        vertical: bool,
        at: u16,
        along: u16,
        to: u16,
    ) -> u16 {
        if to == at {
            return at;
        }
        let forward = to > at;
        let side = match (vertical, forward) {
            (true, true) => Side::Right,
            (true, false) => Side::Left,
            (false, true) => Side::Down,
            (false, false) => Side::Up,
        };
        let Some(t) = self.tree.tabs.get(&tab) else {
            return at;
        };
        let (cols, rows) = self.tab_size(tab);
        let area = LayoutRect::area(cols, rows);
        let next = if forward {
            at + 1
        } else {
            at.saturating_sub(1)
        };
        let cell = |g: &Geometry, p: u16| {
            if vertical {
                g.is_border(p, along)
            } else {
                g.is_border(along, p)
            }
        };
        // Of the moves that do, the one that moves fewest other borders
        // that way: a split holding a nested one of the same direction
        // moves both.
        let owner = t
            .layout
            .panes()
            .into_iter()
            .filter_map(|p| {
                let mut trial = t.layout.clone();
                if trial.resize_split(p, side, 1, area).unwrap_or(0) == 0 {
                    return None;
                }
                let moved = lay_out(&trial, None, g.area);
                if cell(&moved, at) || !cell(&moved, next) {
                    return None;
                }
                let changed = g
                    .borders
                    .iter()
                    .filter(|b| b.vertical == vertical && !moved.borders.contains(b))
                    .count();
                Some((changed, p))
            })
            .min_by_key(|(changed, _)| *changed)
            .map(|(_, p)| p);
        let Some(owner) = owner else {
            return at;
        };
        let cells = to.abs_diff(at);
        match self.edit_tree(|t| t.resize_split(owner, side, cells, area)) {
            Ok(moved) if forward => at + moved,
            Ok(moved) => at.saturating_sub(moved),
            Err(_) => at,
        }
    }
}
