//! Attached clients that show a whole tab (`ptyd attach` without
//! `--pane-only`): each one's view (the tab it shows, its keyboard state,
//! its message line and the compositor holding the frame it was last
//! sent), its frames and the layout the panes are sized to (its keys are
//! in `tab_keys.rs`).
//!
//! Each client has its own tab, focus and zoom (`TabView`); the tab's
//! focus and zoom in the Tree are its default, which a new client starts
//! with and the snapshot keeps. A client's keys and clicks move its own
//! focus (and the default); a request that changes a tab's default
//! (`ptyd zoom`, a split from the CLI) moves every client of the tab
//! (`follow_tree`), `pane.focus` every client of the workspace or one
//! client; `pane.zoom` naming a client zooms that client's view alone. A
//! client is told its view (`VIEW` frame) whenever it changes,
//! and hands it back when it reconnects after a crash; a live upgrade
//! carries it.
//!
//! Sizes: the panes of a tab are sized to their rectangles in the area of
//! the tab's clients under the `window_size` policy (per tab); a client
//! of another size is shown that layout clipped or padded. A zoomed pane
//! takes the whole area only when every client that sizes the tab zoomed
//! it: one client's zoom never resizes a pane another client shows in its
//! rectangle (the zooming client sees it at that size, padded). Frames: at most
//! one per [`FRAME_INTERVAL`] per client, so a pane flooding output costs
//! its neighbours no more than that; a change after a quiet spell goes out
//! in the turn it came, and so does the focused pane's first output after
//! the client typed into it (the echo), however busy the other panes are,
//! and whether or not the client has taken the frames before it: one
//! frame more per keystroke at most.

use super::connection::{ConnId, ConnMode};
use crate::model::{PaneId, TabId};
use crate::protocol::frame;
use crate::protocol::methods;
use crate::protocol::{ErrorCode, RpcError};
use crate::server::Server;
use crate::server::timers::TimerKind;
use crate::view::bindings::{Action, Bindings, Mode};
use crate::view::compose::{Compositor, Scene};
use crate::view::geometry::{Geometry, Rect, lay_out};
use crate::view::status::{self, Status, TabEntry};
use crate::view::titles;
use serde_json::json;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

/// The shortest time between two frames to one client (tmux redraws a
/// busy pane at most about every 16 ms as well).
pub const FRAME_INTERVAL: Duration = Duration::from_millis(16);
/// How long a message stays on the status line.
const MESSAGE_FOR: Duration = Duration::from_secs(4);

/// Where the status line goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusPosition {
    #[default]
    Bottom,
    Top,
    Off,
}

/// A VIEW frame's payload: a client's own view.
#[derive(Debug, PartialEq, serde::Serialize)]
struct Told {
    workspace: crate::model::WorkspaceId,
    tab: TabId,
    focus: PaneId,
    zoom: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    scroll: Option<methods::ScrollSpec>,
}

/// One client's view of a tab.
#[derive(Debug)]
pub struct TabView {
    pub tab: TabId,
    /// The client's focused pane (a pane of `tab`): its keys go there.
    pub focus: PaneId,
    /// The focused pane fills the tab for this client.
    pub zoom: bool,
    /// The client's prefix key.
    pub prefix: u8,
    pub keys: Mode,
    pub compositor: Compositor,
    message: Option<(String, Instant)>,
    /// The key list (or a command's output), shown over the panes until
    /// the next key.
    pub(super) overlay: Option<Vec<String>>,
    /// The lines entered at the `:` prompt, oldest first.
    pub history: Vec<String>,
    /// Its scroll mode over a pane, and what the mouse is dragging.
    pub scroll: super::tab_scroll::ViewScroll,
    /// What the last frame was drawn from, besides the panes' screens.
    seen: u64,
    /// The view the client was last told (`VIEW`).
    told: Option<Told>,
    last_frame: Option<Instant>,
    /// Keys went to the focused pane since the last frame that showed its
    /// output: its next output is their echo.
    pub(super) typed: bool,
    /// The focused pane printed since keys were typed into it: the next
    /// frame goes out at once, whatever the frame interval says.
    echo: bool,
    /// A frame timer is armed for this instant.
    timer_at: Option<Instant>,
    /// Tabs with output since this client last showed them.
    pub activity: std::collections::BTreeSet<TabId>,
}

