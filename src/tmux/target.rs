//! `-t` targets as tmux reads them: `session:window.pane`, with ids (`$N`,
//! `@N`, `%N`), indexes, exact names (`=name`), name prefixes and fnmatch
//! patterns, and the tokens tools use (`{start}` / `^`, `{end}` / `$`,
//! `{last}` / `!`, `{next}` / `+`, `{previous}` / `-`). An empty part is
//! the current one: the pane the command runs in (`TMUX_PANE`, or
//! `PTYD_PANE_ID`), else the active workspace's active tab and pane.
//! Errors are tmux's words, which tools match ("can't find session: x").

use super::format::glob_match;
use super::view::{At, View};

pub fn current(view: &View, inside: Option<u64>) -> Option<At> {
    if let Some(at) = inside.and_then(|n| view.find_pane_num(n)) {
        return Some(at);
    }
    let session = view
        .sessions
        .iter()
        .position(|s| s.active && !s.windows.is_empty())
        .or_else(|| view.sessions.iter().position(|s| !s.windows.is_empty()))?;
    Some(view.session_at(session))
}

fn id_num(s: &str, prefix: char) -> Option<u64> {
    s.strip_prefix(prefix)?.parse().ok()
}

/// A session by `$N`, `=name`, name, unique prefix or unique pattern.
fn find_session_part(view: &View, part: &str) -> Option<usize> {
    if let Some(n) = id_num(part, '$') {
        return view.sessions.iter().position(|s| s.num == n);
    }
    if let Some(exact) = part.strip_prefix('=') {
        return view.sessions.iter().position(|s| s.name == exact);
    }
    if let Some(i) = view.sessions.iter().position(|s| s.name == part) {
        return Some(i);
    }
    let unique = |hits: Vec<usize>| (hits.len() == 1).then(|| hits[0]);
    let prefixed = view
        .sessions
        .iter()
        .enumerate()
        .filter(|(_, s)| s.name.starts_with(part))
        .map(|(i, _)| i)
        .collect();
    unique(prefixed).or_else(|| {
        unique(
            view.sessions
                .iter()
                .enumerate()
                .filter(|(_, s)| glob_match(part.as_bytes(), s.name.as_bytes()))
                .map(|(i, _)| i)
                .collect(),
        )
    })
}

/// A window of `session` by index, `@N`, token, name, prefix or pattern.
fn find_window_part(view: &View, session: usize, part: &str, current: Option<At>) -> Option<usize> {
    let windows = &view.sessions[session].windows;
    if windows.is_empty() {
        return None;
    }
    let active = windows.iter().position(|w| w.active).unwrap_or(0);
    let here = current
        .filter(|c| c.session == session)
        .map_or(active, |c| c.window);
    match part {
        "" | "{last}" | "!" => return Some(here),
        "{start}" | "^" => return Some(0),
        "{end}" | "$" => return Some(windows.len() - 1),
        "{next}" | "+" => return Some((here + 1) % windows.len()),
        "{previous}" | "-" => return Some((here + windows.len() - 1) % windows.len()),
        _ => {}
    }
    if let Some(n) = id_num(part, '@') {
        return windows.iter().position(|w| w.num == n);
    }
    if let Ok(index) = part.parse::<usize>() {
        return windows.iter().position(|w| w.index == index);
    }
    if let Some(exact) = part.strip_prefix('=') {
        return windows.iter().position(|w| w.name == exact);
    }
    if let Some(i) = windows.iter().position(|w| w.name == part) {
        return Some(i);
    }
    let hits: Vec<usize> = windows
        .iter()
        .enumerate()
        .filter(|(_, w)| w.name.starts_with(part) || glob_match(part.as_bytes(), w.name.as_bytes()))
        .map(|(i, _)| i)
        .collect();
    (hits.len() == 1).then(|| hits[0])
}

