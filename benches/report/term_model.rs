//! The terminal model against the vt100 crate, in this process.

use crate::Scale;
use crate::table::{Cell, Section};

pub fn term_model(plan: &Scale) -> Section {
    let mut s = Section::new(
        "terminal_model",
        "Terminal model against the vt100 crate",
        vec![
            "input",
            "ptyd / vt100",
            "ptyd MB/s",
            "vt100 MB/s",
            "vt100 no-scrollback MB/s",
        ],
    );
    s.note = format!(
        "In this process, 80x24 with 10,000 lines of scrollback, {} MiB per input fed in 16 KiB \
         chunks, best of {} interleaved runs in thread CPU time (benches/term.rs, which also \
         measures memory).",
        plan.term_mib, plan.term_rounds
    );
    let inputs = crate::common::term::inputs(plan.term_mib << 20);
    for c in crate::common::term::compare(&inputs, plan.term_rounds) {
        s.push(
            c.input,
            Ok(vec![
                Cell::ratio(c.ours / c.vt100),
                Cell::num(c.ours, 1),
                Cell::num(c.vt100, 1),
                Cell::num(c.vt100_no_scrollback, 1),
            ]),
        );
    }
    s
}
