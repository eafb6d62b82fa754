//! Requests on the workspace tree: workspaces and tabs (create, list, rename,
//! remove, select), focus, layouts (presets, swaps, split resizes, zoom,
//! break-out), and the JSON form of the whole tree that `ptyd ls` shows.
//!
//! Every change to the tree goes through [`Server::edit_tree`], which
//! announces what changed ([`Server::tree_changed`]): the one place a
//! change is seen, for subscribers and for anything that follows the tree.

use super::Server;
use super::requests::reply;
use crate::model::{PaneId, TabId, WorkspaceId};
use crate::protocol::events::Event;
use crate::protocol::methods;
use crate::protocol::replies::WorkspaceCreated;
use crate::protocol::{ErrorCode, RpcError};
use crate::workspace::Tree;
use crate::workspace::layout::{Layout, Preset, Rect, Side};
use serde_json::{Value, json};

fn invalid(msg: impl Into<String>) -> RpcError {
    RpcError::new(ErrorCode::InvalidParams, msg)
}

impl Server {
    /// Finds a workspace by id (`w2`) or name.
    pub(super) fn resolve_workspace(&self, target: &str) -> Result<WorkspaceId, RpcError> {
        if let Ok(id) = target.parse::<WorkspaceId>()
            && self.tree.workspaces.contains_key(&id)
        {
            return Ok(id);
        }
        self.tree
            .workspaces
            .values()
            .find(|w| w.name == target)
            .map(|w| w.id)
            .ok_or_else(|| {
                RpcError::new(
                    ErrorCode::NotFound,
                    format!("no workspace {target:?}; `ptyd ls` lists them"),
                )
            })
    }

    /// Finds a tab by id (`t3`) or name (names must then be unique).
    pub(super) fn resolve_tab(&self, target: &str) -> Result<TabId, RpcError> {
        if let Ok(id) = target.parse::<TabId>()
            && self.tree.tabs.contains_key(&id)
        {
            return Ok(id);
        }
        let mut named = self.tree.tabs.values().filter(|t| t.name == target);
        match (named.next(), named.next()) {
            (Some(t), None) => Ok(t.id),
            (Some(_), Some(_)) => Err(RpcError::new(
                ErrorCode::Ambiguous,
                format!("several tabs are named {target:?}; use the tab id"),
            )),
            (None, _) => Err(RpcError::new(
                ErrorCode::NotFound,
                format!("no tab {target:?}; `ptyd ls` lists them"),
            )),
        }
    }

