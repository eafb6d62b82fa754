//! Workspaces → tabs → a layout tree per tab → panes: the structure a user
//! arranges and a reboot must give back. Pure data with its operations; the
//! server owns one [`Tree`] and keeps panes themselves elsewhere, by id.
//!
//! Invariants (checked by [`Tree::check`], restored by the snapshot
//! loader's repairing mode and required by its strict one, `persist::tree`):
//! every tab belongs to exactly one workspace and appears once in its `tabs`
//! list; every tab's layout has at least one pane; a pane is in at most one
//! tab; a tab's focus is one of its panes and its zoom is `None` or one of
//! its panes; a workspace's active tab is one of its tabs; the active
//! workspace exists; id counters are above every id in use.

pub mod layout;

use crate::model::{PaneId, TabId, WorkspaceId};
use layout::{Direction, Layout, Preset, Rect, Side};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub struct Workspace {
    pub id: WorkspaceId,
    pub name: String,
    pub tabs: Vec<TabId>,
    pub active_tab: Option<TabId>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tab {
    pub id: TabId,
    pub name: String,
    pub workspace: WorkspaceId,
    pub layout: Layout,
    pub focus: PaneId,
    pub zoom: Option<PaneId>,
}

/// The whole structure. Id counters only go forward, also across restarts
/// (they are saved), so an id never names two different things.
#[derive(Debug, Clone, PartialEq)]
pub struct Tree {
    pub workspaces: BTreeMap<WorkspaceId, Workspace>,
    pub tabs: BTreeMap<TabId, Tab>,
    pub active_workspace: Option<WorkspaceId>,
    /// The id the next workspace gets.
    pub next_workspace_id: WorkspaceId,
    /// The id the next tab gets.
    pub next_tab_id: TabId,
}

impl Default for Tree {
    fn default() -> Tree {
        Tree::new()
    }
}

/// Name of the workspace panes go to when a request names none.
pub const DEFAULT_WORKSPACE: &str = "main";

impl Tree {
    pub fn new() -> Tree {
        Tree {
            workspaces: BTreeMap::new(),
            tabs: BTreeMap::new(),
            active_workspace: None,
            next_workspace_id: WorkspaceId::FIRST,
            next_tab_id: TabId::FIRST,
        }
    }

    /// Adds an empty workspace; `None` once workspace ids are used up
    /// (a counter restored near `u64::MAX`).
    pub fn add_workspace(&mut self, name: String) -> Option<WorkspaceId> {
        let id = self.next_workspace_id;
        self.next_workspace_id = id.next()?;
        self.workspaces.insert(
            id,
            Workspace {
                id,
                name,
                tabs: Vec::new(),
                active_tab: None,
            },
        );
        self.active_workspace.get_or_insert(id);
        Some(id)
    }

    /// The workspace named [`DEFAULT_WORKSPACE`], else the active one, else a
    /// new one with that name (`None` only when workspace ids are used up).
    pub fn default_workspace(&mut self) -> Option<WorkspaceId> {
        if let Some(ws) = self
            .workspaces
            .values()
            .find(|w| w.name == DEFAULT_WORKSPACE)
        {
            return Some(ws.id);
        }
        if let Some(active) = self.active_workspace {
            return Some(active);
        }
        self.add_workspace(DEFAULT_WORKSPACE.to_string())
    }

    /// Adds a tab holding one pane to `workspace` and makes it active;
    /// `None` if there is no such workspace or tab ids are used up.
    pub fn add_tab(&mut self, workspace: WorkspaceId, name: String, pane: PaneId) -> Option<TabId> {
        let ws = self.workspaces.get_mut(&workspace)?;
        let id = self.next_tab_id;
        self.next_tab_id = id.next()?;
        ws.tabs.push(id);
        ws.active_tab = Some(id);
        self.tabs.insert(
            id,
            Tab {
                id,
                name,
                workspace,
                layout: Layout::Pane(pane),
                focus: pane,
                zoom: None,
            },
        );
        Some(id)
    }

    pub fn tab_of(&self, pane: PaneId) -> Option<TabId> {
        self.tabs
            .values()
            .find(|t| t.layout.contains(pane))
            .map(|t| t.id)
    }

    /// Splits `target`'s leaf, putting `new_pane` beside it, and focuses
    /// it as [`focus`](Self::focus) does (its tab and workspace become the
    /// active ones: the new pane is where the user works next, as after
    /// tmux's `split-window`).
    pub fn split(
        &mut self,
        target: PaneId,
        new_pane: PaneId,
        direction: Direction,
        ratio: f32,
    ) -> Option<TabId> {
        let tab_id = self.tab_of(target)?;
        let tab = self.tabs.get_mut(&tab_id)?;
        tab.layout.split(target, new_pane, direction, ratio);
        tab.zoom = None;
        self.focus(new_pane);
        Some(tab_id)
    }

    /// Takes a pane out of its tab. A tab left empty is removed, and its
    /// workspace's active tab moves to a neighbour.
    pub fn remove_pane(&mut self, pane: PaneId) {
        let Some(tab_id) = self.tab_of(pane) else {
            return;
        };
        let Some(mut tab) = self.tabs.remove(&tab_id) else {
            return;
        };
        match tab.layout.remove(pane) {
            Some(layout) => {
                if tab.focus == pane {
                    tab.focus = layout.panes()[0];
                }
                if tab.zoom == Some(pane) {
                    tab.zoom = None;
                }
                tab.layout = layout;
                self.tabs.insert(tab_id, tab);
            }
            None => self.detach_tab(tab.workspace, tab_id),
        }
    }

    fn detach_tab(&mut self, workspace: WorkspaceId, tab_id: TabId) {
        if let Some(ws) = self.workspaces.get_mut(&workspace) {
            let pos = ws.tabs.iter().position(|t| *t == tab_id);
            ws.tabs.retain(|t| *t != tab_id);
            if ws.active_tab == Some(tab_id) {
                ws.active_tab = pos.and_then(|p| {
                    ws.tabs
                        .get(p.saturating_sub(1))
                        .or(ws.tabs.first())
                        .copied()
                });
            }
        }
    }

    /// Panes of every tab of a workspace.
    pub fn workspace_panes(&self, workspace: WorkspaceId) -> Vec<PaneId> {
        let Some(ws) = self.workspaces.get(&workspace) else {
            return Vec::new();
        };
        ws.tabs
            .iter()
            .filter_map(|t| self.tabs.get(t))
            .flat_map(|t| t.layout.panes())
            .collect()
    }

    /// Removes a workspace that has no panes left.
    pub fn remove_workspace(&mut self, workspace: WorkspaceId) {
        if let Some(ws) = self.workspaces.remove(&workspace) {
            for tab in ws.tabs {
                self.tabs.remove(&tab);
            }
        }
        if self.active_workspace == Some(workspace) {
            self.active_workspace = self.workspaces.keys().next().copied();
        }
    }

    /// Makes `pane` the focus of its tab, its tab the active one, and its
    /// workspace the active workspace.
    pub fn focus(&mut self, pane: PaneId) -> bool {
        let Some(tab_id) = self.tab_of(pane) else {
            return false;
        };
        let Some(tab) = self.tabs.get_mut(&tab_id) else {
            return false;
        };
        tab.focus = pane;
        if tab.zoom.is_some() {
            tab.zoom = Some(pane);
        }
        let workspace = tab.workspace;
        if let Some(ws) = self.workspaces.get_mut(&workspace) {
            ws.active_tab = Some(tab_id);
        }
        self.active_workspace = Some(workspace);
        true
    }

    /// Makes `tab` its workspace's active tab and that workspace the
    /// active one; its focus stays.
    pub fn select_tab(&mut self, tab: TabId) -> bool {
        let Some(workspace) = self.tabs.get(&tab).map(|t| t.workspace) else {
            return false;
        };
        let Some(ws) = self.workspaces.get_mut(&workspace) else {
            return false;
        };
        ws.active_tab = Some(tab);
        self.active_workspace = Some(workspace);
        true
    }

    /// The tab `step` places after `tab` in its workspace's order (before
    /// it for a negative step), wrapping around at either end.
    pub fn tab_after(&self, tab: TabId, step: i64) -> Option<TabId> {
        let ws = self.workspaces.get(&self.tabs.get(&tab)?.workspace)?;
        let at = ws.tabs.iter().position(|t| *t == tab)?;
        let n = i64::try_from(ws.tabs.len()).ok()?;
        let to = (i64::try_from(at).ok()? + step % n + n) % n;
        ws.tabs.get(usize::try_from(to).ok()?).copied()
    }

    /// The active tab of the active workspace, and its focused pane.
    pub fn current(&self) -> Option<(TabId, PaneId)> {
        let ws = self.workspaces.get(&self.active_workspace?)?;
        let tab = self.tabs.get(&ws.active_tab?)?;
        Some((tab.id, tab.focus))
    }

    /// Rebuilds `tab`'s layout as `preset` from its panes in their order;
    /// its focus stays and it is unzoomed.
    pub fn select_layout(&mut self, tab: TabId, preset: Preset) -> bool {
        let Some(tab) = self.tabs.get_mut(&tab) else {
            return false;
        };
        let Some(layout) = preset.build(&tab.layout.panes()) else {
            return false;
        };
        tab.layout = layout;
        tab.zoom = None;
        true
    }

    /// Exchanges the places of panes `a` and `b`, in one tab or across
    /// two. Each pane keeps being its tab's focus or zoom if it was one in
    /// a tab it stays in; a tab whose focus (or zoom) left gets the pane
    /// that came in its place. `false` when either is in no tab.
    pub fn swap_panes(&mut self, a: PaneId, b: PaneId) -> bool {
        let (Some(ta), Some(tb)) = (self.tab_of(a), self.tab_of(b)) else {
            return false;
        };
        if a == b {
            return true;
        }
        for (tab_id, gone, came) in [(ta, a, b), (tb, b, a)] {
            let Some(tab) = self.tabs.get_mut(&tab_id) else {
                continue;
            };
            tab.layout.swap(a, b);
            if ta == tb {
                // Both stay in this tab: one walk swaps both leaves.
                break;
            }
            if tab.focus == gone {
                tab.focus = came;
            }
            if tab.zoom == Some(gone) {
                tab.zoom = Some(came);
            }
        }
        true
    }

    /// Moves a split's border next to `pane` (see [`Layout::resize_split`])
    /// in its tab of `area`, unzooming the tab as tmux does. `Err` says why
    /// nothing can move.
    pub fn resize_split(
        &mut self,
        pane: PaneId,
        side: Side,
        cells: u16,
        area: Rect,
    ) -> Result<u16, String> {
        let tab = self
            .tab_of(pane)
            .and_then(|t| self.tabs.get_mut(&t))
            .ok_or_else(|| format!("pane {pane} is in no tab"))?;
        let what = match side.axis() {
            Direction::Horizontal => "side by side (a left/right border)",
            Direction::Vertical => "stacked (an up/down border)",
        };
        let moved = tab
            .layout
            .resize_split(pane, side, cells, area)
            .ok_or_else(|| {
                format!(
                    "pane {pane} is in no split of tab {} with panes {what}; split it with \
                     `ptyd new -s {pane}{}`, or resize the other way",
                    tab.id,
                    if side.axis() == Direction::Vertical {
                        " -v"
                    } else {
                        ""
                    },
                )
            })?;
        tab.zoom = None;
        Ok(moved)
    }

    /// Zooms `pane` (it fills its tab, and is focused) or, when its tab
    /// is zoomed already, unzooms it (`zoom: None` toggles). A tab of one
    /// pane has nothing to zoom and stays unzoomed. Returns the tab's zoom
    /// afterwards.
    pub fn zoom(&mut self, pane: PaneId, zoom: Option<bool>) -> Option<Option<PaneId>> {
        let tab = self.tabs.get_mut(&self.tab_of(pane)?)?;
        let on = zoom.unwrap_or(tab.zoom.is_none());
        if on && matches!(tab.layout, Layout::Split { .. }) {
            tab.zoom = Some(pane);
            tab.focus = pane;
        } else {
            tab.zoom = None;
        }
        Some(tab.zoom)
    }

    /// Takes `pane` out of its tab into a new tab of the same workspace
    /// (after its old one), named `name`, which becomes active (tmux's
    /// `break-pane`). `None` if the pane is in no tab, is its tab's only
    /// pane, or tab ids are used up.
    pub fn break_pane(&mut self, pane: PaneId, name: String) -> Option<TabId> {
        let old = self.tab_of(pane)?;
        if !matches!(self.tabs.get(&old)?.layout, Layout::Split { .. })
            || self.next_tab_id.next().is_none()
        {
            return None;
        }
        let workspace = self.tabs[&old].workspace;
        self.remove_pane(pane);
        let id = self.add_tab(workspace, name, pane)?;
        if let Some(ws) = self.workspaces.get_mut(&workspace) {
            ws.tabs.retain(|t| *t != id);
            let at = ws
                .tabs
                .iter()
                .position(|t| *t == old)
                .map_or(ws.tabs.len(), |i| i + 1);
            ws.tabs.insert(at, id);
        }
        self.select_tab(id);
        Some(id)
    }

    /// Checks every invariant in the module doc; `Err` names the first broken.
    pub fn check(&self, pane_exists: impl Fn(PaneId) -> bool) -> Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        // A set, not `ws.tabs.contains`: that is quadratic in the tabs of a
        // workspace (a live upgrade's import checks the tree inside the
        // blackout; 1000 tabs made it ~1 ms).
        let listed: std::collections::HashSet<(WorkspaceId, TabId)> = self
            .workspaces
            .values()
            .flat_map(|ws| ws.tabs.iter().map(move |t| (ws.id, *t)))
            .collect();
        for tab in self.tabs.values() {
            let ws = self
                .workspaces
                .get(&tab.workspace)
                .ok_or(format!("tab {} has no workspace", tab.id))?;
            if !listed.contains(&(ws.id, tab.id)) {
                return Err(format!("tab {} missing from workspace {}", tab.id, ws.id));
            }
            let panes = tab.layout.panes();
            for p in &panes {
                if !seen.insert(*p) {
                    return Err(format!("pane {p} appears twice"));
                }
                if !pane_exists(*p) {
                    return Err(format!("tab {} refers to missing pane {p}", tab.id));
                }
            }
            if !panes.contains(&tab.focus) || tab.zoom.is_some_and(|z| !panes.contains(&z)) {
                return Err(format!(
                    "tab {} focus or zoom is not one of its panes",
                    tab.id
                ));
            }
            if tab.id >= self.next_tab_id {
                return Err(format!(
                    "tab counter {} is behind tab {}",
                    self.next_tab_id.get(),
                    tab.id
                ));
            }
        }
        for ws in self.workspaces.values() {
            if ws.id >= self.next_workspace_id {
                return Err(format!(
                    "workspace counter {} is behind {}",
                    self.next_workspace_id.get(),
                    ws.id
                ));
            }
            let mut listed = std::collections::HashSet::new();
            for t in &ws.tabs {
                if self.tabs.get(t).is_none_or(|tab| tab.workspace != ws.id) {
                    return Err(format!(
                        "workspace {} lists a missing or foreign tab {t}",
                        ws.id
                    ));
                }
                if !listed.insert(*t) {
                    return Err(format!("workspace {} lists tab {t} twice", ws.id));
                }
            }
            if ws.active_tab.is_some_and(|t| !ws.tabs.contains(&t)) {
                return Err(format!(
                    "workspace {} has an active tab it does not list",
                    ws.id
                ));
            }
        }
        if self
            .active_workspace
            .is_some_and(|w| !self.workspaces.contains_key(&w))
        {
            return Err("the active workspace does not exist".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(n: u64) -> PaneId {
        PaneId::new(n)
    }

    #[test]
    fn build_split_remove_keeps_invariants() {
        let mut t = Tree::new();
        let ws = t.default_workspace().unwrap();
        let tab = t.add_tab(ws, "one".into(), p(1)).unwrap();
        t.split(p(1), p(2), Direction::Horizontal, 0.5).unwrap();
        let tab2 = t.add_tab(ws, "two".into(), p(3)).unwrap();
        t.check(|_| true).unwrap();
        assert_eq!(t.tabs[&tab].focus, p(2));
        t.remove_pane(p(2));
        assert_eq!(t.tabs[&tab].focus, p(1));
        t.remove_pane(p(3));
        assert!(!t.tabs.contains_key(&tab2));
        assert_eq!(t.workspaces[&ws].active_tab, Some(tab));
        t.check(|_| true).unwrap();
        assert!(t.focus(p(1)));
        assert_eq!(t.workspace_panes(ws), vec![p(1)]);
    }

    /// A workspace with tab one (p1 | p2 | p3, even) and tab two (p4).
    fn two_tabs() -> (Tree, TabId, TabId) {
        let mut t = Tree::new();
        let ws = t.default_workspace().unwrap();
        let one = t.add_tab(ws, "one".into(), p(1)).unwrap();
        t.split(p(1), p(2), Direction::Horizontal, 0.5).unwrap();
        t.split(p(2), p(3), Direction::Vertical, 0.5).unwrap();
        let two = t.add_tab(ws, "two".into(), p(4)).unwrap();
        (t, one, two)
    }

    #[test]
    fn layouts_swaps_and_zoom_keep_invariants() {
        let (mut t, one, two) = two_tabs();
        assert!(t.select_layout(one, Preset::EvenHorizontal));
        assert_eq!(
            t.tabs[&one].layout,
            Preset::EvenHorizontal.build(&[p(1), p(2), p(3)]).unwrap()
        );
        assert_eq!(t.tabs[&one].focus, p(3));
        t.check(|_| true).unwrap();

        assert_eq!(t.zoom(p(2), None), Some(Some(p(2))));
        assert_eq!(t.tabs[&one].focus, p(2));
        // Swapped across tabs: the zoomed and focused pane's place goes to p4.
        assert!(t.swap_panes(p(2), p(4)));
        assert_eq!(t.tabs[&one].layout.panes(), vec![p(1), p(4), p(3)]);
        assert_eq!((t.tabs[&one].focus, t.tabs[&one].zoom), (p(4), Some(p(4))));
        assert_eq!(
            (t.tabs[&two].focus, t.tabs[&two].layout.panes()),
            (p(2), vec![p(2)])
        );
        t.check(|_| true).unwrap();
        // Within a tab, focus and zoom stay on their pane.
        assert!(t.swap_panes(p(4), p(1)));
        assert_eq!(t.tabs[&one].layout.panes(), vec![p(4), p(1), p(3)]);
        assert_eq!(t.tabs[&one].focus, p(4));
        assert!(!t.swap_panes(p(4), p(9)));
        assert!(t.swap_panes(p(4), p(4)));
        assert_eq!(t.zoom(p(3), None), Some(None));
        // One pane: nothing to zoom.
        assert_eq!(t.zoom(p(2), Some(true)), Some(None));
        assert_eq!(t.zoom(p(9), None), None);
        t.check(|_| true).unwrap();

        let area = Rect::area(80, 24);
        assert_eq!(t.zoom(p(1), Some(true)), Some(Some(p(1))));
        let moved = t.resize_split(p(1), Side::Right, 3, area).unwrap();
        assert_eq!(moved, 3);
        assert_eq!(t.tabs[&one].zoom, None);
        let err = t.resize_split(p(1), Side::Up, 3, area).unwrap_err();
        assert!(
            err.contains("no split of tab t1 with panes stacked"),
            "{err}"
        );
        assert!(t.resize_split(p(2), Side::Left, 3, area).is_err());
        t.check(|_| true).unwrap();
    }

    #[test]
    fn tabs_select_cycle_and_break() {
        let (mut t, one, two) = two_tabs();
        let ws = t.tabs[&one].workspace;
        assert_eq!(t.current(), Some((two, p(4))));
        assert_eq!(t.tab_after(two, 1), Some(one));
        assert_eq!(t.tab_after(one, -1), Some(two));
        assert_eq!(t.tab_after(one, -7), Some(two));
        assert!(t.select_tab(one));
        assert_eq!(t.current(), Some((one, p(3))));
        let other = t.add_workspace("other".into()).unwrap();
        let three = t.add_tab(other, "three".into(), p(5)).unwrap();
        assert_eq!(t.active_workspace, Some(ws));
        assert!(t.select_tab(three));
        assert_eq!(t.active_workspace, Some(other));
        assert!(!t.select_tab(TabId::new(99)));

        // Broken out after its old tab, not at the end.
        let broken = t.break_pane(p(2), "broken".into()).unwrap();
        assert_eq!(t.workspaces[&ws].tabs, vec![one, broken, two]);
        assert_eq!(t.current(), Some((broken, p(2))));
        assert_eq!(t.tabs[&one].layout.panes(), vec![p(1), p(3)]);
        assert_eq!(t.break_pane(p(2), "again".into()), None);
        assert_eq!(t.break_pane(p(9), "none".into()), None);
        t.check(|_| true).unwrap();

        // A split makes its tab and workspace the active ones.
        assert!(t.select_tab(three));
        t.split(p(4), p(6), Direction::Vertical, 0.5).unwrap();
        assert_eq!(t.current(), Some((two, p(6))));
        t.check(|_| true).unwrap();
    }
}
