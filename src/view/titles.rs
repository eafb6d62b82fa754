//! Pane titles in the borders (tmux's `pane-border-status`): with
//! `pane_titles = "top"` each pane's title line is the row above it, with
//! `"bottom"` the row below it. Between stacked panes that row is the
//! border they share already; at the edge of the tab it is one row the
//! tab gives up (its panes are laid out one row shorter), which is why the
//! default is `"off"`, as tmux's is: nobody loses a row they did not ask
//! to give. Each line reads `─ p3 name: title ─────`, the pane's title (OSC
//! 0/2) or else its command, the focused pane's marked `*` and drawn in the
//! active border's colour. A tab too short to give up a row (under 3 rows)
//! shows no titles.

use super::geometry::{Geometry, Rect};
use crate::model::PaneId;

/// Where the pane titles go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaneTitles {
    #[default]
    Off,
    Top,
    Bottom,
}

/// A run of cells to draw over the borders: its text fills exactly
/// `cols` cells from `(x, y)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Title {
    pub x: u16,
    pub y: u16,
    pub cols: u16,
    pub text: String,
    /// The focused pane's: drawn as the active border.
    pub active: bool,
}

/// The area the panes are laid out in once the title row is taken from
/// `area` (the tab's); `area` itself when titles are off or it is too
/// short.
pub fn pane_area(area: Rect, titles: PaneTitles) -> Rect {
    if area.rows < 3 {
        return area;
    }
    match titles {
        PaneTitles::Off => area,
        PaneTitles::Top => Rect::new(area.x, area.y + 1, area.cols, area.rows - 1),
        PaneTitles::Bottom => Rect::new(area.x, area.y, area.cols, area.rows - 1),
    }
}

/// The title lines of `g` (laid out in `pane_area`'s area), a pane's
/// label from `label`; none when titles are off or `tab` (the tab's own
/// area) gave up no row.
pub fn titles(
    g: &Geometry,
    tab: Rect,
    titles: PaneTitles,
    focus: PaneId,
    label: &dyn Fn(PaneId) -> String,
) -> Vec<Title> {
    if titles == PaneTitles::Off || g.area == tab {
        return Vec::new();
    }
    let mut out = Vec::new();
    // Under or over a side-by-side border the spare row meets it.
    let edge_y = match titles {
        PaneTitles::Top => g.area.y - 1,
        _ => g.area.y + g.area.rows,
    };
    for b in g.borders.iter().filter(|b| b.vertical) {
        let meets = match titles {
            PaneTitles::Top => b.y == g.area.y,
            _ => u32::from(b.y) + u32::from(b.len) == g.area.bottom(),
        };
        if meets {
            let ch = if titles == PaneTitles::Top {
                '┬'
            } else {
                '┴'
            };
            out.push(Title {
                x: b.x,
                y: edge_y,
                cols: 1,
                text: ch.to_string(),
                active: g.touches(focus, b.x, b.y),
            });
        }
    }
    for &(pane, r) in &g.panes {
        let y = match titles {
            PaneTitles::Top => r.y - 1,
            _ => r.y + r.rows,
        };
        let active = pane == focus;
        let name: String = label(pane).chars().filter(|c| !c.is_control()).collect();
        let mark = if active { "*" } else { "" };
        out.push(Title {
            x: r.x,
            y,
            cols: r.cols,
            text: line(&format!(" {mark}{name} "), r.cols),
            active,
        });
    }
    out
}

/// `─` then `text`, cut or filled with `─` to `cols` cells.
fn line(text: &str, cols: u16) -> String {
    let cols = usize::from(cols);
    let mut out = String::new();
    let mut used = 0;
    for ch in std::iter::once('─').chain(text.chars()) {
        let w = unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0);
        if used + w > cols {
            break;
        }
        out.push(ch);
        used += w;
    }
    out.extend(std::iter::repeat_n('─', cols - used));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::geometry::lay_out;
    use crate::workspace::layout::{Direction, Layout};

    fn p(n: u64) -> PaneId {
        PaneId::new(n)
    }

    #[test]
    fn each_pane_gets_the_row_above_it_and_the_tab_gives_up_one() {
        let mut l = Layout::Pane(p(1));
        l.split(p(1), p(2), Direction::Horizontal, 0.5);
        l.split(p(2), p(3), Direction::Vertical, 0.5);
        let tab = Rect::new(0, 0, 41, 11);
        let area = pane_area(tab, PaneTitles::Top);
        assert_eq!(area, Rect::new(0, 1, 41, 10));
        let g = lay_out(&l, None, area);
        let label = |id: PaneId| format!("{id} sh");
        let t = titles(&g, tab, PaneTitles::Top, p(2), &label);
        let at = |pane: u64| {
            let r = g.rect_of(p(pane)).unwrap();
            t.iter()
                .find(|t| t.x == r.x && t.y + 1 == r.y && t.cols > 1)
                .unwrap()
        };
        assert_eq!(at(1).y, 0);
        assert_eq!(at(1).text, format!("─ p1 sh {}", "─".repeat(12)));
        // p3's title is the border between p2 and p3.
        assert!(g.is_border(at(3).x, at(3).y));
        assert!(at(2).active && at(2).text.starts_with("─ *p2 sh "));
        assert!(t.iter().any(|t| t.text == "┬" && t.y == 0 && t.x == 20));
        // Every title fills its pane's width exactly.
        for t in &t {
            assert_eq!(t.text.chars().count(), usize::from(t.cols), "{t:?}");
        }
        // Off, or too short: nothing taken.
        assert_eq!(pane_area(tab, PaneTitles::Off), tab);
        assert_eq!(pane_area(Rect::new(0, 0, 10, 2), PaneTitles::Top).rows, 2);
        let g = lay_out(&l, None, tab);
        assert!(titles(&g, tab, PaneTitles::Off, p(1), &label).is_empty());
        let bottom = pane_area(tab, PaneTitles::Bottom);
        let g = lay_out(&l, None, bottom);
        let t = titles(&g, tab, PaneTitles::Bottom, p(1), &label);
        assert!(
            t.iter()
                .any(|t| t.y == 10 && t.x == 0 && t.text.starts_with("─ *p1"))
        );
    }
}
