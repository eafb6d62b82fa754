//! The table of tmux commands the front knows: name, alias, flag template
//! (tmux's letters, see `args.rs`), usage line, and the function that runs
//! it. A command is found by its name, its alias or a unique prefix of its
//! name, as tmux finds it. Commands tmux has and the front does not run
//! are listed too, so they are refused by name with a reason rather than
//! called unknown.

use super::args::Args;
use super::{
    CmdResult, Ctx, Failure, cmd_buffers, cmd_client, cmd_env, cmd_hooks, cmd_keys, cmd_layout,
    cmd_misc, cmd_modes, cmd_pane, cmd_session, cmd_wait, cmd_window,
};

type Run = fn(&mut Ctx, &Args) -> CmdResult;

pub struct Command {
    pub name: &'static str,
    pub alias: &'static str,
    pub template: &'static str,
    pub usage: &'static str,
    /// `None`: tmux has it, the front does not run it (docs/tmux.md says why).
    pub run: Option<Run>,
}

macro_rules! cmd {
    ($name:literal, $alias:literal, $template:literal, $usage:literal, $run:expr) => {
        Command {
            name: $name,
            alias: $alias,
            template: $template,
            usage: $usage,
            run: $run,
        }
    };
}

pub const COMMANDS: &[Command] = &[
    cmd!(
        "attach-session",
        "attach",
        "c:dEf:rt:x",
        "[-dErx] [-c working-directory] [-f flags] [-t target-session]",
        Some(cmd_session::attach)
    ),
    cmd!(
        "capture-pane",
        "capturep",
        "ab:CeE:JNpPqS:Tt:",
        "[-aCeJNpPqT] [-b buffer-name] [-E end-line] [-S start-line] [-t target-pane]",
        Some(cmd_pane::capture)
    ),
    cmd!(
        "delete-buffer",
        "deleteb",
        "b:",
        "[-b buffer-name]",
        Some(cmd_buffers::delete)
    ),
    cmd!(
        "if-shell",
        "if",
        "bFt:",
        "[-bF] [-t target-pane] shell-command command [command]",
        Some(cmd_misc::if_shell)
    ),
    cmd!(
        "list-buffers",
        "lsb",
        "F:f:",
        "[-F format] [-f filter]",
        Some(cmd_buffers::list)
    ),
    cmd!(
        "load-buffer",
        "loadb",
        "b:t:w",
        "[-b buffer-name] path",
        Some(cmd_buffers::load_from_file)
    ),
    cmd!(
        "paste-buffer",
        "pasteb",
        "db:prs:t:",
        "[-dpr] [-s separator] [-b buffer-name] [-t target-pane]",
        Some(cmd_buffers::paste)
    ),
    cmd!(
        "run-shell",
        "run",
        "bd:Ct:",
        "[-bC] [-d delay] [-t target-pane] [shell-command]",
        Some(cmd_misc::run_shell)
    ),
    cmd!(
        "save-buffer",
        "saveb",
        "ab:",
        "[-a] [-b buffer-name] path",
        Some(cmd_buffers::save_to_file)
    ),
    cmd!(
        "set-buffer",
        "setb",
        "ab:t:n:w",
        "[-aw] [-b buffer-name] [-n new-buffer-name] data",
        Some(cmd_buffers::set)
    ),
    cmd!(
        "set-hook",
        "",
        "agpRst:uw",
        "[-agpRuw] [-t target-pane] hook [command]",
        Some(cmd_hooks::set)
    ),
    cmd!(
        "show-buffer",
        "showb",
        "b:",
        "[-b buffer-name]",
        Some(cmd_buffers::show)
    ),
    cmd!(
        "show-hooks",
        "",
        "gpst:w",
        "[-gpw] [-t target-pane] [hook]",
        Some(cmd_hooks::show)
    ),
    cmd!(
        "display-message",
        "display",
        "aCc:d:lINpt:F:v",
        "[-aCIlNpv] [-c target-client] [-d delay] [-F format] [-t target-pane] [message]",
        Some(cmd_misc::display)
    ),
    cmd!(
        "has-session",
        "has",
        "t:",
        "[-t target-session]",
        Some(cmd_session::has)
    ),
    cmd!(
        "kill-pane",
        "killp",
        "at:",
        "[-a] [-t target-pane]",
        Some(cmd_pane::kill)
    ),
    cmd!("kill-server", "", "", "", Some(cmd_session::kill_server)),
    cmd!(
        "kill-session",
        "",
        "aCt:",
        "[-aC] [-t target-session]",
        Some(cmd_session::kill)
    ),
    cmd!(
        "kill-window",
        "killw",
        "at:",
        "[-a] [-t target-window]",
        Some(cmd_window::kill)
    ),
    cmd!(
        "list-clients",
        "lsc",
        "F:f:t:",
        "[-F format] [-f filter] [-t target-session]",
        Some(cmd_client::list)
    ),
    cmd!(
        "list-commands",
        "lscm",
        "F:",
        "[-F format] [command]",
        Some(cmd_misc::list_commands)
    ),
    cmd!(
        "list-panes",
        "lsp",
        "asF:f:t:",
        "[-as] [-F format] [-f filter] [-t target-window]",
        Some(cmd_pane::list)
    ),
    cmd!(
        "list-sessions",
        "ls",
        "F:f:",
        "[-F format] [-f filter]",
        Some(cmd_session::list)
    ),
    cmd!(
        "list-windows",
        "lsw",
        "aF:f:t:",
        "[-a] [-F format] [-f filter] [-t target-session]",
        Some(cmd_window::list)
    ),
    cmd!(
        "new-session",
        "new",
        "Ac:dDe:EF:f:n:Ps:t:x:Xy:",
        "[-AdDEPX] [-c start-directory] [-e environment] [-F format] [-f flags] [-n window-name] [-s session-name] [-t target-session] [-x width] [-y height] [shell-command]",
        Some(cmd_session::new)
    ),
    cmd!(
        "new-window",
        "neww",
        "abc:de:F:kn:PSt:",
        "[-abdkPS] [-c start-directory] [-e environment] [-F format] [-n window-name] [-t target-window] [shell-command]",
        Some(cmd_window::new)
    ),
    cmd!(
        "rename-session",
        "rename",
        "t:",
        "[-t target-session] new-name",
        Some(cmd_session::rename)
    ),
    cmd!(
        "rename-window",
        "renamew",
        "t:",
        "[-t target-window] new-name",
        Some(cmd_window::rename)
    ),
    cmd!(
        "resize-pane",
        "resizep",
        "DLMRTt:Ux:y:Z",
        "[-DLMRTUZ] [-x width] [-y height] [-t target-pane] [adjustment]",
        Some(cmd_pane::resize)
    ),
    cmd!(
        "resize-window",
        "resizew",
        "aADLRt:Ux:y:",
        "[-aADLRU] [-x width] [-y height] [-t target-window] [adjustment]",
        Some(cmd_window::resize)
    ),
    cmd!(
        "respawn-pane",
        "respawnp",
        "c:e:kt:",
        "[-k] [-c start-directory] [-e environment] [-t target-pane] [shell-command]",
        Some(cmd_pane::respawn)
    ),
    cmd!(
        "select-pane",
        "selectp",
        "DdegLlMmP:RT:t:UZ",
        "[-DdeLlMmRUZ] [-T title] [-t target-pane]",
        Some(cmd_pane::select)
    ),
    cmd!(
        "select-window",
        "selectw",
        "lnpTt:",
        "[-lnpT] [-t target-window]",
        Some(cmd_window::select)
    ),
    cmd!(
        "send-keys",
        "send",
        "c:FHKlMN:Rt:X",
        "[-FHKlMRX] [-c target-client] [-N repeat-count] [-t target-pane] key ...",
        Some(cmd_pane::send_keys)
    ),
    cmd!(
        "set-option",
        "set",
        "aFgopqst:uUw",
        "[-aFgopqsuUw] [-t target-pane] option [value]",
        Some(cmd_misc::set_option)
    ),
    cmd!(
        "set-window-option",
        "setw",
        "aFgoqt:u",
        "[-aFgoqu] [-t target-window] option [value]",
        Some(cmd_misc::set_window_option)
    ),
    cmd!(
        "show-options",
        "show",
        "AgHpqst:vw",
        "[-AgHpqsvw] [-t target-pane] [option]",
        Some(cmd_misc::show_options)
    ),
    cmd!(
        "show-window-options",
        "showw",
        "gvt:",
        "[-gv] [-t target-window] [option]",
        Some(cmd_misc::show_window_options)
    ),
    cmd!(
        "split-window",
        "splitw",
        "bc:de:fF:hIl:p:Pt:vZ",
        "[-bdefhIPvZ] [-c start-directory] [-e environment] [-F format] [-l size] [-t target-pane] [shell-command]",
        Some(cmd_pane::split)
    ),
    cmd!(
        "start-server",
        "start",
        "",
        "",
        Some(cmd_misc::start_server)
    ),
    cmd!(
        "switch-client",
        "switchc",
        "c:EFlnO:pt:rT:Z",
        "[-ElnprZ] [-c target-client] [-t target-session] [-T key-table]",
        Some(cmd_session::switch_client)
    ),
    // Layouts: ptyd's own layout operations (`cmd_layout`).
    cmd!(
        "break-pane",
        "breakp",
        "abdPF:n:s:t:",
        "[-dP] [-F format] [-n window-name] [-s src-pane]",
        Some(cmd_layout::break_pane)
    ),
    cmd!(
        "next-layout",
        "nextl",
        "t:",
        "[-t target-window]",
        Some(cmd_layout::next_layout)
    ),
    cmd!(
        "previous-layout",
        "prevl",
        "t:",
        "[-t target-window]",
        Some(cmd_layout::previous_layout)
    ),
    cmd!(
        "select-layout",
        "selectl",
        "Enopt:",
        "[-np] [-t target-pane] [layout-name]",
        Some(cmd_layout::select_layout)
    ),
    cmd!(
        "rotate-window",
        "rotatew",
        "Dt:UZ",
        "[-DUZ] [-t target-window]",
        Some(cmd_layout::rotate_window)
    ),
    cmd!(
        "swap-pane",
        "swapp",
        "dDs:t:UZ",
        "[-dDU] [-s src-pane] [-t dst-pane]",
        Some(cmd_layout::swap_pane)
    ),
    cmd!(
        "detach-client",
        "detach",
        "aE:s:t:P",
        "[-aP] [-E shell-command] [-s target-session] [-t target-client]",
        Some(cmd_client::detach_client)
    ),
    cmd!(
        "refresh-client",
        "refresh",
        "A:B:cC:Df:F:lLRSt:U",
        "[-cDlLRSU] [-A pane:state] [-B name:what:format] [-C XxY] [-f flags] [-t target-client] [adjustment]",
        Some(cmd_client::refresh)
    ),
    cmd!(
        "suspend-client",
        "suspendc",
        "t:",
        "[-t target-client]",
        Some(cmd_client::client_noop)
    ),
    cmd!(
        "lock-client",
        "lockc",
        "t:",
        "[-t target-client]",
        Some(cmd_client::client_noop)
    ),
    cmd!(
        "lock-session",
        "locks",
        "t:",
        "[-t target-session]",
        Some(cmd_client::lock_noop)
    ),
    cmd!("lock-server", "lock", "", "", Some(cmd_client::lock_noop)),
    cmd!(
        "wait-for",
        "wait",
        "LSU",
        "[-L|-S|-U] channel",
        Some(cmd_wait::wait_for)
    ),
    cmd!(
        "set-environment",
        "setenv",
        "Fhgrt:u",
        "[-Fhgru] [-t target-session] name [value]",
        Some(cmd_env::set)
    ),
    cmd!(
        "show-environment",
        "showenv",
        "hgst:",
        "[-hgs] [-t target-session] [name]",
        Some(cmd_env::show)
    ),
    cmd!(
        "display-popup",
        "popup",
        "Bb:Cc:d:e:Eh:s:S:t:T:w:x:y:",
        "[-BCE] [-b border-lines] [-c target-client] [-d start-directory] [-e environment] [-h height] [-s style] [-S border-style] [-t target-pane] [-T title] [-w width] [-x position] [-y position] [shell-command]",
        Some(cmd_client::display_popup)
    ),
    cmd!(
        "display-panes",
        "displayp",
        "bd:Nt:",
        "[-bN] [-d duration] [-t target-client] [template]",
        Some(cmd_client::client_noop)
    ),
    cmd!(
        "show-messages",
        "showmsgs",
        "JTt:",
        "[-JT] [-t target-client]",
        Some(cmd_client::client_noop)
    ),
    // Modes a tmux client draws over a pane; the front draws none
    // (`cmd_modes`).
    cmd!(
        "copy-mode",
        "",
        "eHMs:t:uq",
        "[-eHMuq] [-s src-pane] [-t target-pane]",
        Some(cmd_modes::mode)
    ),
    cmd!(
        "clock-mode",
        "",
        "t:",
        "[-t target-pane]",
        Some(cmd_modes::mode)
    ),
    cmd!(
        "choose-buffer",
        "",
        "F:f:K:NO:rt:Z",
        "[-NrZ] [-F format] [-f filter] [-K key-format] [-O sort-order] [-t target-pane] [template]",
        Some(cmd_modes::mode)
    ),
    cmd!(
        "choose-client",
        "",
        "F:f:K:NO:rt:Z",
        "[-NrZ] [-F format] [-f filter] [-K key-format] [-O sort-order] [-t target-pane] [template]",
        Some(cmd_modes::mode)
    ),
    cmd!(
        "choose-tree",
        "",
        "F:f:GK:NO:rst:wZ",
        "[-GNrswZ] [-F format] [-f filter] [-K key-format] [-O sort-order] [-t target-pane] [template]",
        Some(cmd_modes::mode)
    ),
    cmd!(
        "customize-mode",
        "",
        "F:f:Nt:Z",
        "[-NZ] [-F format] [-f filter] [-t target-pane]",
        Some(cmd_modes::mode)
    ),
    cmd!(
        "find-window",
        "findw",
        "CiNrt:TZ",
        "[-CiNrTZ] [-t target-pane] match-string",
        Some(cmd_modes::find_window)
    ),
    cmd!(
        "show-prompt-history",
        "showphist",
        "T:",
        "[-T type]",
        Some(cmd_modes::show_prompt_history)
    ),
    cmd!(
        "clear-prompt-history",
        "clearphist",
        "T:",
        "[-T type]",
        Some(cmd_modes::clear_prompt_history)
    ),
    cmd!(
        "bind-key",
        "bind",
        "nrN:T:",
        "[-nr] [-T key-table] [-N note] key [command [argument ...]]",
        Some(cmd_keys::bind)
    ),
    cmd!(
        "unbind-key",
        "unbind",
        "anqT:",
        "[-anq] [-T key-table] key",
        Some(cmd_keys::unbind)
    ),
    cmd!(
        "list-keys",
        "lsk",
        "1aNP:T:",
        "[-1aN] [-P prefix-string] [-T key-table] [key]",
        Some(cmd_keys::list)
    ),
    cmd!(
        "send-prefix",
        "",
        "2t:",
        "[-2] [-t target-pane]",
        Some(cmd_modes::send_prefix)
    ),
    cmd!(
        "source-file",
        "source",
        "Fnqvt:",
        "[-Fnqv] [-t target-pane] path ...",
        Some(cmd_modes::source_file)
    ),
    cmd!(
        "server-access",
        "",
        "adlrw",
        "[-adlrw] [-t target-pane] [user]",
        Some(cmd_modes::server_access)
    ),
    cmd!(
        "last-window",
        "last",
        "t:",
        "[-t target-session]",
        Some(cmd_window::last)
    ),
    cmd!(
        "next-window",
        "next",
        "at:",
        "[-a] [-t target-session]",
        Some(cmd_window::next)
    ),
    cmd!(
        "previous-window",
        "prev",
        "at:",
        "[-a] [-t target-session]",
        Some(cmd_window::previous)
    ),
    cmd!(
        "last-pane",
        "lastp",
        "det:Z",
        "[-deZ] [-t target-window]",
        Some(cmd_pane::last)
    ),
    // tmux has these; the front refuses them by name (docs/tmux.md).
    cmd!("clear-history", "clearhist", "Ht:", "", None),
    cmd!("join-pane", "joinp", "bdfhvp:l:s:t:", "", None),
    cmd!("link-window", "linkw", "abdks:t:", "", None),
    cmd!("move-window", "movew", "abdkrs:t:", "", None),
    cmd!("pipe-pane", "pipep", "IOot:", "", None),
    cmd!("swap-window", "swapw", "ds:t:", "", None),
];