impl TabView {
    pub fn new(tab: TabId, focus: PaneId, zoom: bool, prefix: u8) -> TabView {
        TabView {
            tab,
            focus,
            zoom,
            prefix,
            keys: Mode::Typing,
            compositor: Compositor::default(),
            message: None,
            overlay: None,
            history: Vec::new(),
            scroll: Default::default(),
            seen: 0,
            told: None,
            last_frame: None,
            typed: false,
            echo: false,
            timer_at: None,
            activity: Default::default(),
        }
    }

    /// The focused pane printed since keys were typed into it, and no
    /// frame has shown it yet.
    pub fn echo_due(&self) -> bool {
        self.echo
    }

    pub fn say(&mut self, message: impl Into<String>) {
        self.message = Some((message.into(), Instant::now()));
    }

    /// The key list is shown (the next key puts it away).
    pub fn has_overlay(&self) -> bool {
        self.overlay.is_some()
    }

    /// Shows `tab` focused on `focus`, zoomed or not, from now on; its
    /// activity mark goes, as the client sees it.
    pub fn show(&mut self, tab: TabId, focus: PaneId, zoom: bool) {
        (self.tab, self.focus, self.zoom) = (tab, focus, zoom);
        self.activity.remove(&tab);
    }
}

/// The part of a client's screen the tab gets, with the status line's row.
pub fn tab_area(cols: u16, rows: u16, status: StatusPosition) -> (Rect, Option<u16>) {
    match status {
        StatusPosition::Off => (Rect::new(0, 0, cols, rows), None),
        _ if rows < 2 => (Rect::new(0, 0, cols, rows), None),
        StatusPosition::Bottom => (Rect::new(0, 0, cols, rows - 1), Some(rows - 1)),
        StatusPosition::Top => (Rect::new(0, 1, cols, rows - 1), Some(0)),
    }
}

impl Server {
    fn status_position(&self) -> StatusPosition {
        self.config.status
    }

    pub(super) fn bindings(&self) -> &Bindings {
        &self.config.bindings
    }

    /// The clients showing `tab` (by number).
    pub(in crate::server) fn viewers_of(&self, tab: TabId) -> Vec<ConnId> {
        let mut ids: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.tab_view().is_some_and(|v| v.tab == tab))
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The size of the clients showing `tab` (those that may resize) under
    /// the `window_size` policy; `None` with none.
    fn clients_size(&self, tab: TabId) -> Option<(u16, u16)> {
        let sizes: Vec<(u64, u16, u16)> = self
            .viewers_of(tab)
            .iter()
            .filter_map(|id| self.conns.get(id))
            .filter_map(|c| c.attachment())
            .filter(|a| !a.read_only)
            .map(|a| (a.active, a.cols, a.rows))
            .collect();
        super::attach::pick_size(self.config.window_size, &sizes)
    }

    /// The area `tab`'s panes are laid out in while clients show it: their
    /// size less the status line.
    pub(in crate::server) fn shown_area(&self, tab: TabId) -> Option<(u16, u16)> {
        let (cols, rows) = self.clients_size(tab)?;
        let (area, _) = tab_area(cols, rows, self.status_position());
        let area = titles::pane_area(area, self.config.pane_titles);
        Some((area.cols, area.rows))
    }

    /// `tab` laid out at the tab's size (else, with only read-only
    /// clients, at `fallback`), `zoom` (a pane of it) filling it.
    pub(super) fn tab_geometry(
        &self,
        tab: TabId,
        zoom: Option<PaneId>,
        fallback: (u16, u16),
    ) -> Option<Geometry> {
        let t = self.tree.tabs.get(&tab)?;
        let (cols, rows) = self.clients_size(tab).unwrap_or(fallback);
        let (area, _) = tab_area(cols, rows, self.status_position());
        let area = titles::pane_area(area, self.config.pane_titles);
        Some(lay_out(&t.layout, zoom, area))
    }

