//! ptyd's tree as tmux sees it: a workspace is a session (`$N` is `wN`), a
//! tab a window (`@N` is `tN`, its index its place in the workspace), a
//! pane a pane (`%N` is `pN`, its index its place in the tab's layout,
//! left to right and top to bottom). Read once per command from `tree`,
//! and again after a command changed it.
//!
//! Names: tmux's default session names are numbers (`0`, `1`), which
//! ptyd refuses as names because a target must mean one thing (`7` is
//! pane p7). So a tmux name that ptyd would take for an id is stored with
//! a leading `~` (`~0`), and a name that starts with `~` gets one more;
//! tmux tools see the name they gave, `ptyd ls` the stored one.

use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Pane {
    pub num: u64,
    pub index: usize,
    pub active: bool,
    pub info: Value,
}

impl Pane {
    pub fn id(&self) -> String {
        format!("p{}", self.num)
    }
    pub fn running(&self) -> bool {
        self.info["state"] == "running"
    }
    pub fn cols(&self) -> u64 {
        self.info["cols"].as_u64().unwrap_or(80)
    }
    pub fn rows(&self) -> u64 {
        self.info["rows"].as_u64().unwrap_or(24)
    }
    pub fn pid(&self) -> Option<u64> {
        self.info["pid"].as_u64()
    }
}

#[derive(Debug, Clone)]
pub struct Window {
    pub num: u64,
    pub index: usize,
    pub name: String,
    pub active: bool,
    pub zoomed: bool,
    pub panes: Vec<Pane>,
    /// tmux's layout string of the window's panes (`window_layout`).
    pub layout: String,
}

impl Window {
    pub fn id(&self) -> String {
        format!("t{}", self.num)
    }
    pub fn active_pane(&self) -> Option<&Pane> {
        self.panes
            .iter()
            .find(|p| p.active)
            .or_else(|| self.panes.first())
    }
}

#[derive(Debug, Clone)]
pub struct Session {
    pub num: u64,
    pub name: String,
    pub active: bool,
    pub windows: Vec<Window>,
}

impl Session {
    pub fn id(&self) -> String {
        format!("w{}", self.num)
    }
    /// When its oldest pane was created, in Unix seconds.
    pub fn created(&self) -> u64 {
        self.windows
            .iter()
            .flat_map(|w| &w.panes)
            .filter_map(|p| p.info["created_unix_ms"].as_u64())
            .min()
            .unwrap_or(0)
            / 1000
    }
}

#[derive(Debug, Clone, Default)]
pub struct View {
    pub sessions: Vec<Session>,
}

/// Where a pane is: indexes into `View::sessions`, its windows and panes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    pub session: usize,
    pub window: usize,
    pub pane: usize,
}

impl At {
    /// No place: a format expanded here sees only the server's variables
    /// (`display-message` with no session, as tmux's target may fail).
    pub const NOWHERE: At = At {
        session: usize::MAX,
        window: 0,
        pane: 0,
    };
}

impl View {
    pub fn from_tree(tree: &Value) -> View {
        let sessions = tree["workspaces"]
            .as_array()
            .into_iter()
            .flatten()
            .map(session_from)
            // tmux has no empty sessions or windows: a workspace or tab
            // whose last pane was removed is not shown.
            .filter(|s: &Session| !s.windows.is_empty())
            .collect();
        View { sessions }
    }

    pub fn pane(&self, at: At) -> &Pane {
        &self.sessions[at.session].windows[at.window].panes[at.pane]
    }

    pub fn window(&self, at: At) -> &Window {
        &self.sessions[at.session].windows[at.window]
    }

    pub fn session(&self, at: At) -> &Session {
        &self.sessions[at.session]
    }

    /// Every pane's place, sessions in order.
    pub fn all_panes(&self) -> Vec<At> {
        let mut out = Vec::new();
        for (s, session) in self.sessions.iter().enumerate() {
            for (w, window) in session.windows.iter().enumerate() {
                for p in 0..window.panes.len() {
                    out.push(At {
                        session: s,
                        window: w,
                        pane: p,
                    });
                }
            }
        }
        out
    }

    pub fn find_pane_num(&self, num: u64) -> Option<At> {
        self.all_panes()
            .into_iter()
            .find(|&at| self.pane(at).num == num)
    }

    /// The session's place with its active window and pane (pane 0 and
    /// window 0 where it has none, which only an empty session lacks).
    pub fn session_at(&self, session: usize) -> At {
        let s = &self.sessions[session];
        let window = s.windows.iter().position(|w| w.active).unwrap_or(0);
        self.window_at(session, window)
    }

    pub fn window_at(&self, session: usize, window: usize) -> At {
        let pane = self.sessions[session]
            .windows
            .get(window)
            .and_then(|w| w.panes.iter().position(|p| p.active))
            .unwrap_or(0);
        At {
            session,
            window,
            pane,
        }
    }

