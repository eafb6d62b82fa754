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

/// A pane's smallest size, in columns and rows: what a PTY can be
/// (`pty::MIN_COLS`, `pty::MIN_ROWS`). No layout operation gives a pane
/// less while its tab has room.
pub const MIN_PANE: (u16, u16) = (crate::pty::MIN_COLS as u16, crate::pty::MIN_ROWS as u16);

/// Cells between the two sides of a split: one column or one row of border.
pub const BORDER: u16 = 1;

/// A rectangle of cells in a tab's area, `(x, y)` its top left corner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Rect {
    pub x: u16,
    pub y: u16,
    pub cols: u16,
    pub rows: u16,
}

impl Rect {
    pub fn new(x: u16, y: u16, cols: u16, rows: u16) -> Rect {
        Rect { x, y, cols, rows }
    }

    pub fn contains(&self, x: u16, y: u16) -> bool {
        x >= self.x && y >= self.y && x - self.x < self.cols && y - self.y < self.rows
    }

    /// The column after the last one (wider than u16: x + cols may not fit).
    pub fn right(&self) -> u32 {
        u32::from(self.x) + u32::from(self.cols)
    }

    /// The row after the last one.
    pub fn bottom(&self) -> u32 {
        u32::from(self.y) + u32::from(self.rows)
    }

    /// A tab's whole area.
    pub fn area(cols: u16, rows: u16) -> Rect {
        Rect {
            x: 0,
            y: 0,
            cols,
            rows,
        }
    }

    /// The length along `axis`: columns for side by side, rows for stacked.
    fn len(&self, axis: Direction) -> u16 {
        match axis {
            Direction::Horizontal => self.cols,
            Direction::Vertical => self.rows,
        }
    }
}

/// A side a split's border moves toward (`ptyd resize-split`, tmux's
/// `resize-pane -L/-R/-U/-D`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Left,
    Right,
    Up,
    Down,
}

impl Side {
    pub const NAMES: &'static [&'static str] = &["left", "right", "up", "down"];

    pub fn from_name(name: &str) -> Result<Side, String> {
        match name {
            "left" => Ok(Side::Left),
            "right" => Ok(Side::Right),
            "up" => Ok(Side::Up),
            "down" => Ok(Side::Down),
            _ => Err(format!(
                "unknown direction {name:?}; use one of {}",
                Side::NAMES.join(", ")
            )),
        }
    }

    /// The kind of split whose border moves this way.
    pub fn axis(self) -> Direction {
        match self {
            Side::Left | Side::Right => Direction::Horizontal,
            Side::Up | Side::Down => Direction::Vertical,
        }
    }

    /// Toward the start of the axis (left, up): the first side shrinks.
    fn toward_start(self) -> bool {
        matches!(self, Side::Left | Side::Up)
    }
}

/// The layouts tmux builds by name (`select-layout`), in the order its
/// `next-layout` goes through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// Every pane side by side, equal widths.
    EvenHorizontal,
    /// Every pane stacked, equal heights.
    EvenVertical,
    /// The first pane across the top half, the others side by side below.
    MainHorizontal,
    /// The first pane down the left half, the others stacked to its right.
    MainVertical,
    /// Rows of equal panes, as square a grid as the count allows.
    Tiled,
}

impl Preset {
    pub const ALL: [Preset; 5] = [
        Preset::EvenHorizontal,
        Preset::EvenVertical,
        Preset::MainHorizontal,
        Preset::MainVertical,
        Preset::Tiled,
    ];

