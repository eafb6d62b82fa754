//! The chooser (tmux's `choose-tree`, `w` under the prefix): a list over
//! workspaces, their tabs and the tabs' panes, drawn over the view. Up and
//! Down (or k and j) move, PageUp and PageDown a screenful, Home and End
//! to the ends; Enter picks the line; Escape or q leaves. `/` starts a
//! filter: the characters typed after it keep the lines that contain them
//! (ignoring case) and the workspaces and tabs above those; Backspace
//! takes one back, and Escape drops the filter before it leaves.

use crate::model::{PaneId, TabId, WorkspaceId};

/// What a line of the chooser leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Workspace(WorkspaceId),
    Tab(TabId),
    Pane(PaneId),
}

/// One line: its depth (0 a workspace, 1 a tab, 2 a pane), its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub depth: u8,
    pub text: String,
    pub target: Target,
    /// What the client shows now (its workspace, tab, focused pane).
    pub current: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chooser {
    entries: Vec<Entry>,
    /// The index in `entries` of the line picked by Enter.
    selected: usize,
    /// The filter, while one is typed (`/`).
    filter: Option<String>,
}

/// What a key did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// Moved or filtered: draw it again.
    Moved,
    Ignored,
    Chosen(Target),
    Left,
}

impl Chooser {
    /// A chooser over `entries`, on the deepest current line.
    pub fn new(entries: Vec<Entry>) -> Chooser {
        let selected = entries.iter().rposition(|e| e.current).unwrap_or(0);
        Chooser {
            entries,
            selected,
            filter: None,
        }
    }

    /// The indexes of the lines shown: all of them, or with a filter those
    /// that match and the lines they are under.
    fn shown(&self) -> Vec<usize> {
        let Some(f) = self.filter.as_deref().filter(|f| !f.is_empty()) else {
            return (0..self.entries.len()).collect();
        };
        let f = f.to_lowercase();
        let mut keep = vec![false; self.entries.len()];
        for (i, e) in self.entries.iter().enumerate() {
            if !e.text.to_lowercase().contains(&f) {
                continue;
            }
            keep[i] = true;
            // Its parents: the nearest lines above it of each lower depth.
            let mut depth = e.depth;
            for j in (0..i).rev() {
                if self.entries[j].depth < depth {
                    keep[j] = true;
                    depth = self.entries[j].depth;
                }
            }
        }
        (0..self.entries.len()).filter(|i| keep[*i]).collect()
    }

    /// Applies the key named `key` (as `bindings::key_at` names keys);
    /// `page` is how many lines a screenful moves.
    pub fn key(&mut self, key: &str, page: usize) -> Choice {
        if let Some(f) = self.filter.as_mut() {
            match key {
                "Escape" | "C-c" | "C-g" => self.filter = None,
                "BSpace" | "C-h" => {
                    if f.pop().is_none() {
                        self.filter = None;
                    }
                }
                "Space" => f.push(' '),
                k if k.chars().count() == 1 && f.chars().count() < 100 => f.push_str(k),
                _ => return self.moves(key, page),
            }
            self.keep_selection_shown();
            return Choice::Moved;
        }
        match key {
            "Escape" | "q" | "C-c" | "C-g" => Choice::Left,
            "/" => {
                self.filter = Some(String::new());
                Choice::Moved
            }
            _ => self.moves(key, page),
        }
    }

    fn moves(&mut self, key: &str, page: usize) -> Choice {
        let shown = self.shown();
        if shown.is_empty() {
            return Choice::Ignored;
        }
        let at = shown.iter().position(|i| *i == self.selected).unwrap_or(0);
        let last = shown.len() - 1;
        let to = match key {
            "Enter" => return Choice::Chosen(self.entries[shown[at]].target),
            "Up" | "k" | "C-p" => at.saturating_sub(1),
            "Down" | "j" | "C-n" => (at + 1).min(last),
            "PageUp" => at.saturating_sub(page.max(1)),
            "PageDown" => (at + page.max(1)).min(last),
            "Home" | "g" => 0,
            "End" | "G" => last,
            _ => return Choice::Ignored,
        };
        self.selected = shown[to];
        Choice::Moved
    }

