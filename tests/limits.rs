//! Limits the server enforces on what the API can build, and that what it
//! builds up to them survives a restart and a live upgrade, through the real
//! binary:
//!
//! - `split_chain_*`: layouts nest at most `MAX_SPLIT_DEPTH` splits (F3 of
//!   issue 16: ~62 nested splits made `session.json` unreadable and failed
//!   live upgrades).
//! - `panes_up_to_the_fd_limit_*`, `accept_*`: a server under a low
//!   `RLIMIT_NOFILE` (F4, F5).

mod util;

use ptyd::workspace::layout::MAX_SPLIT_DEPTH;
use serde_json::{Value, json};
use util::{Conn, Ptyd};

/// The panes of every tab, in layout order, from `tree`.
fn tab_panes(c: &mut Conn) -> Vec<Vec<String>> {
    fn leaves(layout: &Value, out: &mut Vec<String>) {
        if let Some(p) = layout["pane"].as_str() {
            out.push(p.to_string());
        } else {
            leaves(&layout["split"]["first"], out);
            leaves(&layout["split"]["second"], out);
        }
    }
    let tree = c.ok("tree", json!({}));
    let mut tabs = Vec::new();
    for ws in tree["workspaces"].as_array().unwrap() {
        for tab in ws["tabs"].as_array().unwrap() {
            let mut out = Vec::new();
            leaves(&tab["layout"], &mut out);
            tabs.push(out);
        }
    }
    tabs
}

#[test]
fn split_chain_up_to_the_cap_survives_restart_and_upgrade_and_one_more_is_refused() {
    let ptyd = Ptyd::start();
    let mut c = ptyd.connect();
    let hold = json!(["sleep", "100000"]);
    let mut last = c.create(json!({ "argv": hold }))["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut chain = vec![last.clone()];
    for i in 0..MAX_SPLIT_DEPTH {
        let direction = if i % 2 == 0 { "horizontal" } else { "vertical" };
        let info = c.create(json!({ "argv": hold, "split": last, "direction": direction }));
        last = info["id"].as_str().unwrap().to_string();
        chain.push(last.clone());
    }
    let msg = c.err(
        "pane.create",
        json!({ "argv": hold, "split": last }),
        "invalid_params",
    );
    assert!(
        msg.contains(&format!("{MAX_SPLIT_DEPTH} splits deep"))
            && msg.contains("new tab")
            && msg.contains(&format!("pane {last}")),
        "{msg}"
    );
    // The refusal started nothing: no pane was added.
    assert_eq!(c.panes().len(), chain.len());
    assert_eq!(tab_panes(&mut c), vec![chain.clone()]);
    c.save();

    // Restart: the file reads back whole, with no repair.
    let dirs = ptyd.dirs.clone();
    let ns = ptyd.namespace.clone();
    ptyd.stop();
    let ptyd = dirs.start(&ns);
    let mut c = ptyd.connect();
    let status = c.ok("server.status", json!({}));
    let restore = &status["persistence"]["restore"];
    assert_eq!(restore["found"], true, "{status}");
    assert_eq!(restore["panes"], chain.len(), "{status}");
    assert_eq!(restore["repairs"], json!([]), "{status}");
    assert_eq!(tab_panes(&mut c), vec![chain.clone()]);

    // A live upgrade carries the same layout.
    let report = c.call("server.upgrade", json!({})).unwrap_or_else(|e| {
        panic!("upgrade failed: {e:?}\n{}", ptyd.stderr());
    });
    let generation = status["generation"].as_u64().unwrap();
    assert_eq!(report["generation"], generation + 1, "{report}");
    let mut c = ptyd.connect();
    assert_eq!(tab_panes(&mut c), vec![chain.clone()]);
    c.err(
        "pane.create",
        json!({ "argv": hold, "split": last }),
        "invalid_params",
    );
    c.ok("server.stop", json!({}));
    c.read_until_eof();
}