    pub const NAMES: &'static [&'static str] = &[
        "even-horizontal",
        "even-vertical",
        "main-horizontal",
        "main-vertical",
        "tiled",
    ];

    pub fn name(self) -> &'static str {
        Preset::NAMES[self as usize]
    }

    pub fn from_name(name: &str) -> Result<Preset, String> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                format!(
                    "unknown layout {name:?}; the layouts are {}",
                    Preset::NAMES.join(", ")
                )
            })
    }

    /// The one after this in tmux's `next-layout` cycle.
    pub fn next(self) -> Preset {
        Preset::ALL[(self as usize + 1) % Preset::ALL.len()]
    }

    /// The one before this in the cycle.
    pub fn previous(self) -> Preset {
        Preset::ALL[(self as usize + Preset::ALL.len() - 1) % Preset::ALL.len()]
    }

    /// The layout `next-layout` (or with `back`, `previous-layout`) gives
    /// `layout`: the first preset after the one it is (after the last if
    /// it is none) that changes it. Two panes make several presets the
    /// same tree; stopping at one of those would never move on.
    pub fn cycle(layout: &Layout, back: bool) -> Preset {
        let step = |p: Preset| if back { p.previous() } else { p.next() };
        let start = Preset::of(layout).unwrap_or(if back {
            Preset::EvenHorizontal
        } else {
            Preset::Tiled
        });
        let panes = layout.panes();
        let mut candidate = step(start);
        for _ in 0..Preset::ALL.len() {
            if candidate.build(&panes).as_ref() != Some(layout) {
                return candidate;
            }
            candidate = step(candidate);
        }
        start
    }

    /// The preset `layout` is exactly (as this module builds it), if any.
    pub fn of(layout: &Layout) -> Option<Preset> {
        let panes = layout.panes();
        Preset::ALL
            .into_iter()
            .find(|p| p.build(&panes).as_ref() == Some(layout))
    }

    /// This layout of `panes`, in their order; `None` for no panes. The
    /// tree is balanced (halves split in halves), so its depth grows with
    /// the logarithm of the pane count and stays far inside
    /// [`MAX_SPLIT_DEPTH`].
    pub fn build(self, panes: &[PaneId]) -> Option<Layout> {
        let (main, rest) = panes.split_first()?;
        let main_beside = |direction, rest_direction| match even(rest, rest_direction) {
            None => Layout::Pane(*main),
            Some(rest) => Layout::Split {
                direction,
                ratio: 0.5,
                first: Box::new(Layout::Pane(*main)),
                second: Box::new(rest),
            },
        };
        Some(match self {
            Preset::EvenHorizontal => even(panes, Direction::Horizontal)?,
            Preset::EvenVertical => even(panes, Direction::Vertical)?,
            Preset::MainHorizontal => main_beside(Direction::Vertical, Direction::Horizontal),
            Preset::MainVertical => main_beside(Direction::Horizontal, Direction::Vertical),
            Preset::Tiled => {
                let columns = (1..).find(|c| c * c >= panes.len()).unwrap_or(1);
                let rows: Vec<Layout> = panes
                    .chunks(columns)
                    .filter_map(|row| even(row, Direction::Horizontal))
                    .collect();
                even_of(rows, Direction::Vertical)?
            }
        })
    }
}

/// `panes` in a row (or column) of equal shares.
fn even(panes: &[PaneId], direction: Direction) -> Option<Layout> {
    even_of(panes.iter().map(|p| Layout::Pane(*p)).collect(), direction)
}

/// `parts` in a row (or column) of equal shares: each half split again,
/// the first half's ratio its share of the count.
fn even_of(mut parts: Vec<Layout>, direction: Direction) -> Option<Layout> {
    if parts.len() <= 1 {
        return parts.pop();
    }
    let n = parts.len();
    let second = parts.split_off(n / 2);
    Some(Layout::Split {
        direction,
        ratio: (n / 2) as f32 / n as f32,
        first: Box::new(even_of(parts, direction)?),
        second: Box::new(even_of(second, direction)?),
    })
}

impl Layout {
    /// Each pane's rectangle in `area`, in [`panes`](Self::panes) order.
    /// A split gives its first side `ratio` of the cells left after the
    /// [`BORDER`], rounded, but never so many that either side falls below
    /// what its panes need ([`MIN_PANE`] each, and borders); an area too
    /// small for that gives some panes less (down to nothing), never a
    /// panic.
    pub fn rects(&self, area: Rect) -> Vec<(PaneId, Rect)> {
        let mut out = Vec::new();
        self.collect_rects(area, &mut out);
        out
    }

    fn collect_rects(&self, area: Rect, out: &mut Vec<(PaneId, Rect)>) {
        match self {
            Layout::Pane(id) => out.push((*id, area)),
            Layout::Split {
                direction,
                ratio,
                first,
                second,
            } => {
                let cells = split_cells(*direction, *ratio, first, second, area);
                let (a, b) = divide(area, *direction, cells);
                first.collect_rects(a, out);
                second.collect_rects(b, out);
            }
        }
    }

    /// The least area this layout's panes fit in: [`MIN_PANE`] per pane
    /// and the borders between them.
    pub fn min_size(&self) -> (u16, u16) {
        match self {
            Layout::Pane(_) => MIN_PANE,
            Layout::Split {
                direction,
                first,
                second,
                ..
            } => joined(*direction, first.min_size(), second.min_size()),
        }
    }

    /// The size of the area these panes fill when each has the size
    /// `size_of` gives it and borders lie between them: the tab's size
    /// when its panes are sized to their rectangles.
    pub fn size_from(&self, size_of: &impl Fn(PaneId) -> (u16, u16)) -> (u16, u16) {
        match self {
            Layout::Pane(id) => size_of(*id),
            Layout::Split {
                direction,
                first,
                second,
                ..
            } => joined(
                *direction,
                first.size_from(size_of),
                second.size_from(size_of),
            ),
        }
    }