    pub(super) fn workspace_create(
        &mut self,
        req: methods::WorkspaceCreate,
    ) -> Result<Option<Value>, RpcError> {
        crate::validate::name(&req.name).map_err(|m| RpcError::new(ErrorCode::InvalidParams, m))?;
        if self.tree.workspaces.values().any(|w| w.name == req.name) {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                format!("a workspace named {:?} exists", req.name),
            ));
        }
        let id = self
            .edit_tree(|t| t.add_workspace(req.name.clone()))
            .ok_or_else(|| RpcError::new(ErrorCode::Internal, "workspace ids are used up"))?;
        reply(&WorkspaceCreated { id, name: req.name })
    }

    pub(super) fn workspace_rename(
        &mut self,
        req: methods::Rename,
    ) -> Result<Option<Value>, RpcError> {
        let id = self.resolve_workspace(&req.target)?;
        crate::validate::name(&req.name).map_err(|m| RpcError::new(ErrorCode::InvalidParams, m))?;
        if self
            .tree
            .workspaces
            .values()
            .any(|w| w.name == req.name && w.id != id)
        {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                format!("a workspace named {:?} exists", req.name),
            ));
        }
        self.edit_tree(|t| {
            if let Some(ws) = t.workspaces.get_mut(&id) {
                ws.name = req.name;
            }
        });
        Ok(Some(json!({})))
    }

    pub(super) fn tab_rename(&mut self, req: methods::Rename) -> Result<Option<Value>, RpcError> {
        let id = self.tab_or_pane(Some(&req.target))?;
        if let Err(e) = crate::validate::label(&req.name) {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                format!("tab name {e}"),
            ));
        }
        self.edit_tree(|t| {
            if let Some(tab) = t.tabs.get_mut(&id) {
                tab.name = req.name;
            }
        });
        Ok(Some(json!({})))
    }

    /// Removes every pane of a workspace or tab (refusing running ones
    /// without `force`), then the container itself.
    pub(super) fn remove_container(
        &mut self,
        panes: Vec<PaneId>,
        force: bool,
        what: &str,
    ) -> Result<(), RpcError> {
        if !force
            && let Some(p) = panes
                .iter()
                .find(|p| self.panes.get(&p.get()).is_some_and(|p| p.is_running()))
        {
            return Err(RpcError::new(
                ErrorCode::PaneRunning,
                format!(
                    "{what} has running pane {p}; kill its panes first or pass \"force\": true"
                ),
            ));
        }
        for p in panes.into_iter().map(PaneId::get) {
            if self.panes.get(&p).is_some_and(|p| p.is_running()) {
                self.kill_pane(
                    p,
                    crate::sys::SIGKILL,
                    std::time::Duration::ZERO,
                    super::panes::pane::ExitReason::Killed,
                );
            }
            self.remove_pane(p);
        }
        Ok(())
    }

    pub(super) fn workspace_remove(
        &mut self,
        req: methods::RemoveTree,
    ) -> Result<Option<Value>, RpcError> {
        let id = self.resolve_workspace(&req.target)?;
        let panes = self.tree.workspace_panes(id);
        self.remove_container(panes, req.force, &format!("workspace {id}"))?;
        self.edit_tree(|t| t.remove_workspace(id));
        Ok(Some(json!({})))
    }

    pub(super) fn tab_remove(
        &mut self,
        req: methods::RemoveTree,
    ) -> Result<Option<Value>, RpcError> {
        let id = self.resolve_tab(&req.target)?;
        let panes = self.tree.tabs[&id].layout.panes();
        self.remove_container(panes, req.force, &format!("tab {id}"))?;
        Ok(Some(json!({})))
    }

    /// `pane.focus`: the pane becomes the tab's default focus and that of
    /// every tab-view client of its workspace; with `client`, that
    /// client's alone (the tab's default stays).
    pub(super) fn pane_focus(
        &mut self,
        id: u64,
        client: Option<super::clients::connection::ConnId>,
    ) -> Result<Option<Value>, RpcError> {
        let id = PaneId::new(id);
        if self.tree.tab_of(id).is_none() {
            return Err(RpcError::new(
                ErrorCode::NotFound,
                format!("pane {id} is in no tab"),
            ));
        }
        if client.is_none() {
            self.edit_tree(|t| t.focus(id));
        }
        self.focus_views(id, client)?;
        Ok(Some(json!({})))
    }

    /// Runs `edit` on the tree, then announces what it changed. Every
    /// change of workspaces, tabs, layouts, focus, zoom and the active tab
    /// and workspace is made through here.
    pub(super) fn edit_tree<R>(&mut self, edit: impl FnOnce(&mut Tree) -> R) -> R {
        let before = self.tree.clone();
        let out = edit(&mut self.tree);
        self.tree_changed(&before);
        out
    }

    /// The one place a change of the tree is seen: an event for each
    /// difference between `before` and the tree now (workspaces created,
    /// renamed and removed; tabs created, renamed, removed, their layout,
    /// focus or zoom changed; the active tab of a workspace and the
    /// active workspace), and the snapshot marked dirty if there was any.
    pub(super) fn tree_changed(&mut self, before: &Tree) {
        let events = tree_events(before, &self.tree);
        if events.is_empty() {
            return;
        }
        self.mark_dirty();
        for event in events {
            self.emit(event);
        }
        self.follow_tree(before);
    }

    /// The pane a request that names none acts on: the focus of the view
    /// of the attached client used last, else of the active tab.
    pub(super) fn current_pane(&self) -> Result<PaneId, RpcError> {
        let current = self.latest_view().or_else(|| self.tree.current());
        current.map(|(_, p)| p).ok_or_else(|| {
            RpcError::new(
                ErrorCode::NotFound,
                "no tab is active, so there is no current pane; name one (`ptyd ls` lists them)",
            )
        })
    }

    /// The pane `target` names (absent: the current pane), which must be
    /// in a tab.
    fn tree_pane(&self, target: Option<&str>) -> Result<PaneId, RpcError> {
        let pane = match target {
            Some(t) => PaneId::new(self.resolve_target(t)?),
            None => self.current_pane()?,
        };
        if self.tree.tab_of(pane).is_none() {
            return Err(RpcError::new(
                ErrorCode::NotFound,
                format!("pane {pane} is in no tab"),
            ));
        }
        Ok(pane)
    }

    /// The tab `target` names: a tab id or name, else a pane (its tab);
    /// absent: the active tab.
    fn tab_or_pane(&self, target: Option<&str>) -> Result<TabId, RpcError> {
        let Some(target) = target else {
            let current = self.latest_view().or_else(|| self.tree.current());
            return current.map(|(t, _)| t).ok_or_else(|| {
                RpcError::new(
                    ErrorCode::NotFound,
                    "no tab is active; name a tab or a pane (`ptyd ls` lists them)",
                )
            });
        };
        match self.resolve_tab(target) {
            Err(e) if e.0.code == ErrorCode::NotFound => {
                let pane = self.resolve_target(target).map_err(|_| {
                    RpcError::new(
                        ErrorCode::NotFound,
                        format!("no tab or pane {target:?}; `ptyd ls` lists them"),
                    )
                })?;
                self.tree.tab_of(PaneId::new(pane)).ok_or_else(|| {
                    RpcError::new(
                        ErrorCode::NotFound,
                        format!("pane {} is in no tab", PaneId::new(pane)),
                    )
                })
            }
            found => found,
        }
    }

    /// One tab as `tree` shows it, with its workspace.
    fn tab_reply(&self, tab: TabId) -> Value {
        let Some(t) = self.tree.tabs.get(&tab) else {
            return Value::Null;
        };
        let mut v = self.tab_json(t);
        v["workspace"] = json!(t.workspace);
        v
    }

    pub(super) fn tab_select(
        &mut self,
        req: methods::TabSelect,
    ) -> Result<Option<Value>, RpcError> {
        let workspace = match &req.workspace {
            Some(w) => Some(self.resolve_workspace(w)?),
            None => None,
        };
        let tab = match (&req.target, req.index, req.step) {
            (Some(target), None, None) => {
                if workspace.is_some() {
                    return Err(invalid(
                        "\"workspace\" goes with \"index\" or \"step\", not \"target\"",
                    ));
                }
                self.tab_or_pane(Some(target))?
            }
            (None, Some(index), None) => {
                let ws = self.selection_workspace(workspace)?;
                let tabs = &self.tree.workspaces[&ws].tabs;
                *tabs.get(index).ok_or_else(|| {
                    RpcError::new(
                        ErrorCode::NotFound,
                        format!(
                            "workspace {ws} has no tab {index}: its tabs are numbered 0 to {}",
                            tabs.len().saturating_sub(1)
                        ),
                    )
                })?
            }
            (None, None, Some(step)) => {
                let ws = self.selection_workspace(workspace)?;
                let from = self.tree.workspaces[&ws].active_tab.ok_or_else(|| {
                    RpcError::new(ErrorCode::NotFound, format!("workspace {ws} has no tab"))
                })?;
                self.tree.tab_after(from, step).unwrap_or(from)
            }
            _ => {
                return Err(invalid(
                    "tab.select takes exactly one of \"target\", \"index\" and \"step\"",
                ));
            }
        };
        self.edit_tree(|t| t.select_tab(tab));
        Ok(Some(self.tab_reply(tab)))
    }

    /// The workspace whose tabs `index` and `step` count: the one named,
    /// else the active one.
    fn selection_workspace(&self, named: Option<WorkspaceId>) -> Result<WorkspaceId, RpcError> {
        named
            .or(self.tree.active_workspace)
            .filter(|w| self.tree.workspaces.contains_key(w))
            .ok_or_else(|| {
                RpcError::new(
                    ErrorCode::NotFound,
                    "there is no workspace; `ptyd tab new` opens one",
                )
            })
    }

    pub(super) fn tab_select_layout(
        &mut self,
        req: methods::SelectLayout,
    ) -> Result<Option<Value>, RpcError> {
        let tab = self.tab_or_pane(req.target.as_deref())?;
        let layout = &self.tree.tabs[&tab].layout;
        let preset = match req.layout.as_str() {
            "next" => Preset::cycle(layout, false),
            "previous" => Preset::cycle(layout, true),
            name => {
                Preset::from_name(name).map_err(|e| invalid(format!("{e} (or next, previous)")))?
            }
        };
        self.edit_tree(|t| t.select_layout(tab, preset));
        Ok(Some(self.tab_reply(tab)))
    }

    pub(super) fn pane_swap(&mut self, req: methods::PaneSwap) -> Result<Option<Value>, RpcError> {
        let a = self.tree_pane(Some(&req.target))?;
        let b = self.tree_pane(Some(&req.other))?;
        self.edit_tree(|t| t.swap_panes(a, b));
        let mut tabs: Vec<TabId> = [a, b].iter().filter_map(|p| self.tree.tab_of(*p)).collect();
        tabs.dedup();
        let tabs: Vec<Value> = tabs.into_iter().map(|t| self.tab_reply(t)).collect();
        Ok(Some(json!({ "tabs": tabs })))
    }

    pub(super) fn pane_resize_split(
        &mut self,
        req: methods::ResizeSplit,
    ) -> Result<Option<Value>, RpcError> {
        let pane = self.tree_pane(req.target.as_deref())?;
        let side = Side::from_name(&req.direction).map_err(invalid)?;
        let tab = self.tree.tab_of(pane).expect("tree_pane checked");
        let (cols, rows) = self.tab_size(tab);
        let area = Rect::area(req.cols.unwrap_or(cols), req.rows.unwrap_or(rows));
        let cells = req.cells.unwrap_or(1);
        let moved = self
            .edit_tree(|t| t.resize_split(pane, side, cells, area))
            .map_err(invalid)?;
        let mut reply = self.tab_reply(tab);
        reply["moved"] = json!(moved);
        Ok(Some(reply))
    }

    /// A tab's size: what its panes' sizes and the borders between them
    /// add up to (each pane is sized to its rectangle while a client
    /// shows the tab).
    pub(super) fn tab_size(&self, tab: TabId) -> (u16, u16) {
        if let Some(shown) = self.shown_area(tab) {
            return shown;
        }
        let size_of = |p: PaneId| {
            self.panes
                .get(&p.get())
                .map_or(crate::workspace::layout::MIN_PANE, |pane| {
                    (pane.cols(), pane.rows())
                })
        };
        self.tree
            .tabs
            .get(&tab)
            .map_or((0, 0), |t| t.layout.size_from(&size_of))
    }

    pub(super) fn pane_zoom(&mut self, req: methods::PaneZoom) -> Result<Option<Value>, RpcError> {
        if let Some(client) = req.client {
            let pane = match req.target.as_deref() {
                Some(t) => Some(PaneId::new(self.resolve_target(t)?)),
                None => None,
            };
            let tab = self.zoom_view(client, pane, req.zoom)?;
            return Ok(Some(self.tab_reply(tab)));
        }
        let pane = self.tree_pane(req.target.as_deref())?;
        self.edit_tree(|t| t.zoom(pane, req.zoom));
        let tab = self.tree.tab_of(pane).expect("tree_pane checked");
        Ok(Some(self.tab_reply(tab)))
    }

    pub(super) fn pane_break(
        &mut self,
        req: methods::PaneBreak,
    ) -> Result<Option<Value>, RpcError> {
        let pane = self.tree_pane(req.target.as_deref())?;
        if let Some(name) = &req.name {
            crate::validate::label(name).map_err(|e| invalid(format!("tab name {e}")))?;
        }
        let old = self.tree.tab_of(pane).expect("tree_pane checked");
        if !matches!(self.tree.tabs[&old].layout, Layout::Split { .. }) {
            return Err(invalid(format!(
                "pane {pane} is the only pane of tab {old}: there is nothing to break it out of"
            )));
        }
        let name = req.name.unwrap_or_else(|| {
            self.panes
                .get(&pane.get())
                .map(super::panes::spawn::default_tab_name)
                .unwrap_or_default()
        });
        let tab = self
            .edit_tree(|t| t.break_pane(pane, name))
            .ok_or_else(|| RpcError::new(ErrorCode::Internal, "tab ids are used up"))?;
        Ok(Some(self.tab_reply(tab)))
    }

    pub(super) fn set_resume(
        &mut self,
        req: methods::PaneSetResume,
    ) -> Result<Option<Value>, RpcError> {
        let id = self.resolve_target(&req.target)?;
        if let Some(r) = &req.resume {
            crate::validate::resume(r).map_err(|m| RpcError::new(ErrorCode::InvalidParams, m))?;
        }
        if let Some(pane) = self.panes.get_mut(&id) {
            pane.set_resume(req.resume);
        }
        self.mark_dirty();
        Ok(Some(self.pane_info(id)))
    }

    /// The whole tree as JSON: workspaces with their tabs, layouts and panes.
    pub(super) fn tree_json(&self) -> Value {
        let workspaces: Vec<Value> = self
            .tree
            .workspaces
            .values()
            .map(|ws| {
                let tabs: Vec<Value> = ws
                    .tabs
                    .iter()
                    .filter_map(|t| self.tree.tabs.get(t))
                    .map(|tab| self.tab_json(tab))
                    .collect();
                json!({
                    "id": ws.id,
                    "name": ws.name,
                    "active": self.tree.active_workspace == Some(ws.id),
                    "tabs": tabs,
                })
            })
            .collect();
        json!({ "workspaces": workspaces })
    }
}