    /// Client `conn`'s tab as it sees it: laid out with its own zoom.
    pub(super) fn view_geometry(&self, conn: ConnId) -> Option<Geometry> {
        let v = self.conns.get(&conn)?.tab_view()?;
        let zoom = v.zoom.then_some(v.focus);
        self.tab_geometry(v.tab, zoom, self.client_size(conn))
    }

    /// The zoom `tab`'s panes are sized by: the pane every client that
    /// sizes the tab (not read-only) zoomed, else none, so that one
    /// client's zoom never resizes a pane another shows in its rectangle.
    fn sizing_zoom(&self, tab: TabId) -> Option<PaneId> {
        let mut zooms = (self.viewers_of(tab).into_iter())
            .filter_map(|id| self.conns.get(&id))
            .filter(|c| c.attachment().is_some_and(|a| !a.read_only))
            .filter_map(|c| c.tab_view())
            .map(|v| v.zoom.then_some(v.focus));
        let first = zooms.next()??;
        zooms.all(|z| z == Some(first)).then_some(first)
    }

    /// Sizes every shown pane of `tab` to its rectangle. A pane whose
    /// rectangle is below the smallest PTY (2x1) keeps its size.
    pub(in crate::server) fn relayout_tab(&mut self, tab: TabId) {
        let Some(size) = self.clients_size(tab) else {
            return;
        };
        let Some(g) = self.tab_geometry(tab, self.sizing_zoom(tab), size) else {
            return;
        };
        for (pane, r) in g.panes {
            if r.cols >= 2
                && r.rows >= 1
                && self.panes.get(&pane.get()).is_some_and(|p| p.is_running())
            {
                self.resize_pane(pane.get(), r.cols, r.rows);
            }
        }
        for id in self.viewers_of(tab) {
            self.mark_view_stale(id);
        }
    }

    pub(super) fn mark_view_stale(&mut self, conn: ConnId) {
        if let Some(a) = self.conns.get_mut(&conn).and_then(|c| c.attachment_mut()) {
            a.view.stale = true;
            self.stale_views = true;
        }
    }

    /// The tab of `pane` whose clients size it, if any client shows it.
    pub(in crate::server) fn viewed_tab_of(&self, pane: u64) -> Option<TabId> {
        if !self.conns.values().any(|c| c.tab_view().is_some()) {
            return None;
        }
        let tab = self.tree.tab_of(PaneId::new(pane))?;
        (!self.viewers_of(tab).is_empty()).then_some(tab)
    }

    /// Starts showing `tab` to attached client `conn`, focused on `focus`
    /// when given (a pane of it), zoomed as `zoom` says; what is not given
    /// is the tab's default. The view becomes the tab's default, the tab
    /// its workspace's active one (a bare `ptyd attach` comes back to it).
    /// From `attach`.
    pub(in crate::server) fn start_tab_view(
        &mut self,
        conn: ConnId,
        tab: TabId,
        focus: Option<PaneId>,
        zoom: Option<bool>,
        prefix: u8,
    ) {
        let Some(t) = self.tree.tabs.get_mut(&tab) else {
            return;
        };
        if let Some(f) = focus.filter(|f| t.layout.contains(*f)) {
            t.focus = f;
        }
        let split = matches!(t.layout, crate::workspace::layout::Layout::Split { .. });
        match zoom {
            Some(true) if split => t.zoom = Some(t.focus),
            Some(_) => t.zoom = None,
            None => {}
        }
        let (focus, zoom, ws) = (t.focus, t.zoom.is_some(), t.workspace);
        if let Some(w) = self.tree.workspaces.get_mut(&ws) {
            w.active_tab = Some(tab);
        }
        self.tree.active_workspace = Some(ws);
        self.mark_dirty();
        if let Some(a) = self.conns.get_mut(&conn).and_then(|c| c.attachment_mut()) {
            a.view.tab = Some(Box::new(TabView::new(tab, focus, zoom, prefix)));
            // A view is drawn from the model: a client that falls behind
            // is drawn again once it caught up, never waited for.
            a.view.when_behind = methods::WhenBehind::Redraw;
            a.view.stale = true;
            self.stale_views = true;
        }
        self.sync_views();
    }

