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
use layout::{Direction, Layout};
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

    /// Splits `target`'s leaf, putting `new_pane` beside it, and focuses it.
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
        tab.focus = new_pane;
        tab.zoom = None;
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

    /// Zooms `tab`'s focused pane, or unzooms the tab.
    pub fn toggle_zoom(&mut self, tab: TabId) -> bool {
        let Some(t) = self.tabs.get_mut(&tab) else {
            return false;
        };
        t.zoom = match t.zoom {
            Some(_) => None,
            None => Some(t.focus),
        };
        true
    }

    /// Moves the border nearest `pane` across `direction`'s axis by
    /// `delta` (a share of its split, negative towards the first child);
    /// `false` if no split of that direction is above it.
    pub fn nudge_split(&mut self, pane: PaneId, direction: Direction, delta: f32) -> bool {
        let Some(tab) = self.tab_of(pane) else {
            return false;
        };
        self.tabs
            .get_mut(&tab)
            .is_some_and(|t| t.layout.nudge(pane, direction, delta))
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
}
