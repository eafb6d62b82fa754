//! Layout commands, onto ptyd's own layout operations: select-layout,
//! next-layout, previous-layout, swap-pane, break-pane, and the split
//! moves and zoom of resize-pane (`-L -R -U -D`, `-Z`).

use super::args::Args;
use super::cmd_pane;
use super::{CmdResult, Ctx, Failure};
use crate::workspace::layout::Preset;
use serde_json::json;

/// A layout name as tmux takes it: a full name, or a prefix of exactly
/// one (`even-h`), as tmux's lookup does.
fn layout_name(name: &str) -> Result<&'static str, Failure> {
    if let Some(exact) = Preset::NAMES.iter().find(|n| **n == name) {
        return Ok(exact);
    }
    let hits: Vec<&&str> = Preset::NAMES
        .iter()
        .filter(|n| n.starts_with(name))
        .collect();
    match hits.as_slice() {
        [one] => Ok(one),
        _ => Err(Failure::new(format!(
            "invalid layout: {name} (ptyd's tmux front knows {}; layout strings are not supported)",
            Preset::NAMES.join(", ")
        ))),
    }
}

fn apply_layout(ctx: &mut Ctx, target: Option<&str>, layout: &str) -> CmdResult {
    let at = ctx.find_window(target)?;
    let tab = ctx.view()?.window(at).id();
    ctx.call(
        "tab.select_layout",
        json!({"target": tab, "layout": layout}),
    )?;
    ctx.changed();
    Ok(())
}

pub fn select_layout(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if a.has('o') || a.has('E') {
        return Err(Failure::new(
            "select-layout: -o and -E are not supported by ptyd's tmux front",
        ));
    }
    let layout = match (a.has('n'), a.has('p'), a.positional.as_slice()) {
        (true, false, []) => "next",
        (false, true, []) => "previous",
        (false, false, [name]) => {
            let layout = layout_name(name)?;
            let window = ctx.find_window(a.value('t'))?;
            let num = ctx.view()?.window(window).num;
            apply_layout(ctx, a.value('t'), layout)?;
            // Kept for a bare select-layout, which applies it again.
            let mut store = super::options::Store::load(&ctx.paths.runtime_dir);
            store.set("layouts", &format!("@{num}"), Some(layout.to_string()));
            return store.save().map_err(Failure::new);
        }
        (false, false, []) => {
            let window = ctx.find_window(a.value('t'))?;
            let num = ctx.view()?.window(window).num;
            let store = super::options::Store::load(&ctx.paths.runtime_dir);
            match store.get("layouts", &format!("@{num}")) {
                // Only a name this front stored: layout_name vouches for it.
                Some(last) => layout_name(last)?,
                None => return Ok(()),
            }
        }
        _ => {
            return Err(Failure::new(
                "usage: select-layout [-np] [-t target-pane] [layout-name]",
            ));
        }
    };
    apply_layout(ctx, a.value('t'), layout)
}

pub fn next_layout(ctx: &mut Ctx, a: &Args) -> CmdResult {
    apply_layout(ctx, a.value('t'), "next")
}

pub fn previous_layout(ctx: &mut Ctx, a: &Args) -> CmdResult {
    apply_layout(ctx, a.value('t'), "previous")
}

/// rotate-window: every pane moves one place in the window's order (the
/// first to the end, or with `-D` the last to the front), by swaps; the
/// active place stays active, as in tmux.
pub fn rotate_window(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let at = ctx.find_window(a.value('t'))?;
    let window = ctx.view()?.window(at).clone();
    let ids: Vec<String> = window.panes.iter().map(|p| p.id()).collect();
    if ids.len() < 2 {
        return Ok(());
    }
    let active = window.panes.iter().position(|p| p.active).unwrap_or(0);
    let order: Vec<usize> = if a.has('D') {
        (1..ids.len()).rev().collect()
    } else {
        (1..ids.len()).collect()
    };
    // The carried pane is swapped with each in turn.
    let carried = if a.has('D') {
        &ids[ids.len() - 1]
    } else {
        &ids[0]
    };
    for i in order {
        let other = if a.has('D') { &ids[i - 1] } else { &ids[i] };
        ctx.call("pane.swap", json!({"target": carried, "other": other}))?;
    }
    ctx.changed();
    let rotated = ctx.view()?.window(at).clone();
    if let Some(p) = rotated.panes.get(active) {
        ctx.call("pane.focus", json!({"target": p.id()}))?;
        ctx.changed();
    }
    Ok(())
}

