//! The shared vocabulary: small value types that the wire protocol, the
//! snapshot, the workspace tree and the server all speak. It sits below all
//! of them and imports nothing of the crate, so none of those layers has to
//! reach sideways or up for a word it uses.
//!
//! - [`ids`]: `PaneId` (`p3`), `TabId` (`t2`), `WorkspaceId` (`w1`).
//! - [`command`]: what a pane runs ([`CommandSpec`]) and what a reboot does
//!   with it ([`RestorePolicy`]).
//! - [`Direction`]: how a split divides its area.

pub mod command;
pub mod ids;

pub use command::{CommandSpec, RestorePolicy};
pub use ids::{IdError, PaneId, TabId, WorkspaceId};

use serde::{Deserialize, Serialize};

/// How a split divides its area (`pane.create`'s `direction`, a layout
/// node in the tree and in the snapshot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Children side by side (a vertical divider), first on the left.
    Horizontal,
    /// Children stacked (a horizontal divider), first on top.
    Vertical,
}