/// Finds a command as tmux does: exact name or alias, else a unique prefix.
pub fn find(name: &str) -> Result<&'static Command, Failure> {
    if let Some(c) = COMMANDS.iter().find(|c| c.name == name || c.alias == name) {
        return Ok(c);
    }
    let hits: Vec<&Command> = COMMANDS
        .iter()
        .filter(|c| c.name.starts_with(name))
        .collect();
    match hits.as_slice() {
        [one] => Ok(one),
        [] => Err(Failure::new(format!("unknown command: {name}"))),
        many => Err(Failure::new(format!(
            "ambiguous command: {name}, could be: {}",
            many.iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
        ))),
    }
}

pub fn run(ctx: &mut Ctx, name: &str, words: &[String]) -> CmdResult {
    let command = find(name)?;
    let usage = || format!("usage: {} {}", command.name, command.usage);
    let args = Args::parse(command.template, words)
        .map_err(|e| Failure::new(format!("command {}: {e}\n{}", command.name, usage())))?;
    match command.run {
        Some(run) => run(ctx, &args),
        None => Err(Failure::new(format!(
            "{}: not supported by ptyd's tmux front (docs/tmux.md lists what is)",
            command.name
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_found_by_name_alias_or_unique_prefix() {
        assert_eq!(find("new").unwrap().name, "new-session");
        assert_eq!(find("lsp").unwrap().name, "list-panes");
        assert_eq!(find("capture-p").unwrap().name, "capture-pane");
        assert_eq!(find("splitw").unwrap().name, "split-window");
        let message = |name: &str| find(name).err().map(|e| e.message).unwrap_or_default();
        assert_eq!(message("nosuch"), "unknown command: nosuch");
        assert!(message("list-").starts_with("ambiguous command: list-"));
    }

    #[test]
    fn every_template_is_well_formed_and_names_are_unique() {
        for (i, c) in COMMANDS.iter().enumerate() {
            for other in &COMMANDS[i + 1..] {
                assert_ne!(c.name, other.name);
                assert!(c.alias.is_empty() || c.alias != other.alias, "{}", c.alias);
            }
            let letters: Vec<char> = c.template.chars().filter(|&ch| ch != ':').collect();
            let mut sorted = letters.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(letters.len(), sorted.len(), "{}: a letter twice", c.name);
        }
    }
}
