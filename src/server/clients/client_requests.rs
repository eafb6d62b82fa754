//! The requests about attached clients: the client list (`client.list`)
//! and detaching clients by pane, by number or all at once
//! (`client.detach`).

use super::connection::ConnId;
use crate::model::PaneId;
use crate::protocol::methods;
use crate::protocol::replies::{ClientInfo, ClientList, ClientView, Detached};
use crate::protocol::{ErrorCode, RpcError};
use crate::server::Server;
use serde_json::{Value, json};

impl Server {
    /// `client.list`.
    pub(in crate::server) fn client_list(
        &self,
        req: methods::ClientList,
    ) -> Result<Value, RpcError> {
        let only = match &req.target {
            Some(t) => Some(self.resolve_target(t)?),
            None => None,
        };
        let mut clients: Vec<ClientInfo> = self
            .conns
            .iter()
            .filter_map(|(id, c)| Some((id, c, c.attachment()?)))
            .filter(|(_, _, a)| only.is_none_or(|o| o == a.pane))
            .map(|(id, c, a)| ClientInfo {
                client: *id,
                pane: PaneId::new(a.pane),
                cols: a.cols,
                rows: a.rows,
                read_only: a.read_only,
                since_unix_ms: a.since_unix_ms,
                pid: c.peer.pid,
                latest: self.latest_client(a.pane) == Some(*id),
                when_behind: a.view.when_behind,
                direct: c.writes_terminal(),
                keys: c.reads_keys(),
                view: a.view.tab.as_ref().map(|v| ClientView {
                    tab: v.tab,
                    zoom: v.zoom,
                }),
            })
            .collect();
        clients.sort_by_key(|c| c.client);
        serde_json::to_value(ClientList { clients })
            .map_err(|e| RpcError::new(ErrorCode::Internal, format!("encoding the reply: {e}")))
    }

    /// `client.detach`: sends the chosen clients an EXIT frame (reason
    /// `detached`) and answers with their numbers.
    pub(in crate::server) fn client_detach(
        &mut self,
        req: methods::ClientDetach,
    ) -> Result<Value, RpcError> {
        let chosen = [req.target.is_some(), req.client.is_some(), req.all];
        if chosen.iter().filter(|c| **c).count() != 1 {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                "client.detach takes exactly one of \"target\" (a pane), \"client\" (a number \
                 from client.list) and \"all\"",
            ));
        }
        if req.all && req.others {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                "\"others\" goes with \"target\" or \"client\", not with \"all\"",
            ));
        }
        let victims: Vec<ConnId> = if req.all {
            let mut all: Vec<ConnId> = self
                .conns
                .iter()
                .filter(|(_, c)| c.is_attached())
                .map(|(id, _)| *id)
                .collect();
            all.sort_unstable();
            all
        } else if let Some(target) = &req.target {
            let pane = self.resolve_target(target)?;
            let keep = req.others.then(|| self.latest_client(pane)).flatten();
            self.clients_of(pane)
                .into_iter()
                .filter(|id| Some(*id) != keep)
                .collect()
        } else {
            let client = req.client.unwrap_or_default();
            let pane = match self.conns.get(&client).and_then(|c| c.attached_pane()) {
                Some(pane) => pane,
                None => {
                    return Err(RpcError::new(
                        ErrorCode::NotFound,
                        format!("no attached client {client}; `ptyd clients` lists them"),
                    ));
                }
            };
            if req.others {
                self.clients_of(pane)
                    .into_iter()
                    .filter(|id| *id != client)
                    .collect()
            } else {
                vec![client]
            }
        };
        let payload = json!({ "reason": "detached", "message": "detached by `ptyd detach`" });
        for id in &victims {
            self.end_attachment(*id, &payload, false);
        }
        serde_json::to_value(Detached { detached: victims })
            .map_err(|e| RpcError::new(ErrorCode::Internal, format!("encoding the reply: {e}")))
    }
}
