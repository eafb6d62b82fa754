//! Snapshot save and restore at each pane count.

use crate::Scale;
use crate::common::human_bytes;
use crate::common::persist::{Kind, save_restore};
use crate::table::{Cell, Section};
use std::path::Path;

pub fn persist(plan: &Scale, ptyd_bin: &Path, nofile: u64, tmp: &Path) -> Section {
    let mut s = Section::new(
        "save_restore",
        "Save and restore",
        vec![
            "panes",
            "save ms",
            "loop busy ms",
            "disk thread ms",
            "restore: ready ms",
            "restore: all running ms",
            "session.json",
            "history",
        ],
    );
    s.note = format!(
        "Panes running sleep (restore: rerun), four to a tab in nested splits \
         (benches/persist.rs, which also has shells and panes with full histories). Save: \
         median of {} server.save round trips, how long the loop was busy serializing, and the \
         disk thread's own time. Restore: a cold start in the same namespace, from spawning \
         the server to its ready byte and to every pane running.",
        crate::common::persist::SAVES
    );
    for &n in &plan.persist_panes {
        let r = save_restore(
            ptyd_bin,
            &tmp.join(format!("persist{n}")),
            nofile,
            n,
            Kind::Sleep,
        );
        s.push(
            n.to_string(),
            r.map(|r| {
                vec![
                    Cell::num(r.save_client_ms, 1),
                    Cell::num(r.loop_busy_ms, 1),
                    Cell::num(r.save_disk_ms, 0),
                    Cell::num(r.restore_ready_ms, 1),
                    Cell::num(r.restore_running_ms, 1),
                    Cell::text(human_bytes(r.session_bytes)),
                    Cell::text(human_bytes(r.history_bytes)),
                ]
            }),
        );
    }
    s
}