impl Server {
    /// A tab as `tree` lists it.
    fn tab_json(&self, tab: &crate::workspace::Tab) -> Value {
        let active = self
            .tree
            .workspaces
            .get(&tab.workspace)
            .is_some_and(|ws| ws.active_tab == Some(tab.id));
        json!({
            "id": tab.id,
            "name": tab.name,
            "active": active,
            "focus": tab.focus,
            "zoom": tab.zoom,
            "layout": layout_json(&tab.layout),
            "panes": tab.layout.panes().iter().map(|p| self.pane_info(p.get())).collect::<Vec<_>>(),
        })
    }
}

/// The events that tell a subscriber how the tree went from `before` to
/// `after`: creations first, then changes, removals, and what is active.
fn tree_events(before: &Tree, after: &Tree) -> Vec<Event> {
    let mut events = Vec::new();
    for (id, ws) in &after.workspaces {
        match before.workspaces.get(id) {
            None => events.push(Event::WorkspaceCreated {
                workspace: *id,
                name: ws.name.clone(),
            }),
            Some(old) if old.name != ws.name => events.push(Event::WorkspaceRenamed {
                workspace: *id,
                name: ws.name.clone(),
            }),
            Some(_) => {}
        }
    }
    for (id, tab) in &after.tabs {
        let layout = || layout_json(&tab.layout);
        match before.tabs.get(id) {
            None => events.push(Event::TabCreated {
                tab: *id,
                workspace: tab.workspace,
                name: tab.name.clone(),
                layout: layout(),
                focus: tab.focus,
                zoom: tab.zoom,
            }),
            Some(old) => {
                if old.name != tab.name {
                    events.push(Event::TabRenamed {
                        tab: *id,
                        name: tab.name.clone(),
                    });
                }
                if (&old.layout, old.focus, old.zoom) != (&tab.layout, tab.focus, tab.zoom) {
                    events.push(Event::TabLayout {
                        tab: *id,
                        layout: layout(),
                        focus: tab.focus,
                        zoom: tab.zoom,
                    });
                }
            }
        }
    }
    for (id, tab) in &before.tabs {
        if !after.tabs.contains_key(id) {
            events.push(Event::TabRemoved {
                tab: *id,
                workspace: tab.workspace,
            });
        }
    }
    for id in before.workspaces.keys() {
        if !after.workspaces.contains_key(id) {
            events.push(Event::WorkspaceRemoved { workspace: *id });
        }
    }
    for (id, ws) in &after.workspaces {
        let was = before.workspaces.get(id).and_then(|w| w.active_tab);
        if was != ws.active_tab {
            events.push(Event::TabSelected {
                workspace: *id,
                tab: ws.active_tab,
            });
        }
    }
    if before.active_workspace != after.active_workspace {
        events.push(Event::WorkspaceSelected {
            workspace: after.active_workspace,
        });
    }
    events
}

pub fn layout_json(layout: &Layout) -> Value {
    match layout {
        Layout::Pane(id) => json!({ "pane": id }),
        Layout::Split {
            direction,
            ratio,
            first,
            second,
        } => json!({
            "split": { "direction": direction, "ratio": ratio, "first": layout_json(first), "second": layout_json(second) }
        }),
    }
}