    /// Exchanges the leaves `a` and `b` (each may be absent: a pane
    /// arriving from another tab replaces the one leaving).
    pub fn swap(&mut self, a: PaneId, b: PaneId) {
        match self {
            Layout::Pane(id) if *id == a => *id = b,
            Layout::Pane(id) if *id == b => *id = a,
            Layout::Pane(_) => {}
            Layout::Split { first, second, .. } => {
                first.swap(a, b);
                second.swap(a, b);
            }
        }
    }

    /// Moves the border of the split nearest above `pane` that divides
    /// along `side`'s axis by `cells` toward `side`, in a tab of `area`,
    /// as far as the panes on either side keep their [`min_size`]
    /// (Self::min_size). Returns the cells it moved (fewer than asked, or
    /// 0, at that limit); `None` when no such split lies above `pane` or
    /// the pane is not here.
    pub fn resize_split(
        &mut self,
        pane: PaneId,
        side: Side,
        cells: u16,
        area: Rect,
    ) -> Option<u16> {
        match self.resize_in(pane, side, cells, area) {
            Some(Resized::Moved(n)) => Some(n),
            _ => None,
        }
    }

    fn resize_in(&mut self, pane: PaneId, side: Side, cells: u16, area: Rect) -> Option<Resized> {
        let Layout::Split {
            direction,
            ratio,
            first,
            second,
        } = self
        else {
            return (self == &Layout::Pane(pane)).then_some(Resized::Found);
        };
        let now = split_cells(*direction, *ratio, first, second, area);
        let (a, b) = divide(area, *direction, now);
        let below = match first.resize_in(pane, side, cells, a) {
            None => second.resize_in(pane, side, cells, b)?,
            found => found?,
        };
        if below != Resized::Found || *direction != side.axis() {
            return Some(below);
        }
        let avail = area.len(*direction).saturating_sub(BORDER);
        let low = min_along(first, *direction);
        let high = avail.saturating_sub(min_along(second, *direction));
        if low > high || avail < 2 {
            return Some(Resized::Moved(0));
        }
        let wanted = if side.toward_start() {
            now.saturating_sub(cells)
        } else {
            now.saturating_add(cells)
        };
        let new = wanted.clamp(low, high);
        *ratio = f32::from(new) / f32::from(avail);
        // The ratio must give back `new` cells at this size, and stay in
        // (0, 1): `new` is at least 1 and at most `avail - 1`.
        debug_assert_eq!(split_cells(*direction, *ratio, first, second, area), new);
        Some(Resized::Moved(now.abs_diff(new)))
    }
}

/// The size of two areas of `a` and `b` cells put beside each other
/// along `direction`, with the border between them.
fn joined(direction: Direction, a: (u16, u16), b: (u16, u16)) -> (u16, u16) {
    match direction {
        Direction::Horizontal => (a.0.saturating_add(BORDER).saturating_add(b.0), a.1.max(b.1)),
        Direction::Vertical => (a.0.max(b.0), a.1.saturating_add(BORDER).saturating_add(b.1)),
    }
}

/// The least length of `layout` along `direction`'s axis.
fn min_along(layout: &Layout, direction: Direction) -> u16 {
    let (cols, rows) = layout.min_size();
    match direction {
        Direction::Horizontal => cols,
        Direction::Vertical => rows,
    }
}

/// What a walk of [`Layout::resize_in`] found below a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resized {
    /// The pane, with no split of the right kind between it and here.
    Found,
    /// A split moved by this many cells.
    Moved(u16),
}

/// The two sides of a split of `area` (the border between them): the
/// one rule for where a split's border is, which the tab view draws and
/// `resize-split` counts cells by.
pub fn split_area(
    direction: Direction,
    ratio: f32,
    first: &Layout,
    second: &Layout,
    area: Rect,
) -> (Rect, Rect) {
    divide(
        area,
        direction,
        split_cells(direction, ratio, first, second, area),
    )
}

/// The cells a split of `area` gives its first side (see [`Layout::rects`]).
fn split_cells(
    direction: Direction,
    ratio: f32,
    first: &Layout,
    second: &Layout,
    area: Rect,
) -> u16 {
    let avail = area.len(direction).saturating_sub(BORDER);
    let wanted = (f32::from(avail) * ratio.clamp(0.0, 1.0)).round() as u16;
    let high = avail.saturating_sub(min_along(second, direction));
    // Too small for both sides: the first side keeps what it needs first.
    wanted.min(high).max(min_along(first, direction)).min(avail)
}

