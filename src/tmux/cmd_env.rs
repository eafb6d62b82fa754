//! set-environment and show-environment: tmux's global and session
//! environments, kept in the server's memory (the `environment` request),
//! never on disk, and lost when the serving process is replaced or
//! restarted. A pane the front makes gets the global variables, then its
//! session's over them (one marked removed with `-r` is not passed on; the
//! server's own environment, which panes start from, keeps it), then its
//! own `-e`.

use super::args::Args;
use super::{CmdResult, Ctx, Failure, vars};
use serde_json::{Map, Value, json};

/// The `environment` scope for `-g`, else the target session's.
fn scope(ctx: &mut Ctx, a: &Args) -> Result<String, Failure> {
    if a.has('g') {
        return Ok("global".into());
    }
    let at = ctx.find_session(a.value('t'))?;
    Ok(ctx.view()?.session(at).id())
}

/// A scope's variables and hidden names, after the changes in `params`.
fn call(ctx: &mut Ctx, params: Value) -> Result<(Map<String, Value>, Vec<String>), Failure> {
    let reply = ctx.call("environment", params)?;
    let vars = reply["environment"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let hidden = reply["hidden"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h.as_str().map(str::to_string))
        .collect();
    Ok((vars, hidden))
}

pub fn set(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let Some(name) = a.positional.first() else {
        return Err(Failure::new("no variable specified"));
    };
    if name.contains('=') {
        return Err(Failure::new("variable name contains ="));
    }
    let scope = scope(ctx, a)?;
    let params = if a.has('u') {
        json!({"scope": scope, "unset": [name]})
    } else if a.has('r') {
        json!({"scope": scope, "set": {name: null}, "hidden": a.has('h')})
    } else {
        let Some(value) = a.positional.get(1) else {
            return Err(Failure::new("no value specified"));
        };
        let value = if a.has('F') {
            let at = ctx.find_session(a.value('t'))?;
            vars::expand(ctx, at, value)?
        } else {
            value.clone()
        };
        json!({"scope": scope, "set": {name: value}, "hidden": a.has('h')})
    };
    call(ctx, params).map(|_| ())
}

/// `value` in double quotes for a shell (`show-environment -s`).
fn shell_quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

pub fn show(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let scope = scope(ctx, a)?;
    let (vars, hidden) = call(ctx, json!({"scope": scope}))?;
    // -h shows the hidden variables, and only those.
    let shown = |name: &str| hidden.iter().any(|h| h == name) == a.has('h');
    let print = |name: &str, value: &Value| match (value.as_str(), a.has('s')) {
        (Some(v), false) => out!("{name}={v}"),
        (None, false) => out!("-{name}"),
        (Some(v), true) => out!("{name}={}; export {name};", shell_quoted(v)),
        (None, true) => out!("unset {name};"),
    };
    if let Some(name) = a.positional.first() {
        return match vars.get(name.as_str()) {
            Some(value) if shown(name) => {
                print(name, value);
                Ok(())
            }
            _ => Err(Failure::new(format!("unknown variable: {name}"))),
        };
    }
    for (name, value) in &vars {
        if shown(name) {
            print(name, value);
        }
    }
    Ok(())
}

/// Records `-e NAME=VALUE` pairs as the session's variables (tmux's
/// `new-session -e`).
pub fn set_pairs(ctx: &mut Ctx, workspace: &str, pairs: &[String]) -> CmdResult {
    let mut set = Map::new();
    for pair in pairs {
        if let Some((k, v)) = pair.split_once('=') {
            set.insert(k.to_string(), Value::String(v.to_string()));
        }
    }
    if set.is_empty() {
        return Ok(());
    }
    call(ctx, json!({"scope": workspace, "set": set})).map(|_| ())
}

/// The variables a new pane of `workspace` gets: the global ones, then
/// the session's over them; those marked removed are left out.
pub fn for_new_pane(ctx: &mut Ctx, workspace: Option<&str>) -> Result<Map<String, Value>, Failure> {
    let mut env = Map::new();
    let scopes = std::iter::once("global").chain(workspace);
    for scope in scopes {
        let (vars, _) = call(ctx, json!({"scope": scope}))?;
        for (name, value) in vars {
            if value.is_null() {
                env.remove(&name);
            } else {
                env.insert(name, value);
            }
        }
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_output_quotes_what_a_shell_would_expand() {
        assert_eq!(shell_quoted("a b"), "\"a b\"");
        assert_eq!(
            shell_quoted("$HOME `x` \"q\" \\"),
            "\"\\$HOME \\`x\\` \\\"q\\\" \\\\\""
        );
    }
}
