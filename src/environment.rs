//! The environment a client sends with `pane.create` and `attach`: a pane
//! starts with its creator's environment, as a program started from that
//! shell would, not with whatever the shell that first started the server
//! had. docs/design/environment.md says which variables a pane takes from
//! where, and why none of them is ever written to disk.

use std::collections::BTreeMap;

/// Most bytes (names and values) of an environment a request may carry.
/// Far above a real one (Linux gives a program's arguments and environment
/// 2 MiB together, and a login shell has a few KiB), and well inside a
/// request line (`protocol::MAX_LINE_BYTES`) after JSON escaping.
pub const MAX_BYTES: usize = 256 * 1024;

/// This process's environment, for a request. Variables whose name or value
/// is not UTF-8 are left out: the protocol is JSON text, and such a value
/// would reach the pane changed.
pub fn of_this_process() -> Result<BTreeMap<String, String>, String> {
    let env: BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    check(&env)?;
    Ok(env)
}

/// Refuses an environment over [`MAX_BYTES`] or with an entry no process
/// can be given (see `validate::env_entry`).
pub fn check(env: &BTreeMap<String, String>) -> Result<(), String> {
    let bytes: usize = env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    if bytes > MAX_BYTES {
        return Err(format!(
            "the environment is {} KiB, more than ptyd passes to a pane ({} KiB); unset its \
             largest variables, or run ptyd under `env -u NAME`",
            bytes / 1024,
            MAX_BYTES / 1024
        ));
    }
    crate::validate::env(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_environment_over_the_limit_is_refused_with_its_size() {
        let mut env = BTreeMap::new();
        env.insert("BIG".to_string(), "x".repeat(MAX_BYTES));
        let e = check(&env).unwrap_err();
        assert!(e.contains("256 KiB"), "{e}");
        env.insert("BIG".to_string(), "x".repeat(MAX_BYTES - 10));
        check(&env).unwrap();
    }
}