/// `area` cut along `direction` after `cells`, the border between.
fn divide(area: Rect, direction: Direction, cells: u16) -> (Rect, Rect) {
    let rest = area
        .len(direction)
        .saturating_sub(cells)
        .saturating_sub(BORDER);
    match direction {
        Direction::Horizontal => (
            Rect {
                cols: cells,
                ..area
            },
            Rect {
                x: area.x.saturating_add(cells).saturating_add(BORDER),
                cols: rest,
                ..area
            },
        ),
        Direction::Vertical => (
            Rect {
                rows: cells,
                ..area
            },
            Rect {
                y: area.y.saturating_add(cells).saturating_add(BORDER),
                rows: rest,
                ..area
            },
        ),
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

    fn ps(n: u64) -> Vec<PaneId> {
        (1..=n).map(p).collect()
    }

    fn check_ratios(l: &Layout) {
        if let Layout::Split {
            ratio,
            first,
            second,
            ..
        } = l
        {
            assert!(*ratio > 0.0 && *ratio < 1.0, "{ratio}");
            check_ratios(first);
            check_ratios(second);
        }
    }

    #[test]
    fn presets_give_equal_shares_in_pane_order() {
        let area = Rect::area(119, 40);
        let even = Preset::EvenHorizontal.build(&ps(4)).unwrap();
        assert_eq!(even.panes(), ps(4));
        let rects = even.rects(area);
        // 119 columns, 3 borders: 29 each.
        let widths: Vec<u16> = rects.iter().map(|(_, r)| r.cols).collect();
        assert_eq!(widths, [29, 29, 29, 29]);
        assert_eq!(rects[1].1.x, 30);
        assert!(rects.iter().all(|(_, r)| r.rows == 40 && r.y == 0));
        let stacked = Preset::EvenVertical.build(&ps(3)).unwrap();
        let heights: Vec<u16> = stacked
            .rects(Rect::area(80, 38))
            .iter()
            .map(|(_, r)| r.rows)
            .collect();
        assert_eq!(heights, [12, 12, 12]);

        let main = Preset::MainVertical.build(&ps(3)).unwrap();
        let r = main.rects(Rect::area(81, 41));
        assert_eq!(
            r[0],
            (
                p(1),
                Rect {
                    x: 0,
                    y: 0,
                    cols: 40,
                    rows: 41
                }
            )
        );
        assert_eq!(
            r[1],
            (
                p(2),
                Rect {
                    x: 41,
                    y: 0,
                    cols: 40,
                    rows: 20
                }
            )
        );
        assert_eq!(
            r[2],
            (
                p(3),
                Rect {
                    x: 41,
                    y: 21,
                    cols: 40,
                    rows: 20
                }
            )
        );
        let main = Preset::MainHorizontal.build(&ps(3)).unwrap();
        let r = main.rects(Rect::area(81, 41));
        assert_eq!(
            r[0].1,
            Rect {
                x: 0,
                y: 0,
                cols: 81,
                rows: 20
            }
        );
        assert_eq!(
            r[2].1,
            Rect {
                x: 41,
                y: 21,
                cols: 40,
                rows: 20
            }
        );

        // Five tiled: rows of three and two.
        let tiled = Preset::Tiled.build(&ps(5)).unwrap();
        let r = tiled.rects(Rect::area(80, 41));
        assert_eq!(r.iter().filter(|(_, r)| r.y == 0).count(), 3);
        assert_eq!(r.iter().filter(|(_, r)| r.y == 21).count(), 2);
        assert_eq!(
            Preset::Tiled
                .build(&ps(4))
                .unwrap()
                .rects(Rect::area(81, 41))[3]
                .1,
            Rect {
                x: 41,
                y: 21,
                cols: 40,
                rows: 20
            }
        );

        for preset in Preset::ALL {
            assert_eq!(Preset::from_name(preset.name()), Ok(preset));
            assert_eq!(preset.next().previous(), preset);
            assert_eq!(preset.build(&[]), None);
            assert_eq!(preset.build(&ps(1)), Some(Layout::Pane(p(1))));
            for n in [2, 3, 7, 100] {
                let l = preset.build(&ps(n)).unwrap();
                assert_eq!(l.panes(), ps(n), "{}", preset.name());
                check_ratios(&l);
                assert!(ps(n).iter().all(|x| l.depth_of(*x).unwrap() <= 10));
                // Two panes make some presets the same tree.
                if n > 2 {
                    assert_eq!(Preset::of(&l), Some(preset), "{} of {n}", preset.name());
                }
            }
        }
        let two = Preset::EvenVertical.build(&ps(2)).unwrap();
        let next = Preset::cycle(&two, false);
        assert_ne!(next.build(&ps(2)).unwrap(), two);
        assert_ne!(Preset::cycle(&two, true).build(&ps(2)).unwrap(), two);
        let custom = Layout::Split {
            direction: Direction::Horizontal,
            ratio: 0.3,
            first: Box::new(Layout::Pane(p(1))),
            second: Box::new(Layout::Pane(p(2))),
        };
        assert_eq!(Preset::cycle(&custom, false), Preset::EvenHorizontal);
        assert_eq!(
            Preset::cycle(&Layout::Pane(p(1)), false),
            Preset::EvenHorizontal
        );
        let err = Preset::from_name("even").unwrap_err();
        assert!(
            err.contains("even-horizontal, even-vertical, main-horizontal, main-vertical, tiled"),
            "{err}"
        );
    }

    #[test]
    fn resize_moves_the_nearest_split_of_the_axis_and_stops_at_the_minimum() {
        // p1 | (p2 / p3)
        let mut l = Layout::Pane(p(1));
        l.split(p(1), p(2), Direction::Horizontal, 0.5);
        l.split(p(2), p(3), Direction::Vertical, 0.5);
        let area = Rect::area(81, 21);
        // From p3, left: the side-by-side split above both of its splits.
        assert_eq!(l.resize_split(p(3), Side::Left, 10, area), Some(10));
        assert_eq!(l.rects(area)[0].1.cols, 30);
        assert_eq!(l.resize_split(p(1), Side::Right, 5, area), Some(5));
        assert_eq!(l.rects(area)[0].1.cols, 35);
        // Up from p3 moves the stacked split: p2 shrinks.
        assert_eq!(l.resize_split(p(3), Side::Up, 4, area), Some(4));
        assert_eq!(l.rects(area)[1].1.rows, 6);
        // p1 has no stacked split above it.
        assert_eq!(l.resize_split(p(1), Side::Down, 1, area), None);
        assert_eq!(l.resize_split(p(9), Side::Left, 1, area), None);
        // Clamped: p1 keeps 2 columns, p2 keeps 1 row.
        assert_eq!(l.resize_split(p(1), Side::Left, 500, area), Some(33));
        assert_eq!(l.rects(area)[0].1.cols, 2);
        assert_eq!(l.resize_split(p(1), Side::Left, 1, area), Some(0));
        assert_eq!(l.resize_split(p(2), Side::Up, 500, area), Some(5));
        assert_eq!(l.rects(area)[1].1.rows, 1);
        assert_eq!(l.resize_split(p(2), Side::Right, 500, area), Some(76));
        let r = l.rects(area);
        assert_eq!((r[0].1.cols, r[1].1.cols), (78, 2));
        check_ratios(&l);
        // An area too small for the panes moves nothing and panics nowhere.
        assert_eq!(
            l.resize_split(p(2), Side::Left, 3, Rect::area(3, 1)),
            Some(0)
        );
        let _ = l.rects(Rect::area(0, 0));
        check_ratios(&l);
    }

    #[test]
    fn rects_tile_the_area_with_borders() {
        let l = Preset::Tiled.build(&ps(7)).unwrap();
        let area = Rect::area(100, 30);
        let rects = l.rects(area);
        let cells: u32 = rects
            .iter()
            .map(|(_, r)| u32::from(r.cols) * u32::from(r.rows))
            .sum();
        // Three rows: 2 horizontal borders; row widths minus vertical borders.
        assert!(
            cells < 100 * 30 && cells > 100 * 30 - 3 * 100 - 2 * 30,
            "{cells}"
        );
        for (i, (_, a)) in rects.iter().enumerate() {
            assert!(a.x + a.cols <= 100 && a.y + a.rows <= 30);
            for (_, b) in &rects[i + 1..] {
                let apart = a.x + a.cols <= b.x
                    || b.x + b.cols <= a.x
                    || a.y + a.rows <= b.y
                    || b.y + b.rows <= a.y;
                assert!(apart, "{a:?} overlaps {b:?}");
            }
        }
        assert_eq!(l.min_size(), (8, 5));
        let size = l.size_from(&|_| (10, 3));
        assert_eq!(size, (32, 11));
    }

    #[test]
    fn swap_exchanges_leaves() {
        let mut l = Preset::EvenHorizontal.build(&ps(3)).unwrap();
        l.swap(p(1), p(3));
        assert_eq!(l.panes(), vec![p(3), p(2), p(1)]);
        l.swap(p(3), p(7));
        assert_eq!(l.panes(), vec![p(7), p(2), p(1)]);
    }
}