fn find_pane_part(view: &View, session: usize, window: usize, part: &str) -> Option<usize> {
    let panes = &view.sessions[session].windows[window].panes;
    let active = panes.iter().position(|p| p.active).unwrap_or(0);
    match part {
        "" | "{last}" | "!" | "{active}" => return (!panes.is_empty()).then_some(active),
        "{start}" | "{top}" | "{left}" | "{top-left}" => return (!panes.is_empty()).then_some(0),
        "{end}" | "{bottom}" | "{right}" | "{bottom-right}" => return panes.len().checked_sub(1),
        "{next}" | "+" => return (!panes.is_empty()).then(|| (active + 1) % panes.len()),
        "{previous}" | "-" => {
            return (!panes.is_empty()).then(|| (active + panes.len() - 1) % panes.len());
        }
        _ => {}
    }
    if let Some(n) = id_num(part, '%') {
        return panes.iter().position(|p| p.num == n);
    }
    let index: usize = part.parse().ok()?;
    panes.iter().position(|p| p.index == index)
}

pub fn session(view: &View, target: Option<&str>, current: Option<At>) -> Result<At, String> {
    let target = target.unwrap_or("");
    let fail = || format!("can't find session: {}", session_label(target));
    if let Some(n) = id_num(target, '%') {
        return view.find_pane_num(n).ok_or_else(fail);
    }
    if target.starts_with('@') {
        return window(view, Some(target), current).map_err(|_| fail());
    }
    let part = target.split(':').next().unwrap_or("");
    if part.is_empty() {
        return current.ok_or_else(fail);
    }
    find_session_part(view, part)
        .map(|s| view.session_at(s))
        .ok_or_else(fail)
}

/// tmux names the session part alone in "can't find session".
fn session_label(target: &str) -> &str {
    target.split(':').next().unwrap_or(target)
}

pub fn window(view: &View, target: Option<&str>, current: Option<At>) -> Result<At, String> {
    let target = target.unwrap_or("");
    let fail = || format!("can't find window: {target}");
    if let Some(n) = id_num(target, '%') {
        return view.find_pane_num(n).ok_or_else(fail);
    }
    if let Some(n) = id_num(target, '@') {
        for (s, session) in view.sessions.iter().enumerate() {
            if let Some(w) = session.windows.iter().position(|w| w.num == n) {
                return Ok(view.window_at(s, w));
            }
        }
        return Err(fail());
    }
    // `session:window` (a `.pane` after it is ignored here, as by tmux).
    let (session_part, window_part) = match target.split_once(':') {
        Some((s, w)) => (Some(s), w.split('.').next().unwrap_or("")),
        None => (None, target),
    };
    let session = match session_part {
        Some("") | None => current.map(|c| c.session),
        Some(s) => {
            Some(find_session_part(view, s).ok_or_else(|| format!("can't find session: {s}"))?)
        }
    };
    if let Some(s) = session {
        if let Some(w) = find_window_part(view, s, window_part, current) {
            return Ok(view.window_at(s, w));
        }
    }
    // A bare word that is no window of the current session may be a
    // session (tmux tries both).
    if session_part.is_none() {
        if let Some(s) = find_session_part(view, window_part) {
            return Ok(view.session_at(s));
        }
    }
    Err(fail())
}

