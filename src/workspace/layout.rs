//! The layout of one tab: a binary tree whose leaves are panes and whose
//! inner nodes split their area in two, side by side or one above the other.
//!
//! Invariants: every pane appears in at most one leaf of all tabs; ratios are
//! in (0, 1) and give the share of the first child.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Children side by side (a vertical divider), first on the left.
    Horizontal,
    /// Children stacked (a horizontal divider), first on top.
    Vertical,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    Pane(u64),
    Split {
        direction: Direction,
        ratio: f32,
        first: Box<Layout>,
        second: Box<Layout>,
    },
}

impl Layout {
    /// Panes in left-to-right, top-to-bottom order.
    pub fn panes(&self) -> Vec<u64> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect(&self, out: &mut Vec<u64>) {
        match self {
            Layout::Pane(id) => out.push(*id),
            Layout::Split { first, second, .. } => {
                first.collect(out);
                second.collect(out);
            }
        }
    }

    pub fn contains(&self, pane: u64) -> bool {
        match self {
            Layout::Pane(id) => *id == pane,
            Layout::Split { first, second, .. } => first.contains(pane) || second.contains(pane),
        }
    }

    /// Replaces the leaf `target` with a split of it and `new_pane`.
    pub fn split(&mut self, target: u64, new_pane: u64, direction: Direction, ratio: f32) -> bool {
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

    /// Removes the leaf `pane`; its sibling takes the parent's place.
    /// Returns `None` when the tree was that single leaf (the tab is empty).
    pub fn remove(self, pane: u64) -> Option<Layout> {
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

    /// Drops leaves for which `keep` is false and splits whose ratio is not
    /// in (0, 1) get 0.5: the repair applied to a restored layout.
    pub fn repaired(
        self,
        keep: &mut impl FnMut(u64) -> bool,
        fixes: &mut Vec<String>,
    ) -> Option<Layout> {
        match self {
            Layout::Pane(id) => {
                if keep(id) {
                    Some(Layout::Pane(id))
                } else {
                    fixes.push(format!(
                        "dropped layout leaf for unknown or duplicate pane p{id}"
                    ));
                    None
                }
            }
            Layout::Split {
                direction,
                ratio,
                first,
                second,
            } => {
                let ratio = if ratio > 0.0 && ratio < 1.0 {
                    ratio
                } else {
                    fixes.push(format!("split ratio {ratio} is outside (0, 1); using 0.5"));
                    0.5
                };
                let first = first.repaired(keep, fixes);
                Layout::join(direction, ratio, first, second.repaired(keep, fixes))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_remove_collapse() {
        let mut l = Layout::Pane(1);
        assert!(l.split(1, 2, Direction::Horizontal, 0.5));
        assert!(l.split(2, 3, Direction::Vertical, 0.3));
        assert_eq!(l.panes(), vec![1, 2, 3]);
        let l = l.remove(2).unwrap();
        assert_eq!(l.panes(), vec![1, 3]);
        let l = l.remove(1).unwrap();
        assert_eq!(l, Layout::Pane(3));
        assert_eq!(l.remove(3), None);
    }

    #[test]
    fn repair_drops_bad_leaves_and_ratios() {
        let l = Layout::Split {
            direction: Direction::Horizontal,
            ratio: 1.5,
            first: Box::new(Layout::Pane(1)),
            second: Box::new(Layout::Split {
                direction: Direction::Vertical,
                ratio: 0.5,
                first: Box::new(Layout::Pane(9)),
                second: Box::new(Layout::Pane(2)),
            }),
        };
        let mut fixes = Vec::new();
        let r = l.repaired(&mut |id| id != 9, &mut fixes).unwrap();
        assert_eq!(r.panes(), vec![1, 2]);
        assert!(matches!(r, Layout::Split { ratio, .. } if ratio == 0.5));
        assert_eq!(fixes.len(), 2);
    }
}
