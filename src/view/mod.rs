//! The tab view: a tab's panes drawn side by side in one terminal, with a
//! status line, driven by keys under a prefix. Pure parts, no server
//! types: `geometry` (a layout in an area: rectangles, borders,
//! neighbours), `compose` (a client's frames from the panes' terminal
//! models, and the bytes that change one into the next), `status` (the
//! status line), `bindings` (the keys and the keyboard's state),
//! `scroll_mode` (a pane's history paged, searched and copied from),
//! `prompt` (the line editor of the prompts), `chooser` (the list `w`
//! shows) and `titles` (pane titles in the borders). The server keeps one view per attached client (`server/clients/tab_view.rs`).

pub mod bindings;
pub mod chooser;
pub mod compose;
pub mod geometry;
pub mod prompt;
pub mod scroll_mode;
pub mod status;
pub mod titles;