pub fn pane(view: &View, target: Option<&str>, current: Option<At>) -> Result<At, String> {
    let target = target.unwrap_or("");
    let fail = || format!("can't find pane: {target}");
    if target.is_empty() {
        return current.ok_or_else(fail);
    }
    if let Some(n) = id_num(target, '%') {
        return view.find_pane_num(n).ok_or_else(fail);
    }
    // The pane part follows the last `.` after the session's `:`.
    let after_colon = target.rfind(':').map_or(0, |i| i + 1);
    let (window_target, pane_part) = match target[after_colon..].rfind('.') {
        Some(dot) => (
            &target[..after_colon + dot],
            Some(&target[after_colon + dot + 1..]),
        ),
        None => (target, None),
    };
    if pane_part.is_none() && !target.contains(':') {
        // A bare word: a pane index or token in the current window first.
        if let Some(c) = current {
            if let Some(p) = find_pane_part(view, c.session, c.window, target) {
                return Ok(At { pane: p, ..c });
            }
        }
    }
    let w = window(view, Some(window_target), current).map_err(|e| {
        if pane_part.is_some() || target.contains(':') {
            e
        } else {
            fail()
        }
    })?;
    match pane_part {
        None => Ok(w),
        Some(part) => find_pane_part(view, w.session, w.window, part)
            .map(|p| At { pane: p, ..w })
            .ok_or_else(fail),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn view() -> View {
        let tab = |id: &str, name: &str, active: bool, panes: &[&str]| {
            json!({"id": id, "name": name, "active": active, "focus": panes[0], "zoom": null,
                   "layout": null,
                   "panes": panes.iter().map(|p| json!({"id": p})).collect::<Vec<_>>()})
        };
        View::from_tree(&json!({"workspaces": [
            {"id": "w1", "name": "~0", "active": false,
             "tabs": [tab("t1", "bash", true, &["p1"])]},
            {"id": "w2", "name": "work", "active": true,
             "tabs": [tab("t2", "editor", false, &["p2", "p3"]), tab("t5", "logs", true, &["p4"])]},
            {"id": "w3", "name": "workshop", "active": false,
             "tabs": [tab("t6", "x", true, &["p6"])]},
        ]}))
    }

    fn num(v: &View, r: Result<At, String>) -> u64 {
        v.pane(r.unwrap()).num
    }

    #[test]
    fn sessions_by_id_name_prefix_and_current() {
        let v = view();
        let cur = current(&v, None);
        assert_eq!(num(&v, session(&v, None, cur)), 4);
        assert_eq!(num(&v, session(&v, Some("$1"), cur)), 1);
        assert_eq!(num(&v, session(&v, Some("0"), cur)), 1);
        assert_eq!(num(&v, session(&v, Some("=work"), cur)), 4);
        assert_eq!(num(&v, session(&v, Some("works"), cur)), 6);
        assert_eq!(
            session(&v, Some("wor*x"), cur).unwrap_err(),
            "can't find session: wor*x"
        );
        assert_eq!(
            session(&v, Some("nosuch:1"), cur).unwrap_err(),
            "can't find session: nosuch"
        );
    }

    #[test]
    fn windows_and_panes_by_every_form() {
        let v = view();
        let cur = current(&v, None);
        assert_eq!(num(&v, window(&v, Some("work:0"), cur)), 2);
        assert_eq!(num(&v, window(&v, Some("@5"), cur)), 4);
        assert_eq!(num(&v, window(&v, Some("work:editor"), cur)), 2);
        assert_eq!(num(&v, window(&v, Some(":^"), cur)), 2);
        assert_eq!(num(&v, pane(&v, Some("work:0.1"), cur)), 3);
        assert_eq!(num(&v, pane(&v, Some("%3"), cur)), 3);
        assert_eq!(num(&v, pane(&v, Some("workshop"), cur)), 6);
        assert_eq!(num(&v, pane(&v, Some("work:editor.{end}"), cur)), 3);
        assert_eq!(
            pane(&v, Some("%99"), cur).unwrap_err(),
            "can't find pane: %99"
        );
        assert_eq!(
            window(&v, Some("work:9"), cur).unwrap_err(),
            "can't find window: work:9"
        );
    }

    #[test]
    fn inside_a_pane_that_pane_is_current() {
        let v = view();
        let cur = current(&v, Some(3));
        assert_eq!(num(&v, pane(&v, None, cur)), 3);
        assert_eq!(num(&v, pane(&v, Some("0"), cur)), 2);
        assert_eq!(num(&v, window(&v, Some(""), cur)), 2);
    }
}
