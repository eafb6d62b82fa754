//! The layout of one tab: a binary tree whose leaves are panes and whose
//! inner nodes split their area in two, side by side or one above the other.
//!
//! Invariants: every pane appears in at most one leaf of all tabs; ratios are
//! in (0, 1) and give the share of the first child. A layout read from a
//! snapshot is checked or repaired by `persist::tree`. A tab nests at most
//! [`MAX_SPLIT_DEPTH`] splits above any pane.

pub use crate::model::Direction;
use crate::model::PaneId;
use serde::{Deserialize, Serialize};

/// The most splits a tab nests above one pane. Every walk of a layout (and
/// its JSON in the snapshot, the upgrade manifest and replies, two levels of
/// nesting per split) recurses once per split; 32 keeps all of them far
/// inside serde_json's 128 levels and any stack, and is more nesting than a
/// screen can show (each split at least halves one side of the area).
pub const MAX_SPLIT_DEPTH: usize = 32;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    Pane(PaneId),
    Split {
        direction: Direction,
        ratio: f32,
        first: Box<Layout>,
        second: Box<Layout>,
    },
}

impl Layout {
    /// Panes in left-to-right, top-to-bottom order.
    pub fn panes(&self) -> Vec<PaneId> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect(&self, out: &mut Vec<PaneId>) {
        match self {
            Layout::Pane(id) => out.push(*id),
            Layout::Split { first, second, .. } => {
                first.collect(out);
                second.collect(out);
            }
        }
    }

    /// How many splits lie above the leaf `pane`, if it is in this layout.
    pub fn depth_of(&self, pane: PaneId) -> Option<usize> {
        match self {
            Layout::Pane(id) => (*id == pane).then_some(0),
            Layout::Split { first, second, .. } => first
                .depth_of(pane)
                .or_else(|| second.depth_of(pane))
                .map(|d| d + 1),
        }
    }

    pub fn contains(&self, pane: PaneId) -> bool {
        match self {
            Layout::Pane(id) => *id == pane,
            Layout::Split { first, second, .. } => first.contains(pane) || second.contains(pane),
        }
    }

    /// Replaces the leaf `target` with a split of it and `new_pane`.
    pub fn split(
        &mut self,
        target: PaneId,
        new_pane: PaneId,
        direction: Direction,
        ratio: f32,
    ) -> bool {
        match self {
            Layout::Pane(id) if *id == target => {
                *self = Layout::Split {
                    direction,
                    ratio,
                    first: Box::new(Layout::Pane(target)),
                    second: Box::new(Layout::Pane(new_pane)),
                };
                true
            }
            Layout::Pane(_) => false,
            Layout::Split { first, second, .. } => {
                first.split(target, new_pane, direction, ratio)
                    || second.split(target, new_pane, direction, ratio)
            }
        }
    }

    /// Moves the innermost `direction` split above `pane` by `delta`,
    /// kept within (0.05, 0.95); `false` if there is none.
    pub fn nudge(&mut self, pane: PaneId, direction: Direction, delta: f32) -> bool {
        let Layout::Split {
            direction: d,
            ratio,
            first,
            second,
        } = self
        else {
            return false;
        };
        if first.nudge(pane, direction, delta) || second.nudge(pane, direction, delta) {
            return true;
        }
        if *d != direction || !(first.contains(pane) || second.contains(pane)) {
            return false;
        }
        *ratio = (*ratio + delta).clamp(0.05, 0.95);
        true
    }

    /// Removes the leaf `pane`; its sibling takes the parent's place.
    /// Returns `None` when the tree was that single leaf (the tab is empty).
    pub fn remove(self, pane: PaneId) -> Option<Layout> {
        match self {
            Layout::Pane(id) if id == pane => None,
            Layout::Pane(_) => Some(self),
            Layout::Split {
                direction,
                ratio,
                first,
                second,
            } => Layout::join(direction, ratio, first.remove(pane), second.remove(pane)),
        }
    }

    /// A split of two optional children: a split if both survive, the one
    /// that does otherwise (a split never has an empty side).
    pub fn join(
        direction: Direction,
        ratio: f32,
        first: Option<Layout>,
        second: Option<Layout>,
    ) -> Option<Layout> {
        match (first, second) {
            (Some(a), Some(b)) => Some(Layout::Split {
                direction,
                ratio,
                first: Box::new(a),
                second: Box::new(b),
            }),
            (Some(only), None) | (None, Some(only)) => Some(only),
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(n: u64) -> PaneId {
        PaneId::new(n)
    }

    #[test]
    fn split_and_remove_collapse() {
        let mut l = Layout::Pane(p(1));
        assert!(l.split(p(1), p(2), Direction::Horizontal, 0.5));
        assert!(l.split(p(2), p(3), Direction::Vertical, 0.3));
        assert_eq!(l.panes(), vec![p(1), p(2), p(3)]);
        assert_eq!(l.depth_of(p(1)), Some(1));
        assert_eq!(l.depth_of(p(3)), Some(2));
        assert_eq!(l.depth_of(p(9)), None);
        let l = l.remove(p(2)).unwrap();
        assert_eq!(l.panes(), vec![p(1), p(3)]);
        let l = l.remove(p(1)).unwrap();
        assert_eq!(l, Layout::Pane(p(3)));
        assert_eq!(l.remove(p(3)), None);
    }
}