    fn keep_selection_shown(&mut self) {
        let shown = self.shown();
        if !shown.contains(&self.selected) {
            // The first match, rather than the line it hangs under.
            let deepest = shown
                .iter()
                .copied()
                .max_by_key(|i| (self.entries[*i].depth, std::cmp::Reverse(*i)));
            self.selected = deepest.unwrap_or(self.selected);
        }
    }

    /// The lines to draw in `rows` rows: a heading, then a window of the
    /// list that holds the selected line, `>` before it and `*` on the
    /// current ones.
    pub fn lines(&self, rows: usize) -> Vec<String> {
        let heading = match &self.filter {
            Some(f) => format!("choose (Enter: go, Escape: clear the filter)  /{f}"),
            None => "choose (Enter: go, q: leave, /: filter)".to_string(),
        };
        let shown = self.shown();
        let room = rows.saturating_sub(1).max(1);
        let at = shown.iter().position(|i| *i == self.selected).unwrap_or(0);
        let first = at
            .saturating_sub(room - 1)
            .min(shown.len().saturating_sub(room));
        let mut out = vec![heading];
        if shown.is_empty() {
            out.push("  (nothing matches)".into());
        }
        for &i in shown.iter().skip(first).take(room) {
            let e = &self.entries[i];
            out.push(format!(
                "{}{}{}{}",
                if i == self.selected { "> " } else { "  " },
                "  ".repeat(usize::from(e.depth)),
                e.text,
                if e.current { " *" } else { "" },
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Vec<Entry> {
        let e = |depth, text: &str, target, current| Entry {
            depth,
            text: text.into(),
            target,
            current,
        };
        vec![
            e(0, "main", Target::Workspace(WorkspaceId::new(1)), true),
            e(1, "0: work", Target::Tab(TabId::new(1)), true),
            e(2, "p1 sh", Target::Pane(PaneId::new(1)), true),
            e(2, "p2 vim", Target::Pane(PaneId::new(2)), false),
            e(1, "1: logs", Target::Tab(TabId::new(2)), false),
            e(2, "p3 tail -f log", Target::Pane(PaneId::new(3)), false),
        ]
    }

    #[test]
    fn starts_on_the_current_pane_moves_and_picks() {
        let mut c = Chooser::new(entries());
        assert!(c.lines(10)[3].starts_with("> ") && c.lines(10)[3].ends_with("p1 sh *"));
        assert_eq!(c.key("Down", 5), Choice::Moved);
        assert_eq!(c.key("j", 5), Choice::Moved);
        assert_eq!(
            c.key("Enter", 5),
            Choice::Chosen(Target::Tab(TabId::new(2)))
        );
        assert_eq!(c.key("End", 5), Choice::Moved);
        assert_eq!(c.key("Down", 5), Choice::Moved);
        assert_eq!(
            c.key("Enter", 5),
            Choice::Chosen(Target::Pane(PaneId::new(3)))
        );
        assert_eq!(c.key("x", 5), Choice::Ignored);
        assert_eq!(c.key("q", 5), Choice::Left);
    }

    #[test]
    fn a_filter_keeps_the_matches_and_what_they_are_under() {
        let mut c = Chooser::new(entries());
        c.key("/", 5);
        for k in ["T", "a", "i", "l"] {
            c.key(k, 5);
        }
        let lines = c.lines(10);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[3].starts_with("> ") && lines[3].contains("p3 tail"));
        assert_eq!(
            c.key("Enter", 5),
            Choice::Chosen(Target::Pane(PaneId::new(3)))
        );
        // Escape clears the filter first, then leaves.
        assert_eq!(c.key("Escape", 5), Choice::Moved);
        assert_eq!(c.lines(10).len(), 7);
        assert_eq!(c.key("Escape", 5), Choice::Left);
    }

    #[test]
    fn a_long_list_scrolls_to_keep_the_selection_in_view() {
        let mut c = Chooser::new(entries());
        c.key("Home", 5);
        c.key("End", 5);
        let lines = c.lines(3);
        assert_eq!(lines.len(), 3);
        assert!(
            lines[2].starts_with("> ") && lines[2].contains("p3"),
            "{lines:?}"
        );
    }
}