    /// Brings every view in line with the Tree: a tab that is gone is
    /// replaced by its workspace's active one (the attachment ends when
    /// there is none), the focus followed, the layout worked out again
    /// when the tab, its zoom or a client's size changed. Every turn,
    /// before frames are drawn.
    pub(in crate::server) fn sync_views(&mut self) {
        let ids: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.tab_view().is_some())
            .map(|(id, _)| *id)
            .collect();
        let mut relayout = Vec::new();
        for id in ids {
            let Some(tab) = self
                .conns
                .get(&id)
                .and_then(|c| c.tab_view())
                .map(|v| v.tab)
            else {
                continue;
            };
            let tab = match self.tree.tabs.get(&tab) {
                Some(_) => tab,
                None => match self.replacement_tab(id) {
                    Some(t) => t,
                    None => {
                        let payload = json!({
                            "reason": "pane_exited",
                            "message": "the last pane of this view is gone",
                        });
                        self.end_attachment(id, &payload, false);
                        continue;
                    }
                },
            };
            let t = &self.tree.tabs[&tab];
            let split = matches!(t.layout, crate::workspace::layout::Layout::Split { .. });
            let (default_focus, default_zoom) = (t.focus, t.zoom.is_some());
            let (in_tab, workspace) = (|p: PaneId| t.layout.contains(p), t.workspace);
            let Some(v) = self.conns.get_mut(&id).and_then(|c| c.tab_view_mut()) else {
                continue;
            };
            let retabbed = v.tab != tab;
            v.tab = tab;
            // A focus that left the tab (its pane closed, swapped or broken
            // out, or the tab replaced) gives way to the tab's default.
            if retabbed || !in_tab(v.focus) {
                (v.focus, v.zoom) = (default_focus, default_zoom);
            }
            v.zoom &= split;
            let (focus, zoom) = (v.focus, v.zoom);
            let told = Told {
                workspace,
                tab,
                focus,
                zoom,
                scroll: v.scroll.spec(),
            };
            let key = self.view_key(id, tab);
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            // Split borrows: the view is in the mode, the queue beside it.
            let ConnMode::Attached(a) = &mut c.mode else {
                continue;
            };
            a.pane = focus.get();
            let Some(v) = a.view.tab.as_mut() else {
                continue;
            };
            v.activity.remove(&tab);
            if v.seen != key || retabbed {
                v.seen = key;
                a.view.stale = true;
                self.stale_views = true;
                if !relayout.contains(&tab) {
                    relayout.push(tab);
                }
            }
            // Compared as it is, every turn; encoded only when it changed.
            if v.told.as_ref() != Some(&told) {
                let payload = serde_json::to_vec(&told).unwrap_or_default();
                v.told = Some(told);
                c.queue_frame_unbounded(frame::server::VIEW, &payload);
            }
        }
        for tab in relayout {
            self.relayout_tab(tab);
        }
    }

    /// The tab a client whose tab is gone shows next: its workspace's
    /// active tab, else the active workspace's.
    fn replacement_tab(&self, _conn: ConnId) -> Option<TabId> {
        let ws = self.tree.active_workspace?;
        self.tree
            .workspaces
            .get(&ws)
            .and_then(|w| w.active_tab.or(w.tabs.first().copied()))
            .or_else(|| self.tree.tabs.keys().next().copied())
    }

    /// A hash of what a view's frame depends on besides the panes' screens.
    fn view_key(&self, conn: ConnId, tab: TabId) -> u64 {
        let mut h = DefaultHasher::new();
        if let Some(t) = self.tree.tabs.get(&tab) {
            hash_layout(&t.layout, &mut h);
            t.name.hash(&mut h);
            if let Some(w) = self.tree.workspaces.get(&t.workspace) {
                w.name.hash(&mut h);
                for other in &w.tabs {
                    if let Some(o) = self.tree.tabs.get(other) {
                        o.name.hash(&mut h);
                    }
                }
            }
        }
        if let Some(a) = self.conns.get(&conn).and_then(|c| c.attachment()) {
            (a.cols, a.rows).hash(&mut h);
            if let Some(v) = &a.view.tab {
                (v.focus, v.zoom).hash(&mut h);
            }
        }
        self.clients_size(tab).hash(&mut h);
        // A reload may move the status line, or the pane titles.
        (self.status_position() as u8).hash(&mut h);
        (self.config.pane_titles as u8).hash(&mut h);
        h.finish()
    }

    /// Output of `pane` came: the views showing its tab are drawn again,
    /// and the others note activity in that tab.
    pub(in crate::server) fn note_view_output(&mut self, pane: u64) {
        let Some(tab) = self.tree.tab_of(PaneId::new(pane)) else {
            return;
        };
        let mut any = false;
        for a in self.conns.values_mut().filter_map(|c| c.attachment_mut()) {
            let attached = a.pane;
            let Some(v) = a.view.tab.as_mut() else {
                continue;
            };
            if v.tab == tab {
                a.view.stale = true;
                any = true;
                if v.typed && attached == pane {
                    v.echo = true;
                }
            } else if v.activity.insert(tab) {
                // The status line marks the tab now, not at the next
                // frame something else brings.
                a.view.stale = true;
                any = true;
            }
        }
        self.stale_views |= any;
    }

    /// Draws client `conn`'s view if it is stale and its frame interval
    /// has passed (else arms a timer for it): the bytes to queue. With
    /// `backlogged` (the client has frames still to take), only an echo's
    /// pane is drawn.
    pub(in crate::server) fn draw_tab_view(
        &mut self,
        conn: ConnId,
        now: Instant,
        backlogged: bool,
    ) -> Option<Vec<u8>> {
        let a = self.conns.get(&conn)?.attachment()?;
        let v = a.view.tab.as_ref()?;
        if backlogged && !v.echo {
            return None;
        }
        // An echo that comes before the frame interval is up, or while the
        // client has a backlog, brings only its pane: the others' changes
        // wait for the interval and for the client.
        let echo_only = v.echo && (backlogged || frame_wait(v.last_frame, now, false).is_some());
        if let Some(at) = frame_wait(v.last_frame, now, v.echo) {
            if v.timer_at != Some(at) {
                self.timers.add(at, TimerKind::ViewFrame);
                if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut()) {
                    v.timer_at = Some(at);
                }
            }
            self.stale_views = true;
            return None;
        }
        let (cols, rows, read_only) = (a.cols, a.rows, a.read_only);
        let g = self.tab_geometry(v.tab, v.zoom.then_some(v.focus), (cols, rows))?;
        let scrolled = self.scrolled_rows(conn, &g);
        let v = self.conns.get(&conn)?.tab_view()?;
        let tab = self.tree.tabs.get(&v.tab)?;
        let (_, status_row) = tab_area(cols, rows, self.status_position());
        // The titles sit in the rows the layout was given up for, which
        // are worked out at the tab's size (as `tab_geometry`).
        let overlay = match &v.keys {
            Mode::Choose(chooser) => Some(chooser.lines(usize::from(g.area.rows))),
            _ => v.overlay.clone(),
        };
        // An echo drawn in place takes the focused pane only: the status
        // line and the titles wait for the next whole frame.
        let in_place =
            echo_only && (v.compositor).draws_focused_in_place(cols, rows, overlay.is_some());
        let titles = if in_place {
            Vec::new()
        } else {
            let (tab_cols, tab_rows) = self.clients_size(v.tab).unwrap_or((cols, rows));
            let (tab_rect, _) = tab_area(tab_cols, tab_rows, self.status_position());
            let label = |p: PaneId| self.pane_label(p);
            titles::titles(&g, tab_rect, self.config.pane_titles, tab.focus, &label)
        };
        let message = v
            .message
            .as_ref()
            .filter(|(_, at)| now < *at + MESSAGE_FOR)
            .map(|(m, _)| m.clone());
        let status = status_row.filter(|_| !in_place).map(|row| {
            let line = self.status_of(conn, tab.id, read_only, message.clone());
            (row, status::render(&line, cols))
        });
        let panes = &self.panes;
        let lookup = |id: PaneId| panes.get(&id.get()).map(|p| p.screen());
        let scene = Scene {
            cols,
            rows,
            geometry: &g,
            terminals: &lookup,
            focus: v.focus,
            status,
            overlay: overlay.as_deref(),
            titles: &titles,
            line_cursor: status_row.zip(prompt_column(&v.keys)).map(|(y, x)| (x, y)),
            hide_cursor: scrolled.as_ref().is_some_and(|(p, _)| *p == v.focus),
            scrolled: scrolled.as_ref().map(|(p, rows)| (*p, &rows[..])),
            mouse: self.config.mouse && !read_only,
        };
        let a = self.conns.get_mut(&conn)?.attachment_mut()?;
        // After an echo's frame the view stays stale: the next look arms
        // the frame timer for what the other panes still owe.
        a.view.stale = echo_only;
        self.stale_views |= echo_only;
        let v = a.view.tab.as_mut()?;
        let bytes = if echo_only {
            v.compositor.update_focused(&scene)
        } else {
            v.compositor.update(&scene)
        };
        // An echo's frame leaves the other panes' changes to the next
        // frame, due when it would have been.
        if !bytes.is_empty() && !echo_only {
            v.last_frame = Some(now);
        }
        if v.echo {
            v.typed = false;
            v.echo = false;
        }
        if message.is_none() {
            v.message = None;
        }
        Some(bytes)
    }

    fn status_of(
        &self,
        conn: ConnId,
        tab: TabId,
        read_only: bool,
        message: Option<String>,
    ) -> Status {
        let t = &self.tree.tabs[&tab];
        let v = self.conns.get(&conn).and_then(|c| c.tab_view());
        let focus_id = v.map_or(t.focus, |v| v.focus);
        let ws = self.tree.workspaces.get(&t.workspace);
        let tabs = ws
            .map(|w| {
                w.tabs
                    .iter()
                    .enumerate()
                    .filter_map(|(i, id)| {
                        let other = self.tree.tabs.get(id)?;
                        Some(TabEntry {
                            number: i,
                            name: other.name.clone(),
                            current: *id == tab,
                            activity: v.is_some_and(|v| v.activity.contains(id)),
                            bell: false,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        let focus = self.panes.get(&focus_id.get());
        let title = focus
            .map(|p| {
                let title = p.screen().title();
                if title.is_empty() {
                    match p.command() {
                        crate::model::CommandSpec::Argv(argv) => argv.join(" "),
                        crate::model::CommandSpec::Shell(s) => s.clone(),
                        crate::model::CommandSpec::LoginShell => "shell".into(),
                    }
                } else {
                    title.to_string()
                }
            })
            .unwrap_or_default();
        let mut indicators = Vec::new();
        if let Some(v) = v {
            match &v.keys {
                Mode::Prefix => indicators.push("PREFIX".to_string()),
                Mode::Confirm(_) | Mode::Prompt { .. } | Mode::Choose(_) => {}
                Mode::Typing => {}
            }
            indicators.extend(v.scroll.indicator());
        }
        if read_only {
            indicators.push("READ-ONLY".into());
        }
        if v.is_some_and(|v| v.zoom) {
            indicators.push("ZOOM".into());
        }
        let exited: Vec<String> = t
            .layout
            .panes()
            .iter()
            .filter(|p| self.panes.get(&p.get()).is_some_and(|p| !p.is_running()))
            .map(|p| format!("{p} exited"))
            .collect();
        indicators.extend(exited);
        let message = match v.map(|v| &v.keys) {
            Some(Mode::Confirm(Action::Close)) => Some(format!("kill pane {focus_id}? (y/n)")),
            Some(Mode::Prompt { purpose, line }) => {
                Some(format!("{}{}", purpose.label(), line.text()))
            }
            _ => v.and_then(|v| v.scroll.message()).or(message),
        };
        Status {
            workspace: ws.map(|w| w.name.clone()).unwrap_or_default(),
            tabs,
            title: format!("{focus_id} {title}"),
            indicators,
            message,
        }
    }

    pub(super) fn view_say(&mut self, conn: ConnId, message: String) {
        if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut()) {
            v.say(message);
            self.timers
                .add(Instant::now() + MESSAGE_FOR, TimerKind::ViewFrame);
        }
        self.mark_view_stale(conn);
    }

    pub(super) fn view_of(&self, conn: ConnId) -> Option<&TabView> {
        self.conns.get(&conn)?.tab_view()
    }

    pub(super) fn view_tab(&self, conn: ConnId) -> Option<TabId> {
        self.view_of(conn).map(|v| v.tab)
    }

    /// After a change of the Tree from `before`: a tab whose default
    /// focus or zoom a request moved (not a pane leaving the tab: that
    /// moves only the views on it, in `sync_views`) moves its clients'
    /// views too, or only the acting client's while its keys run
    /// (`view_actor`).
    pub(in crate::server) fn follow_tree(&mut self, before: &crate::workspace::Tree) {
        let mut moved = Vec::new();
        for (id, t) in &self.tree.tabs {
            let Some(old) = before.tabs.get(id) else {
                continue;
            };
            let focus = (old.focus != t.focus && t.layout.contains(old.focus)).then_some(t.focus);
            let left = old.zoom.is_some_and(|z| !t.layout.contains(z));
            let zoom =
                (old.zoom.is_some() != t.zoom.is_some() && !left).then_some(t.zoom.is_some());
            if focus.is_some() || zoom.is_some() {
                moved.push((*id, focus, zoom));
            }
        }
        for (tab, focus, zoom) in moved {
            for id in self.viewers_of(tab) {
                if self.view_actor.is_some_and(|actor| actor != id) {
                    continue;
                }
                if let Some(v) = self.conns.get_mut(&id).and_then(|c| c.tab_view_mut()) {
                    v.focus = focus.unwrap_or(v.focus);
                    v.zoom = zoom.unwrap_or(v.zoom);
                }
                self.mark_view_stale(id);
            }
        }
    }

    /// `pane.focus` for the tab views: client `only`, else every client
    /// showing `pane`'s workspace, shows its tab focused on it (zoomed on
    /// it if it was zoomed). `Err` (`not_found`) names a client that is
    /// not a tab view.
    pub(in crate::server) fn focus_views(
        &mut self,
        pane: PaneId,
        only: Option<ConnId>,
    ) -> Result<(), RpcError> {
        let Some(tab) = self.tree.tab_of(pane) else {
            return Err(pane_in_no_tab(pane));
        };
        let workspace = self.tree.tabs.get(&tab).map(|t| t.workspace);
        let ids: Vec<ConnId> = match only {
            Some(id) => vec![self.view_client(id)?.0],
            None => (self.conns.iter())
                .filter_map(|(id, c)| Some((*id, c.tab_view()?.tab)))
                .filter(|(_, t)| self.tree.tabs.get(t).map(|t| t.workspace) == workspace)
                .map(|(id, _)| id)
                .collect(),
        };
        for id in ids {
            if let Some(v) = self.conns.get_mut(&id).and_then(|c| c.tab_view_mut()) {
                // Another tab is shown unzoomed; in the same one the zoom stays.
                let zoom = v.tab == tab && v.zoom;
                v.show(tab, pane, zoom);
            }
            self.mark_view_stale(id);
        }
        self.sync_views();
        Ok(())
    }

    /// `pane.zoom` with `client`: client `only`'s view zooms `pane`
    /// (default: its focus), showing its tab focused on it, or unzooms
    /// (`zoom: None` toggles, as `Tree::zoom` does); the tab's default and
    /// the other clients stay. Returns the pane's tab; `Err` (`not_found`)
    /// names a client that is not a tab view, or a pane in no tab.
    pub(in crate::server) fn zoom_view(
        &mut self,
        only: ConnId,
        pane: Option<PaneId>,
        zoom: Option<bool>,
    ) -> Result<TabId, RpcError> {
        let (id, v) = self.view_client(only)?;
        let pane = pane.unwrap_or(v.focus);
        let Some(t) = self.tree.tab_of(pane).and_then(|t| self.tree.tabs.get(&t)) else {
            return Err(pane_in_no_tab(pane));
        };
        let split = matches!(t.layout, crate::workspace::layout::Layout::Split { .. });
        let tab = t.id;
        let on = zoom.unwrap_or(!(v.tab == tab && v.zoom)) && split;
        if let Some(v) = self.conns.get_mut(&id).and_then(|c| c.tab_view_mut()) {
            // Unzooming in the same tab keeps the focus where it is.
            let focus = if v.tab != tab || on { pane } else { v.focus };
            v.show(tab, focus, on);
        }
        self.mark_view_stale(id);
        self.sync_views();
        Ok(tab)
    }

    /// Client `id`'s tab view, for a request that names the client.
    fn view_client(&self, id: ConnId) -> Result<(ConnId, &TabView), RpcError> {
        self.view_of(id).map(|v| (id, v)).ok_or_else(|| {
            RpcError::new(
                ErrorCode::NotFound,
                format!(
                    "client {id} shows no tab (it is not attached, or attached --pane-only); \
                     `ptyd clients` lists the clients and their views"
                ),
            )
        })
    }

    pub(super) fn client_size(&self, conn: ConnId) -> (u16, u16) {
        match self.conns.get(&conn).and_then(|c| c.attachment()) {
            Some(a) => (a.cols, a.rows),
            None => (80, 24),
        }
    }

    /// The client's terminal was used for something else: the view is
    /// drawn whole again.
    pub(in crate::server) fn view_redraw(&mut self, conn: ConnId) {
        if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut()) {
            v.compositor.reset();
            v.last_frame = None;
        }
        self.mark_view_stale(conn);
    }

    /// A pane of some client's tab ended (`why` says how): its clients
    /// are told on the message line and go on showing the tab.
    pub(in crate::server) fn note_view_pane_ended(&mut self, pane: u64, why: &str) {
        let Some(tab) = self.tree.tab_of(PaneId::new(pane)) else {
            return;
        };
        for id in self.viewers_of(tab) {
            self.view_say(id, why.to_string());
        }
    }
}

fn pane_in_no_tab(pane: PaneId) -> RpcError {
    RpcError::new(ErrorCode::NotFound, format!("pane {pane} is in no tab"))
}

/// Hashes a layout's shape, panes and ratios (`view_key`, every turn:
/// without formatting it).
fn hash_layout(layout: &crate::workspace::layout::Layout, h: &mut impl Hasher) {
    use crate::workspace::layout::Layout;
    match layout {
        Layout::Pane(p) => p.hash(h),
        Layout::Split {
            direction,
            ratio,
            first,
            second,
        } => {
            (*direction as u8).hash(h);
            ratio.to_bits().hash(h);
            hash_layout(first, h);
            hash_layout(second, h);
        }
    }
}

/// The column of the cursor in a prompt's line on the status line.
fn prompt_column(keys: &Mode) -> Option<u16> {
    let Mode::Prompt { purpose, line } = keys else {
        return None;
    };
    let before: String = line.text().chars().take(line.cursor()).collect();
    let width = unicode_width::UnicodeWidthStr::width(purpose.label())
        + unicode_width::UnicodeWidthStr::width(before.as_str());
    Some(u16::try_from(width).unwrap_or(u16::MAX))
}

/// When a view's next frame may go out if not `now`: a frame interval
/// after the last one, unless it carries an echo.
fn frame_wait(last: Option<Instant>, now: Instant, echo: bool) -> Option<Instant> {
    let at = last? + FRAME_INTERVAL;
    (now < at && !echo).then_some(at)
}

/// The directory an OSC 7 `file://host/path` names.
pub(super) fn cwd_of_osc7(url: &str) -> Option<String> {
    let path = url
        .strip_prefix("file://")
        .map_or(url, |rest| rest.find('/').map_or("", |i| &rest[i..]));
    (path.starts_with('/') && std::path::Path::new(path).is_dir()).then(|| path.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_wait_out_the_interval_except_an_echo() {
        let now = Instant::now();
        assert_eq!(frame_wait(None, now, false), None, "a first frame goes out");
        let last = now - FRAME_INTERVAL / 2;
        assert_eq!(
            frame_wait(Some(last), now, false),
            Some(last + FRAME_INTERVAL)
        );
        assert_eq!(
            frame_wait(Some(last), now, true),
            None,
            "an echo goes out at once"
        );
        let long_ago = now - FRAME_INTERVAL * 2;
        assert_eq!(frame_wait(Some(long_ago), now, false), None);
    }
}