/// `swap-pane [-dDU] [-s src-pane] [-t dst-pane]`: `-D`/`-U` take the
/// pane after or before the target in its window as the source. Unless
/// `-d`, the source pane (now in the target's place) becomes active, as in
/// tmux.
pub fn swap_pane(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let dst = ctx.find_pane(a.value('t'))?;
    let src = if a.has('D') || a.has('U') {
        let count = ctx.view()?.window(dst).panes.len();
        let mut at = dst;
        at.pane = if a.has('D') {
            (dst.pane + 1) % count
        } else {
            (dst.pane + count - 1) % count
        };
        at
    } else {
        ctx.find_pane(a.value('s'))?
    };
    let (src, dst) = {
        let view = ctx.view()?;
        (view.pane(src).id(), view.pane(dst).id())
    };
    ctx.call("pane.swap", json!({"target": src, "other": dst}))?;
    if !a.has('d') {
        ctx.call("pane.focus", json!({"target": src}))?;
    }
    ctx.changed();
    Ok(())
}

/// `break-pane [-dP] [-F format] [-n window-name] [-s src-pane]`: the
/// pane leaves for a new tab after its own. With `-d` the tab it left
/// stays the active one.
pub fn break_pane(ctx: &mut Ctx, a: &Args) -> CmdResult {
    if a.has('t') || a.has('a') || a.has('b') {
        return Err(Failure::new(
            "break-pane: -t, -a and -b are not supported by ptyd's tmux front (the new window goes after the pane's own)",
        ));
    }
    let at = ctx.find_pane(a.value('s'))?;
    let (pane, num, old) = {
        let view = ctx.view()?;
        if view.window(at).panes.len() < 2 {
            return Err(Failure::new(format!(
                "can't break with only one pane (%{})",
                view.pane(at).num
            )));
        }
        let pane = view.pane(at);
        (pane.id(), pane.num, view.window(at).id())
    };
    let mut params = json!({"target": pane});
    // Unnamed, the window is named after what runs in the pane, as tmux's
    // automatic-rename names it.
    let name = match a.value('n') {
        Some(name) => name.to_string(),
        None => super::vars::expand(ctx, at, "#{pane_current_command}")?,
    };
    if !name.is_empty() {
        params["name"] = json!(super::view::ptyd_name(&name));
    }
    ctx.call("pane.break", params)?;
    if a.has('d') {
        ctx.call("tab.select", json!({"target": old}))?;
    }
    ctx.changed();
    cmd_pane::print_created(ctx, a, num, "#{session_name}:#{window_index}.#{pane_index}")
}

/// `resize-pane -Z`: zoom toggled on the pane.
pub fn zoom(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let at = ctx.find_pane(a.value('t'))?;
    let pane = ctx.view()?.pane(at).id();
    ctx.call("pane.zoom", json!({"target": pane}))?;
    ctx.changed();
    Ok(())
}

/// `resize-pane -L/-R/-U/-D [adjustment]` on a pane that shares its
/// window: the border beside it moves, as tmux moves it. `false` when the
/// pane is alone in its window (the caller sizes its terminal instead).
pub fn resize_split(ctx: &mut Ctx, a: &Args) -> Result<bool, Failure> {
    let at = ctx.find_pane(a.value('t'))?;
    let (pane, alone) = {
        let view = ctx.view()?;
        (view.pane(at).id(), view.window(at).panes.len() < 2)
    };
    if alone {
        return Ok(false);
    }
    let cells = match a.positional.first() {
        Some(v) => v
            .parse::<u16>()
            .map_err(|_| Failure::new(format!("invalid adjustment: {v}")))?,
        None => 1,
    };
    for (flag, direction) in [('L', "left"), ('R', "right"), ('U', "up"), ('D', "down")] {
        if !a.has(flag) {
            continue;
        }
        match ctx.call(
            "pane.resize_split",
            json!({"target": pane, "direction": direction, "cells": cells}),
        ) {
            Ok(_) => {}
            // No border that way: tmux moves nothing and says nothing.
            Err(e) if e.message.contains("is in no split") => {}
            Err(e) => return Err(e),
        }
    }
    ctx.changed();
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_names_take_unique_prefixes() {
        assert_eq!(layout_name("tiled").unwrap(), "tiled");
        assert_eq!(layout_name("even-h").unwrap(), "even-horizontal");
        assert_eq!(layout_name("main-v").unwrap(), "main-vertical");
        assert!(
            layout_name("even")
                .unwrap_err()
                .message
                .contains("even-horizontal, even-vertical")
        );
        assert!(layout_name("a5b3,80x24,0,0").is_err());
    }
}
