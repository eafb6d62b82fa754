//! A tab view's keys and what they run: the bytes a client typed fed to
//! its keyboard's state machine (`view::bindings`) under its prefix, the
//! rest typed into its focused pane, mouse reports, and the actions its
//! bindings run (splits, focus, zoom, tabs, borders, the key list), each
//! moving the client's own view and the tab's default.

use super::connection::ConnId;
use super::tab_view::cwd_of_osc7;
use crate::model::{PaneId, TabId, WorkspaceId};
use crate::protocol::methods;
use crate::server::Server;
use crate::view::bindings::{self, Action, Mode, Out};
use crate::view::geometry::Dir;
use crate::view::prompt::{Line, Purpose};
use crate::workspace::layout::{Direction, Rect as LayoutRect, Side};
use serde_json::json;
use std::time::Duration;

/// How far one resize key moves a border, in cells (tmux's C-arrows).
const RESIZE_CELLS: u16 = 1;

impl Server {
    /// Keys attached client `conn` typed in the tab view (an INPUT frame,
    /// or read from its terminal): a scroll mode's first, else bindings
    /// under the prefix run and the rest goes to the focused pane.
    pub(in crate::server) fn view_keys(&mut self, conn: ConnId, bytes: &[u8]) {
        if !self.scroll_keys(conn, bytes) {
            self.view_feed_keys(conn, bytes);
        }
    }

    pub(super) fn view_feed_keys(&mut self, conn: ConnId, bytes: &[u8]) {
        let bindings = self.bindings().clone();
        let Some(a) = self.conns.get_mut(&conn).and_then(|c| c.attachment_mut()) else {
            return;
        };
        let read_only = a.read_only;
        let Some(v) = a.view.tab.as_mut() else {
            return;
        };
        let before = v.keys.clone();
        // Any key puts the key list away (and is not taken for more).
        if v.overlay.take().is_some() {
            a.view.stale = true;
            self.stale_views = true;
            return;
        }
        let outs = bindings::feed(&mut v.keys, bytes, v.prefix, &bindings);
        let prefix = v.prefix;
        if v.keys != before {
            a.view.stale = true;
            self.stale_views = true;
        }
        let outer = self.view_actor.replace(conn);
        self.run_outs(conn, outs, prefix, read_only);
        self.view_actor = outer;
    }

    /// What client `conn`'s keys came to, in order, until one ends its
    /// view.
    fn run_outs(&mut self, conn: ConnId, outs: Vec<Out>, prefix: u8, read_only: bool) {
        for out in outs {
            match out {
                Out::Typed(bytes) => {
                    if read_only {
                        continue;
                    }
                    self.view_type(conn, &bytes);
                }
                Out::Run(action) => self.run_action(conn, action, read_only),
                Out::Unbound(key) => self.view_say(
                    conn,
                    format!("no binding for {} {key}", bindings::prefix_name(prefix)),
                ),
                Out::Confirmed(Action::Close) => self.view_close(conn),
                Out::Confirmed(_) => {}
                Out::Cancelled | Out::Edited => self.mark_view_stale(conn),
                Out::PromptDone(Purpose::RenameTab, name) => self.view_rename(conn, name),
                Out::PromptDone(Purpose::Command, line) => self.run_prompt_line(conn, line),
                Out::Chosen(target) => self.chosen(conn, target),
                Out::Mouse(event) => self.view_pointer(conn, event, read_only),
            }
            if !self
                .conns
                .get(&conn)
                .is_some_and(|c| c.tab_view().is_some() && c.closing.is_none())
            {
                return;
            }
        }
    }