    pub fn has_pane(&self, at: At) -> bool {
        self.sessions
            .get(at.session)
            .and_then(|s| s.windows.get(at.window))
            .is_some_and(|w| at.pane < w.panes.len())
    }
}

fn num_of(id: &Value) -> u64 {
    id.as_str()
        .and_then(|s| s.get(1..))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn session_from(ws: &Value) -> Session {
    let windows = ws["tabs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|tab| tab["panes"].as_array().is_some_and(|p| !p.is_empty()))
        .enumerate()
        .map(|(index, tab)| window_from(index, tab))
        .collect();
    Session {
        num: num_of(&ws["id"]),
        name: tmux_name(ws["name"].as_str().unwrap_or("")),
        active: ws["active"].as_bool().unwrap_or(false),
        windows,
    }
}

fn window_from(index: usize, tab: &Value) -> Window {
    let focus = num_of(&tab["focus"]);
    let mut order = Vec::new();
    layout_order(&tab["layout"], &mut order, 0);
    let infos: Vec<&Value> = tab["panes"].as_array().into_iter().flatten().collect();
    // Layout order where the layout names the panes, else the tree's order.
    let mut sorted: Vec<&Value> = order
        .iter()
        .filter_map(|n| infos.iter().copied().find(|p| num_of(&p["id"]) == *n))
        .collect();
    for info in &infos {
        if !sorted.iter().any(|p| p["id"] == info["id"]) {
            sorted.push(info);
        }
    }
    let panes = sorted
        .into_iter()
        .enumerate()
        .map(|(index, info)| {
            let num = num_of(&info["id"]);
            Pane {
                num,
                index,
                active: num == focus,
                info: info.clone(),
            }
        })
        .collect();
    let layout = layout_string(&tab["layout"], &infos);
    Window {
        num: num_of(&tab["id"]),
        index,
        name: tab["name"].as_str().unwrap_or("").to_string(),
        active: tab["active"].as_bool().unwrap_or(false),
        zoomed: !tab["zoom"].is_null(),
        panes,
        layout,
    }
}

/// A layout as tmux lays it out: panes, and splits of one direction
/// with their children (ptyd's binary splits of one direction, nested,
/// are one tmux split).
enum Cell {
    Pane {
        num: u64,
        w: u64,
        h: u64,
    },
    Split {
        across: bool,
        children: Vec<Cell>,
        w: u64,
        h: u64,
    },
}

impl Cell {
    fn size(&self) -> (u64, u64) {
        match self {
            Cell::Pane { w, h, .. } | Cell::Split { w, h, .. } => (*w, *h),
        }
    }
}

fn cell(node: &Value, infos: &[&Value], depth: usize) -> Cell {
    let size_of = |num: u64| {
        infos
            .iter()
            .find(|p| num_of(&p["id"]) == num)
            .map(|p| {
                (
                    p["cols"].as_u64().unwrap_or(80),
                    p["rows"].as_u64().unwrap_or(24),
                )
            })
            .unwrap_or((80, 24))
    };
    let split = node.get("split").filter(|_| depth <= MAX_LAYOUT_DEPTH);
    let Some(split) = split else {
        let num = node.get("pane").map(num_of).unwrap_or(0);
        let (w, h) = size_of(num);
        return Cell::Pane { num, w, h };
    };
    let across = split["direction"] == "horizontal";
    let mut children = Vec::new();
    for part in [&split["first"], &split["second"]] {
        match cell(part, infos, depth + 1) {
            Cell::Split {
                across: same,
                children: inner,
                ..
            } if same == across => children.extend(inner),
            other => children.push(other),
        }
    }
    let sizes: Vec<(u64, u64)> = children.iter().map(Cell::size).collect();
    let gaps = sizes.len().saturating_sub(1) as u64;
    let (w, h) = if across {
        (
            sizes.iter().map(|s| s.0).sum::<u64>() + gaps,
            sizes.iter().map(|s| s.1).max().unwrap_or(0),
        )
    } else {
        (
            sizes.iter().map(|s| s.0).max().unwrap_or(0),
            sizes.iter().map(|s| s.1).sum::<u64>() + gaps,
        )
    };
    Cell::Split {
        across,
        children,
        w,
        h,
    }
}

fn render(cell: &Cell, x: u64, y: u64, out: &mut String) {
    match cell {
        Cell::Pane { num, w, h } => out.push_str(&format!("{w}x{h},{x},{y},{num}")),
        Cell::Split {
            across,
            children,
            w,
            h,
        } => {
            out.push_str(&format!("{w}x{h},{x},{y}"));
            out.push(if *across { '{' } else { '[' });
            let (mut cx, mut cy) = (x, y);
            for (i, child) in children.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                render(child, cx, cy, out);
                let (cw, ch) = child.size();
                if *across {
                    cx += cw + 1;
                } else {
                    cy += ch + 1;
                }
            }
            out.push(if *across { '}' } else { ']' });
        }
    }
}

/// tmux's layout string: its checksum, then the cells.
fn layout_string(node: &Value, infos: &[&Value]) -> String {
    let mut body = String::new();
    render(&cell(node, infos, 0), 0, 0, &mut body);
    let mut sum: u16 = 0;
    for b in body.bytes() {
        sum = (sum >> 1) | ((sum & 1) << 15);
        sum = sum.wrapping_add(u16::from(b));
    }
    format!("{sum:04x},{body}")
}

/// Deepest layout walked: the server nests at most a few dozen splits.
const MAX_LAYOUT_DEPTH: usize = 64;

fn layout_order(node: &Value, out: &mut Vec<u64>, depth: usize) {
    if depth > MAX_LAYOUT_DEPTH {
        return;
    }
    if let Some(pane) = node.get("pane") {
        out.push(num_of(pane));
    } else if let Some(split) = node.get("split") {
        layout_order(&split["first"], out, depth + 1);
        layout_order(&split["second"], out, depth + 1);
    }
}

/// A window name as tmux's rename-window stores it (vis(3) with
/// `VIS_OCTAL | VIS_CSTYLE | VIS_TAB | VIS_NL`): a backslash doubled,
/// C escapes for the usual control characters, other control characters
/// as three octal digits; printable text (UTF-8 included) as it is.
pub fn vis_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{b}' => out.push_str("\\v"),
            '\u{c}' => out.push_str("\\f"),
            '\0' => out.push_str("\\000"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\{:03o}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// The name ptyd stores for a tmux session name (module doc).
pub fn ptyd_name(tmux: &str) -> String {
    if tmux.starts_with('~') || crate::validate::name(tmux).is_err() {
        format!("~{tmux}")
    } else {
        tmux.to_string()
    }
}

/// The tmux session name for a stored name.
pub fn tmux_name(stored: &str) -> String {
    stored.strip_prefix('~').unwrap_or(stored).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn layouts_are_tmux_layout_strings() {
        // As tmux 3.3a gives it for an 80x24 window split -h, then -v.
        let layout = serde_json::json!({"split": {"direction": "horizontal", "ratio": 0.5,
            "first": {"pane": "p0"},
            "second": {"split": {"direction": "vertical", "ratio": 0.5,
                "first": {"pane": "p1"}, "second": {"pane": "p2"}}}}});
        let infos = [
            serde_json::json!({"id": "p0", "cols": 40, "rows": 24}),
            serde_json::json!({"id": "p1", "cols": 39, "rows": 12}),
            serde_json::json!({"id": "p2", "cols": 39, "rows": 11}),
        ];
        let refs: Vec<&Value> = infos.iter().collect();
        assert_eq!(
            layout_string(&layout, &refs),
            "d67e,80x24,0,0{40x24,0,0,0,39x24,41,0[39x12,41,0,1,39x11,41,13,2]}"
        );
    }

    use super::*;

    #[test]
    fn renamed_windows_are_escaped_as_tmux_escapes_them() {
        assert_eq!(vis_name(r"hello \ wazzup 0"), r"hello \\ wazzup 0");
        assert_eq!(vis_name("a\tb\nc\u{1}é"), r"a\tb\nc\001é");
    }

    #[test]
    fn names_tmux_gives_survive_the_round_trip() {
        for name in ["0", "12", "p3", "~x", "work", "w7", "my session"] {
            let stored = ptyd_name(name);
            assert!(
                crate::validate::name(&stored).is_ok() || stored.len() > 128,
                "{stored:?} is a name ptyd takes"
            );
            assert_eq!(tmux_name(&stored), name);
        }
        assert_eq!(ptyd_name("work"), "work");
        assert_eq!(ptyd_name("0"), "~0");
    }

    #[test]
    fn panes_are_numbered_in_layout_order() {
        let tree = serde_json::json!({"workspaces": [{"id": "w2", "name": "~0", "active": true,
            "tabs": [{"id": "t4", "name": "dev", "active": true, "focus": "p9", "zoom": null,
              "layout": {"split": {"direction": "horizontal", "ratio": 0.5,
                 "first": {"pane": "p9"}, "second": {"split": {"direction": "vertical",
                   "ratio": 0.5, "first": {"pane": "p3"}, "second": {"pane": "p5"}}}}},
              "panes": [{"id": "p3"}, {"id": "p5"}, {"id": "p9"}]}]}]});
        let view = View::from_tree(&tree);
        let s = &view.sessions[0];
        assert_eq!((s.num, s.name.as_str()), (2, "0"));
        let nums: Vec<u64> = s.windows[0].panes.iter().map(|p| p.num).collect();
        assert_eq!(nums, [9, 3, 5]);
        assert!(s.windows[0].panes[0].active);
    }
}
