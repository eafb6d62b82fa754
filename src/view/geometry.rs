//! Where a tab's panes go on a client's screen: each pane's rectangle and
//! the border cells between them, from the tab's layout tree, its zoom and
//! the area the client gives the tab; and which pane lies next to another
//! in a direction (focus moves, border drags).
//!
//! Where a split's border goes is the model's rule (`layout::split_area`:
//! one cell of border, the rest by the split's ratio, each side kept at
//! its panes' least size while there is room), so a border moved by
//! `resize-split` moves by the cells it says. An area too small for a
//! border and two sides shows its first child only: the panes of the other
//! get no rectangle (and keep their size) until the area grows.

use crate::model::PaneId;
use crate::workspace::layout::{Direction, Layout, split_area};

pub use crate::workspace::layout::Rect;

/// A run of border cells: a vertical one (between panes side by side) at
/// column `x` from row `y`, or a horizontal one at row `y` from column `x`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Border {
    pub vertical: bool,
    pub x: u16,
    pub y: u16,
    pub len: u16,
}

/// A tab laid out in an area.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Geometry {
    pub area: Rect,
    /// The panes shown, in layout order.
    pub panes: Vec<(PaneId, Rect)>,
    pub borders: Vec<Border>,
}

/// Lays `layout` out in `area`; with `zoom` (a pane of the layout) that
/// pane alone fills it.
pub fn lay_out(layout: &Layout, zoom: Option<PaneId>, area: Rect) -> Geometry {
    let mut g = Geometry {
        area,
        ..Geometry::default()
    };
    if area.cols == 0 || area.rows == 0 {
        return g;
    }
    match zoom.filter(|z| layout.contains(*z)) {
        Some(z) => g.panes.push((z, area)),
        None => place(layout, area, &mut g),
    }
    g
}

fn place(layout: &Layout, area: Rect, g: &mut Geometry) {
    match layout {
        Layout::Pane(id) => g.panes.push((*id, area)),
        Layout::Split {
            direction,
            ratio,
            first,
            second,
        } => {
            let (one, two) = split_area(*direction, *ratio, first, second, area);
            // An area too small for a border and two sides shows the
            // first side alone.
            if [one.cols, one.rows, two.cols, two.rows].contains(&0) {
                place(first, area, g);
                return;
            }
            let border = match direction {
                Direction::Horizontal => Border {
                    vertical: true,
                    x: one.x + one.cols,
                    y: area.y,
                    len: area.rows,
                },
                Direction::Vertical => Border {
                    vertical: false,
                    x: area.x,
                    y: one.y + one.rows,
                    len: area.cols,
                },
            };
            place(first, one, g);
            g.borders.push(border);
            place(second, two, g);
        }
    }
}

impl Geometry {
    pub fn rect_of(&self, pane: PaneId) -> Option<Rect> {
        self.panes.iter().find(|(p, _)| *p == pane).map(|(_, r)| *r)
    }

    pub fn pane_at(&self, x: u16, y: u16) -> Option<PaneId> {
        self.panes
            .iter()
            .find(|(_, r)| r.contains(x, y))
            .map(|(p, _)| *p)
    }

    /// Whether a border cell is at `(x, y)`.
    pub fn is_border(&self, x: u16, y: u16) -> bool {
        self.borders.iter().any(|b| {
            if b.vertical {
                x == b.x && y >= b.y && y - b.y < b.len
            } else {
                y == b.y && x >= b.x && x - b.x < b.len
            }
        })
    }

    /// The box-drawing character of the border cell at `(x, y)`: a line,
    /// or a junction where borders meet.
    pub fn border_char(&self, x: u16, y: u16) -> char {
        let up = y > 0 && self.is_border(x, y - 1);
        let down = self.is_border(x, y + 1) && u32::from(y) + 1 < self.area.bottom();
        let left = x > 0 && self.is_border(x - 1, y);
        let right = self.is_border(x + 1, y) && u32::from(x) + 1 < self.area.right();
        match (up, down, left, right) {
            (true, true, true, true) => '┼',
            (true, true, true, false) => '┤',
            (true, true, false, true) => '├',
            (false, true, true, true) => '┬',
            (true, false, true, true) => '┴',
            (true, false, true, false) => '┘',
            (true, false, false, true) => '└',
            (false, true, true, false) => '┐',
            (false, true, false, true) => '┌',
            (false, false, true, _) | (false, false, _, true) => '─',
            _ => '│',
        }
    }