    /// A click on another pane focuses it; a report over the focused pane
    /// goes to its program, in the pane's coordinates, if it asked for
    /// the mouse; anything else (borders, the status line) is dropped.
    pub(super) fn view_mouse(
        &mut self,
        conn: ConnId,
        event: bindings::MouseEvent,
        read_only: bool,
    ) {
        let Some(g) = self.view_geometry(conn) else {
            return;
        };
        let Some(pane) = g.pane_at(event.x, event.y) else {
            return;
        };
        let focus = self.view_of(conn).map(|v| v.focus);
        if read_only {
            return;
        }
        if Some(pane) != focus {
            if event.is_left_press() {
                self.view_focus(conn, pane);
            }
            return;
        }
        let (Some(rect), Some(p)) = (g.rect_of(pane), self.panes.get(&pane.get())) else {
            return;
        };
        let modes = p.screen().modes();
        let motion = event.button & 32 != 0;
        let wanted = match modes.mouse {
            crate::term::MouseMode::Off => false,
            crate::term::MouseMode::X10 => !motion && !event.release,
            crate::term::MouseMode::Normal => !motion,
            crate::term::MouseMode::Button | crate::term::MouseMode::Any => true,
        };
        if !wanted {
            return;
        }
        let sgr = modes.mouse_encoding == crate::term::MouseEncoding::Sgr;
        let bytes = event.encode(event.x - rect.x, event.y - rect.y, sgr);
        self.view_type(conn, &bytes);
    }

