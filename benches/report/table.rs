//! The report's data: sections of rows, each row measured, failed or not
//! measured, and the three renderings (terminal table, Markdown, JSON).

use serde_json::{Map, Value, json};

/// One figure: what is printed, and the number behind it for the JSON.
pub struct Cell {
    pub text: String,
    pub value: Option<f64>,
}

impl Cell {
    pub fn num(value: f64, decimals: usize) -> Cell {
        Cell {
            text: if value.is_finite() {
                format!("{value:.decimals$}")
            } else {
                "-".into()
            },
            value: value.is_finite().then_some(value),
        }
    }

    /// A ratio, printed as `1.23x`.
    pub fn ratio(value: f64) -> Cell {
        Cell {
            text: if value.is_finite() {
                format!("{value:.2}x")
            } else {
                "-".into()
            },
            value: value.is_finite().then_some(value),
        }
    }

    pub fn text(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            value: None,
        }
    }
}

pub enum Outcome {
    Measured(Vec<Cell>),
    /// The measurement broke: the run exits non-zero.
    Failed(String),
}

pub struct Row {
    pub label: String,
    pub outcome: Outcome,
}

impl Row {
    pub fn new(label: impl Into<String>, cells: Result<Vec<Cell>, String>) -> Row {
        Row {
            label: label.into(),
            outcome: match cells {
                Ok(c) => Outcome::Measured(c),
                Err(e) => Outcome::Failed(e),
            },
        }
    }
}

pub struct Section {
    pub key: &'static str,
    pub title: String,
    /// What was measured and how, one paragraph.
    pub note: String,
    pub columns: Vec<&'static str>,
    pub rows: Vec<Row>,
}

impl Section {
    pub fn new(key: &'static str, title: impl Into<String>, columns: Vec<&'static str>) -> Section {
        Section {
            key,
            title: title.into(),
            note: String::new(),
            columns,
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, label: impl Into<String>, cells: Result<Vec<Cell>, String>) {
        self.rows.push(Row::new(label, cells));
    }

    pub fn failures(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Failed(_)))
            .count()
    }

    fn label_width(&self) -> usize {
        self.rows
            .iter()
            .map(|r| r.label.len())
            .chain([self.columns.first().map_or(0, |c| c.len())])
            .max()
            .unwrap_or(0)
    }

    /// Aligned columns for the terminal; the first column holds the labels.
    pub fn to_text(&self) -> String {
        let lw = self.label_width();
        let widths: Vec<usize> = (1..self.columns.len())
            .map(|i| {
                self.rows
                    .iter()
                    .filter_map(|r| match &r.outcome {
                        Outcome::Measured(c) => c.get(i - 1).map(|c| c.text.chars().count()),
                        _ => None,
                    })
                    .chain([self.columns[i].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = format!("== {}\n", self.title);
        let mut header = format!("{:<lw$}", self.columns.first().copied().unwrap_or(""));
        for (i, w) in widths.iter().enumerate() {
            header.push_str(&format!("  {:>w$}", self.columns[i + 1]));
        }
        out.push_str(header.trim_end());
        out.push('\n');
        for r in &self.rows {
            let mut line = format!("{:<lw$}", r.label);
            match &r.outcome {
                Outcome::Measured(cells) => {
                    for (c, w) in cells.iter().zip(&widths) {
                        line.push_str(&format!("  {:>w$}", c.text));
                    }
                }
                Outcome::Failed(e) => line.push_str(&format!("  FAILED: {e}")),
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        if !self.note.is_empty() {
            out.push_str(&wrap(&self.note, 100, ""));
        }
        out
    }

    pub fn to_markdown(&self) -> String {
        self.to_markdown_at(2)
    }

    /// The section under a heading of `level` (`##` is 2).
    pub fn to_markdown_at(&self, level: usize) -> String {
        let mut out = format!("{} {}\n\n", "#".repeat(level), self.title);
        if !self.note.is_empty() {
            out.push_str(&wrap(&self.note, 78, ""));
            out.push('\n');
        }
        out.push_str(&format!("| {} |\n", self.columns.join(" | ")));
        let align: Vec<&str> = (0..self.columns.len())
            .map(|i| if i == 0 { "---" } else { "---:" })
            .collect();
        out.push_str(&format!("|{}|\n", align.join("|")));
        for r in &self.rows {
            let cells: Vec<String> = match &r.outcome {
                Outcome::Measured(c) => c.iter().map(|c| c.text.clone()).collect(),
                Outcome::Failed(e) => vec![format!("**FAILED**: {}", md_escape(e))],
            };
            let mut all = vec![md_escape(&r.label)];
            all.extend(cells);
            while all.len() < self.columns.len() {
                all.push(String::new());
            }
            out.push_str(&format!("| {} |\n", all.join(" | ")));
        }
        out.push('\n');
        out
    }

    pub fn to_json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| match &r.outcome {
                Outcome::Measured(cells) => {
                    let mut m = Map::new();
                    for (c, name) in cells.iter().zip(self.columns.iter().skip(1)) {
                        m.insert(
                            (*name).to_string(),
                            c.value.map_or_else(|| json!(c.text), |v| json!(v)),
                        );
                    }
                    json!({ "label": r.label, "status": "measured", "values": m })
                }
                Outcome::Failed(e) => json!({ "label": r.label, "status": "failed", "error": e }),
            })
            .collect();
        json!({ "title": self.title, "note": self.note, "columns": self.columns, "rows": rows })
    }
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Word-wraps `text` at `width` columns.
pub fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::from(indent);
    for word in text.split_whitespace() {
        if line.len() > indent.len() && line.len() + 1 + word.len() > width {
            out.push_str(&line);
            out.push('\n');
            line = String::from(indent);
        }
        if line.len() > indent.len() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if line.len() > indent.len() {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// A goal and how this run did against it.
pub struct Goal {
    pub name: String,
    /// The figures the verdict rests on.
    pub detail: String,
    /// `Some(true)` PASS, `Some(false)` MISS, `None` not measured (a row it
    /// needs failed).
    pub pass: Option<bool>,
}

impl Goal {
    pub fn verdict(&self) -> &'static str {
        match self.pass {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "FAILED",
        }
    }
}
