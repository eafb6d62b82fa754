//! Workspaces → tabs → a layout tree per tab → panes: the structure a user
//! arranges and a reboot must give back. Pure data with its operations; the
//! server owns one [`Tree`] and keeps panes themselves elsewhere, by id.
//!
//! Invariants (checked by [`Tree::check`] in tests and restored by the
//! snapshot loader): every tab belongs to exactly one workspace and appears in
//! its `tabs` list; every tab's layout has at least one pane; a pane is in at
//! most one tab; a tab's focus is one of its panes and its zoom is `None` or
//! one of its panes; id counters are above every id in use.

pub mod layout;

use layout::{Direction, Layout};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub struct Workspace {
    pub id: u64,
    pub name: String,
    pub tabs: Vec<u64>,
    pub active_tab: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Tab {
    pub id: u64,
    pub name: String,
    pub workspace: u64,
    pub layout: Layout,
    pub focus: u64,
    pub zoom: Option<u64>,
}

/// The whole structure. Id counters only go forward, also across restarts
/// (they are saved), so an id never names two different things.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tree {
    pub workspaces: BTreeMap<u64, Workspace>,
    pub tabs: BTreeMap<u64, Tab>,
    pub active_workspace: Option<u64>,
    pub next_workspace_id: u64,
    pub next_tab_id: u64,
}

/// Name of the workspace panes go to when a request names none.
pub const DEFAULT_WORKSPACE: &str = "main";

impl Tree {
    pub fn new() -> Tree {
        Tree {
            next_workspace_id: 1,
            next_tab_id: 1,
            ..Tree::default()
        }
    }

    pub fn add_workspace(&mut self, name: String) -> u64 {
        let id = self.next_workspace_id;
        self.next_workspace_id += 1;
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
        id
    }

    /// The workspace named [`DEFAULT_WORKSPACE`], else the active one, else a
    /// new one with that name.
    pub fn default_workspace(&mut self) -> u64 {
        if let Some(ws) = self
            .workspaces
            .values()
            .find(|w| w.name == DEFAULT_WORKSPACE)
        {
            return ws.id;
        }
        if let Some(active) = self.active_workspace {
            return active;
        }
        self.add_workspace(DEFAULT_WORKSPACE.to_string())
    }

    /// Adds a tab holding one pane to `workspace` and makes it active.
    pub fn add_tab(&mut self, workspace: u64, name: String, pane: u64) -> Option<u64> {
        let ws = self.workspaces.get_mut(&workspace)?;
        let id = self.next_tab_id;
        self.next_tab_id += 1;
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

    pub fn tab_of(&self, pane: u64) -> Option<u64> {
        self.tabs
            .values()
            .find(|t| t.layout.contains(pane))
            .map(|t| t.id)
    }

    /// Splits `target`'s leaf, putting `new_pane` beside it, and focuses it.
    pub fn split(
        &mut self,
        target: u64,
        new_pane: u64,
        direction: Direction,
        ratio: f32,
    ) -> Option<u64> {
        let tab_id = self.tab_of(target)?;
        let tab = self.tabs.get_mut(&tab_id)?;
        tab.layout.split(target, new_pane, direction, ratio);
        tab.focus = new_pane;
        tab.zoom = None;
        Some(tab_id)
    }

    /// Takes a pane out of its tab. A tab left empty is removed, and its
    /// workspace's active tab moves to a neighbour.
    pub fn remove_pane(&mut self, pane: u64) {
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

    fn detach_tab(&mut self, workspace: u64, tab_id: u64) {
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
    pub fn workspace_panes(&self, workspace: u64) -> Vec<u64> {
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
    pub fn remove_workspace(&mut self, workspace: u64) {
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
    pub fn focus(&mut self, pane: u64) -> bool {
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

    /// Checks every invariant in the module doc; `Err` names the first broken.
    pub fn check(&self, pane_exists: impl Fn(u64) -> bool) -> Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        for tab in self.tabs.values() {
            let ws = self
                .workspaces
                .get(&tab.workspace)
                .ok_or(format!("tab t{} has no workspace", tab.id))?;
            if !ws.tabs.contains(&tab.id) {
                return Err(format!("tab t{} missing from workspace w{}", tab.id, ws.id));
            }
            let panes = tab.layout.panes();
            for p in &panes {
                if !seen.insert(*p) {
                    return Err(format!("pane p{p} appears twice"));
                }
                if !pane_exists(*p) {
                    return Err(format!("tab t{} refers to missing pane p{p}", tab.id));
                }
            }
            if !panes.contains(&tab.focus) || tab.zoom.is_some_and(|z| !panes.contains(&z)) {
                return Err(format!(
                    "tab t{} focus or zoom is not one of its panes",
                    tab.id
                ));
            }
            if tab.id >= self.next_tab_id {
                return Err(format!(
                    "tab counter {} is behind tab t{}",
                    self.next_tab_id, tab.id
                ));
            }
        }
        for ws in self.workspaces.values() {
            if ws.id >= self.next_workspace_id {
                return Err(format!(
                    "workspace counter {} is behind w{}",
                    self.next_workspace_id, ws.id
                ));
            }
            if ws.tabs.iter().any(|t| !self.tabs.contains_key(t)) {
                return Err(format!("workspace w{} lists a missing tab", ws.id));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_split_remove_keeps_invariants() {
        let mut t = Tree::new();
        let ws = t.default_workspace();
        let tab = t.add_tab(ws, "one".into(), 1).unwrap();
        t.split(1, 2, Direction::Horizontal, 0.5).unwrap();
        let tab2 = t.add_tab(ws, "two".into(), 3).unwrap();
        t.check(|_| true).unwrap();
        assert_eq!(t.tabs[&tab].focus, 2);
        t.remove_pane(2);
        assert_eq!(t.tabs[&tab].focus, 1);
        t.remove_pane(3);
        assert!(!t.tabs.contains_key(&tab2));
        assert_eq!(t.workspaces[&ws].active_tab, Some(tab));
        t.check(|_| true).unwrap();
        assert!(t.focus(1));
        assert_eq!(t.workspace_panes(ws), vec![1]);
    }
}