    fn view_type(&mut self, conn: ConnId, bytes: &[u8]) {
        let Some(pane) = self.conns.get(&conn).and_then(|c| c.attached_pane()) else {
            return;
        };
        if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut()) {
            v.typed = true;
        }
        if let Err((msg, _)) = self.type_into(conn, pane, bytes) {
            self.log.log("input_dropped", &msg);
            self.view_say(
                conn,
                format!("{msg}; {} typed bytes were not delivered", bytes.len()),
            );
        }
    }

    fn run_action(&mut self, conn: ConnId, action: Action, read_only: bool) {
        let Some(tab) = self.view_tab(conn) else {
            return;
        };
        // Moving the focus changes only what this client looks at when it
        // is read-only (`view_focus`), so it is no change to refuse.
        let changes = !matches!(
            action,
            Action::Detach
                | Action::ListKeys
                | Action::Scroll
                | Action::ScrollPageUp
                | Action::NextTab
                | Action::PrevTab
                | Action::SelectTab(_)
                | Action::ChooseTree
                | Action::Focus(_)
                | Action::FocusNext
        );
        if read_only && changes {
            self.view_say(conn, "read-only: this client changes nothing".into());
            return;
        }
        let Some(t) = self.tree.tabs.get(&tab) else {
            return;
        };
        let Some(focus) = self.view_of(conn).map(|v| v.focus) else {
            return;
        };
        let workspace = t.workspace;
        match action {
            Action::SendPrefix => {
                let prefix = self
                    .conns
                    .get(&conn)
                    .and_then(|c| c.tab_view())
                    .map_or(0x1c, |v| v.prefix);
                self.view_type(conn, &[prefix]);
            }
            Action::Detach => {
                let payload = json!({ "reason": "detached", "message": "detached" });
                self.end_attachment(conn, &payload, false);
            }
            Action::SplitRight | Action::SplitDown => self.view_split(conn, focus, action),
            Action::Focus(dir) => {
                let next = self
                    .view_geometry(conn)
                    .and_then(|g| g.neighbour(focus, dir));
                match next {
                    Some(p) => self.view_focus(conn, p),
                    None => self.view_say(conn, format!("no pane {} of {focus}", dir_word(dir))),
                }
            }
            Action::FocusNext => {
                let panes = t.layout.panes();
                let at = panes.iter().position(|p| *p == focus).unwrap_or(0);
                let next = panes[(at + 1) % panes.len()];
                self.view_focus(conn, next);
            }
            Action::Zoom => self.view_zoom(conn),
            Action::Close => {
                if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut()) {
                    v.keys = Mode::Confirm(Action::Close);
                }
                self.mark_view_stale(conn);
            }
            Action::NewTab => self.view_new_tab(conn, focus, workspace),
            Action::NextTab | Action::PrevTab | Action::SelectTab(_) => {
                self.view_select_tab(conn, tab, workspace, action)
            }
            Action::RenameTab => {
                if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut()) {
                    v.keys = Mode::Prompt {
                        purpose: Purpose::RenameTab,
                        line: Line::default(),
                    };
                }
                self.mark_view_stale(conn);
            }
            Action::Scroll | Action::ScrollPageUp => {
                self.enter_scroll(conn, focus, action == Action::ScrollPageUp, false);
            }
            Action::Resize(dir) => self.view_resize(conn, tab, focus, dir),
            Action::ListKeys => self.view_list_keys(conn),
            Action::CommandPrompt => self.open_command_prompt(conn),
            Action::ChooseTree => self.open_chooser(conn),
        }
    }

    /// A split of the focused pane, right or down, in its directory.
    fn view_split(&mut self, conn: ConnId, focus: PaneId, action: Action) {
        let direction = if action == Action::SplitRight {
            Direction::Horizontal
        } else {
            Direction::Vertical
        };
        let cwd = self
            .panes
            .get(&focus.get())
            .and_then(|p| p.screen().cwd().and_then(cwd_of_osc7));
        let req = methods::PaneCreate {
            split: Some(focus.to_string()),
            direction: Some(direction),
            cwd,
            ..Default::default()
        };
        if let Err(e) = self.pane_create(conn, req) {
            self.view_say(conn, format!("split: {}", e.0.message));
        }
    }

    /// A new tab in the view's workspace, shown at once.
    fn view_new_tab(&mut self, conn: ConnId, focus: PaneId, workspace: WorkspaceId) {
        let cwd = self
            .panes
            .get(&focus.get())
            .and_then(|p| p.screen().cwd().and_then(cwd_of_osc7));
        let req = methods::PaneCreate {
            workspace: Some(workspace.to_string()),
            cwd,
            ..Default::default()
        };
        match self.pane_create(conn, req) {
            Ok(Some(info)) => {
                let new_tab = info["id"]
                    .as_str()
                    .and_then(|id| id.parse::<PaneId>().ok())
                    .and_then(|p| self.tree.tab_of(p));
                if let Some(new_tab) = new_tab {
                    self.show_tab(conn, new_tab);
                }
            }
            Ok(None) => {}
            Err(e) => self.view_say(conn, format!("new tab: {}", e.0.message)),
        }
    }

    /// The next, previous or `n`th tab of the workspace.
    fn view_select_tab(
        &mut self,
        conn: ConnId,
        tab: TabId,
        workspace: WorkspaceId,
        action: Action,
    ) {
        let tabs = self
            .tree
            .workspaces
            .get(&workspace)
            .map(|w| w.tabs.clone())
            .unwrap_or_default();
        let at = tabs.iter().position(|t| *t == tab).unwrap_or(0);
        let n = tabs.len().max(1);
        let want = match action {
            Action::NextTab => Some((at + 1) % n),
            Action::PrevTab => Some((at + n - 1) % n),
            Action::SelectTab(i) => (i < tabs.len()).then_some(i),
            _ => None,
        };
        match want.and_then(|i| tabs.get(i).copied()) {
            Some(t) => self.show_tab(conn, t),
            None => self.view_say(
                conn,
                format!(
                    "no tab {}",
                    match action {
                        Action::SelectTab(i) => i,
                        _ => 0,
                    }
                ),
            ),
        }
    }

    /// The border by the focused pane moved one cell toward `dir`.
    fn view_resize(&mut self, conn: ConnId, tab: TabId, focus: PaneId, dir: Dir) {
        let side = match dir {
            Dir::Left => Side::Left,
            Dir::Right => Side::Right,
            Dir::Up => Side::Up,
            Dir::Down => Side::Down,
        };
        let (cols, rows) = self.tab_size(tab);
        let area = LayoutRect::area(cols, rows);
        match self.edit_tree(|t| t.resize_split(focus, side, RESIZE_CELLS, area)) {
            Ok(moved) if moved > 0 => {}
            Ok(_) => self.view_say(
                conn,
                format!("the border by {focus} cannot move {}", dir_word(dir)),
            ),
            Err(_) => self.view_say(
                conn,
                format!("{focus} has no border to move {}", dir_word(dir)),
            ),
        }
    }

    /// The key list over the panes, until the next key.
    fn view_list_keys(&mut self, conn: ConnId) {
        let name = bindings::prefix_name(
            self.conns
                .get(&conn)
                .and_then(|c| c.tab_view())
                .map_or(0x1c, |v| v.prefix),
        );
        let mut lines = vec![format!(
            "keys after the prefix {name} (any key closes this)"
        )];
        lines.extend(self.bindings().list());
        if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut()) {
            v.overlay = Some(lines);
        }
        self.mark_view_stale(conn);
    }

    /// Client `conn` focuses `pane` (a pane of the tab it shows), zoomed
    /// on it if it was zoomed; the tab's default follows (unless the client
    /// is read-only), no other client.
    pub(super) fn view_focus(&mut self, conn: ConnId, pane: PaneId) {
        let read_only = (self.conns.get(&conn))
            .and_then(|c| c.attachment())
            .is_none_or(|a| a.read_only);
        if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut()) {
            v.focus = pane;
        }
        self.mark_view_stale(conn);
        // A read-only client looks where it likes; the tab's default focus,
        // which new clients and requests follow, is for the others to move.
        if !read_only {
            self.edit_tree(|t| t.focus(pane));
        }
    }

    /// Client `conn` zooms its focused pane, or unzooms; the tab's
    /// default follows, no other client.
    fn view_zoom(&mut self, conn: ConnId) {
        let Some((tab, focus, zoom)) = (self.conns.get(&conn))
            .and_then(|c| c.tab_view())
            .map(|v| (v.tab, v.focus, !v.zoom))
        else {
            return;
        };
        let split = (self.tree.tabs.get(&tab))
            .is_some_and(|t| matches!(t.layout, crate::workspace::layout::Layout::Split { .. }));
        if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut()) {
            v.zoom = zoom && split;
        }
        self.mark_view_stale(conn);
        self.edit_tree(|t| t.zoom(focus, Some(zoom)));
    }

    /// Client `conn` shows `tab` from now on, at the tab's default focus
    /// and zoom (the tab becomes its workspace's active one, for a bare
    /// `ptyd attach`).
    pub(super) fn show_tab(&mut self, conn: ConnId, tab: TabId) {
        let default = (self.tree.tabs.get(&tab)).map(|t| (t.focus, t.zoom.is_some()));
        if let Some(v) = self.conns.get_mut(&conn).and_then(|c| c.tab_view_mut())
            && let Some((focus, zoom)) = default
        {
            v.show(tab, focus, zoom);
        }
        self.edit_tree(|t| t.select_tab(tab));
        self.mark_view_stale(conn);
        self.sync_views();
    }

    fn view_close(&mut self, conn: ConnId) {
        let Some(focus) = self.view_of(conn).map(|v| v.focus.get()) else {
            return;
        };
        if self.panes.get(&focus).is_some_and(|p| p.is_running()) {
            self.kill_pane(
                focus,
                crate::sys::SIGKILL,
                Duration::ZERO,
                crate::server::panes::pane::ExitReason::Killed,
            );
        }
        self.remove_pane(focus);
        self.mark_view_stale(conn);
    }

    fn view_rename(&mut self, conn: ConnId, name: String) {
        let Some(tab) = self.view_tab(conn) else {
            return;
        };
        let name = name.trim().to_string();
        if let Err(e) = crate::validate::label(&name) {
            self.view_say(conn, format!("tab name {e}"));
            return;
        }
        if let Some(t) = self.tree.tabs.get_mut(&tab) {
            t.name = name;
            self.mark_dirty();
        }
        self.mark_view_stale(conn);
    }
}

fn dir_word(d: Dir) -> &'static str {
    match d {
        Dir::Left => "left",
        Dir::Right => "right",
        Dir::Up => "above",
        Dir::Down => "below",
    }
}