    /// Whether the border cell at `(x, y)` touches `pane`'s rectangle
    /// (sides and corners): it is drawn as the active pane's.
    pub fn touches(&self, pane: PaneId, x: u16, y: u16) -> bool {
        let Some(r) = self.rect_of(pane) else {
            return false;
        };
        let (x, y) = (u32::from(x), u32::from(y));
        x + 1 >= u32::from(r.x) && x <= r.right() && y + 1 >= u32::from(r.y) && y <= r.bottom()
    }

    /// The pane next to `from` in `dir`: of the panes across the nearest
    /// border that way, the one sharing most of `from`'s side.
    pub fn neighbour(&self, from: PaneId, dir: Dir) -> Option<PaneId> {
        let r = self.rect_of(from)?;
        let overlap = |a0: u32, a1: u32, b0: u32, b1: u32| a1.min(b1).saturating_sub(a0.max(b0));
        self.panes
            .iter()
            .filter(|(p, _)| *p != from)
            .filter_map(|(p, o)| {
                let (adjacent, shared) = match dir {
                    Dir::Left => (
                        o.right() + 1 == u32::from(r.x),
                        overlap(o.y.into(), o.bottom(), r.y.into(), r.bottom()),
                    ),
                    Dir::Right => (
                        r.right() + 1 == u32::from(o.x),
                        overlap(o.y.into(), o.bottom(), r.y.into(), r.bottom()),
                    ),
                    Dir::Up => (
                        o.bottom() + 1 == u32::from(r.y),
                        overlap(o.x.into(), o.right(), r.x.into(), r.right()),
                    ),
                    Dir::Down => (
                        r.bottom() + 1 == u32::from(o.y),
                        overlap(o.x.into(), o.right(), r.x.into(), r.right()),
                    ),
                };
                (adjacent && shared > 0).then_some((shared, *p))
            })
            .max_by_key(|(shared, p)| (*shared, std::cmp::Reverse(*p)))
            .map(|(_, p)| p)
    }
}

/// A direction on the screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Left,
    Right,
    Up,
    Down,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(n: u64) -> PaneId {
        PaneId::new(n)
    }

    /// p1 | (p2 over p3) in 120x39.
    fn three() -> Layout {
        let mut l = Layout::Pane(p(1));
        l.split(p(1), p(2), Direction::Horizontal, 0.5);
        l.split(p(2), p(3), Direction::Vertical, 0.5);
        l
    }

    #[test]
    fn a_split_gives_its_border_one_cell_and_the_rest_by_ratio() {
        let g = lay_out(&three(), None, Rect::new(0, 0, 120, 39));
        assert_eq!(
            g.panes,
            vec![
                (p(1), Rect::new(0, 0, 60, 39)),
                (p(2), Rect::new(61, 0, 59, 19)),
                (p(3), Rect::new(61, 20, 59, 19)),
            ]
        );
        assert!(g.is_border(60, 0) && g.is_border(60, 38) && g.is_border(61, 19));
        assert!(!g.is_border(59, 0) && !g.is_border(61, 18));
        assert_eq!(g.border_char(60, 19), '├');
        assert_eq!(g.border_char(60, 5), '│');
        assert_eq!(g.border_char(80, 19), '─');
        // Every cell is a pane's or a border's, once.
        for y in 0..39 {
            for x in 0..120 {
                let owners = g.panes.iter().filter(|(_, r)| r.contains(x, y)).count()
                    + usize::from(g.is_border(x, y));
                assert_eq!(owners, 1, "cell {x},{y}");
            }
        }
    }

    #[test]
    fn zoom_fills_the_area_and_tiny_areas_show_the_first_child() {
        let area = Rect::new(0, 1, 80, 23);
        let g = lay_out(&three(), Some(p(3)), area);
        assert_eq!(g.panes, vec![(p(3), area)]);
        assert!(g.borders.is_empty());
        let g = lay_out(&three(), None, Rect::new(0, 0, 2, 10));
        assert_eq!(g.panes, vec![(p(1), Rect::new(0, 0, 2, 10))]);
    }

    #[test]
    fn neighbours_are_across_the_nearest_border() {
        let g = lay_out(&three(), None, Rect::new(0, 0, 120, 39));
        assert_eq!(g.neighbour(p(1), Dir::Right), Some(p(2)));
        assert_eq!(g.neighbour(p(3), Dir::Left), Some(p(1)));
        assert_eq!(g.neighbour(p(2), Dir::Down), Some(p(3)));
        assert_eq!(g.neighbour(p(3), Dir::Up), Some(p(2)));
        assert_eq!(g.neighbour(p(1), Dir::Left), None);
        assert_eq!(g.neighbour(p(2), Dir::Up), None);
        assert!(g.touches(p(1), 60, 38) && !g.touches(p(1), 62, 19));
    }
}
