//! Requests on the workspace tree: workspaces and tabs (create, list, rename,
//! remove), focus, and the JSON form of the whole tree that `ptyd ls` shows.

use super::Server;
use super::requests::reply;
use crate::model::{PaneId, TabId, WorkspaceId};
use crate::protocol::events::Event;
use crate::protocol::methods;
use crate::protocol::replies::WorkspaceCreated;
use crate::protocol::{ErrorCode, RpcError};
use crate::workspace::layout::Layout;
use serde_json::{Value, json};

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
            .tree
            .add_workspace(req.name.clone())
            .ok_or_else(|| RpcError::new(ErrorCode::Internal, "workspace ids are used up"))?;
        self.mark_dirty();
        self.emit(Event::WorkspaceCreated {
            workspace: id,
            name: req.name.clone(),
        });
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
        if let Some(ws) = self.tree.workspaces.get_mut(&id) {
            ws.name = req.name;
        }
        self.mark_dirty();
        Ok(Some(json!({})))
    }

    pub(super) fn tab_rename(&mut self, req: methods::Rename) -> Result<Option<Value>, RpcError> {
        let id = self.resolve_tab(&req.target)?;
        if let Err(e) = crate::validate::label(&req.name) {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                format!("tab name {e}"),
            ));
        }
        if let Some(tab) = self.tree.tabs.get_mut(&id) {
            tab.name = req.name;
        }
        self.mark_dirty();
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
        self.tree.remove_workspace(id);
        self.mark_dirty();
        self.emit(Event::WorkspaceRemoved { workspace: id });
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

    pub(super) fn pane_focus(&mut self, id: u64) -> Result<Option<Value>, RpcError> {
        let id = PaneId::new(id);
        if !self.tree.focus(id) {
            return Err(RpcError::new(
                ErrorCode::NotFound,
                format!("pane {id} is in no tab"),
            ));
        }
        self.mark_dirty();
        Ok(Some(json!({})))
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
                    .map(|tab| {
                        json!({
                            "id": tab.id,
                            "name": tab.name,
                            "active": ws.active_tab == Some(tab.id),
                            "focus": tab.focus,
                            "zoom": tab.zoom,
                            "layout": layout_json(&tab.layout),
                            "panes": tab.layout.panes().iter().map(|p| self.pane_info(p.get())).collect::<Vec<_>>(),
                        })
                    })
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
