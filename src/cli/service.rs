//! `ptyd service install|uninstall`: the systemd user units
//! (`service::install` writes their text).

use super::args::Parsed;
use super::{CliError, Global};
use crate::protocol::methods::{NoParams, Request};
use crate::protocol::replies::Status;
use crate::service::install::{self, Units};
use std::path::PathBuf;

pub fn service(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let Some(action) = a.operands()?.into_iter().next() else {
        return Err(CliError::usage("service needs install or uninstall"));
    };
    if cfg!(windows) {
        return Err(fail(
            "`ptyd service` writes systemd user units, which Windows does not have; \
             client commands start a server in the background there"
                .into(),
        ));
    }
    match action.as_str() {
        "install" => install_cmd(g, a),
        "uninstall" => {
            a.only(&[])?;
            uninstall_cmd(g)
        }
        other => Err(CliError::usage(format!(
            "unknown service action {other:?}: use install or uninstall"
        ))),
    }
}

fn fail(message: String) -> CliError {
    CliError::failure(message)
}

fn install_cmd(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    // `--user`: user units are the only kind; accepted for scripts.
    let print = a.flag("print");
    let binary = a.os("binary").map(PathBuf::from);
    let binary = match binary {
        Some(b) if b.is_absolute() => b,
        Some(b) => {
            return Err(CliError::usage(format!(
                "--binary {} must be an absolute path (systemd starts it from anywhere)",
                b.display()
            )));
        }
        None => install::running_binary().map_err(fail)?,
    };
    let namespace = &g.paths.namespace;
    let units = install::units(&binary, namespace);
    let dir = install::user_unit_dir().map_err(fail)?;
    let files = unit_files(&dir, &units);
    if print {
        for (path, text) in &files {
            println!("### {} {}", file_name(path), path.display());
            print!("{text}");
        }
        return Ok(0);
    }
    for (path, text) in &files {
        install::write_unit(path, text).map_err(|e| fail(e.to_string()))?;
        println!("wrote {}", path.display());
    }
    install::systemctl(&["daemon-reload"]).map_err(|e| {
        fail(format!(
            "{e}\nThe units are written; run `systemctl --user daemon-reload` once your user manager runs."
        ))
    })?;
    println!("ran: systemctl --user daemon-reload");
    let service = units.service_name.as_str();
    let socket = units.socket_name.as_str();
    let reload = service.trim_end_matches(".service");
    if !a.flag("enable") {
        println!(
            "To start it now and at every login: ptyd{} service install --enable\n\
             (or: systemctl --user enable --now {socket} {service})",
            namespace_flag(namespace)
        );
    } else if let Some(pid) = serving_pid(g) {
        // Starting the unit now would only fail on the namespace lock (and
        // retry under Restart=on-failure): a server runs outside systemd.
        install::systemctl(&["enable", socket, service]).map_err(fail)?;
        println!("ran: systemctl --user enable {socket} {service}");
        println!(
            "A ptyd server (pid {pid}) already serves namespace {namespace:?} outside systemd, so \
             the units are enabled but not started. `ptyd{ns} stop` ends it and every pane in it; \
             then `systemctl --user start {service}`.",
            ns = namespace_flag(namespace)
        );
    } else {
        install::systemctl(&["enable", "--now", socket, service]).map_err(fail)?;
        println!("ran: systemctl --user enable --now {socket} {service}");
    }
    println!(
        "Live upgrade: systemctl --user reload {reload} (never restart: it ends every pane).\n\
         To keep ptyd running after you log out and start it at boot: loginctl enable-linger $USER"
    );
    Ok(0)
}

fn uninstall_cmd(g: &Global) -> Result<i32, CliError> {
    let units = install::units(&PathBuf::from(install::PACKAGED_BINARY), &g.paths.namespace);
    let dir = install::user_unit_dir().map_err(fail)?;
    let (service, socket) = (units.service_name.as_str(), units.socket_name.as_str());
    // Disabled, not stopped: stopping the service would end every pane.
    match install::systemctl(&["disable", socket, service]) {
        Ok(()) => println!("ran: systemctl --user disable {socket} {service}"),
        Err(e) => eprintln!("ptyd: {e}"),
    }
    let mut removed = 0;
    for (path, _) in unit_files(&dir, &units) {
        match std::fs::remove_file(&path) {
            Ok(()) => {
                println!("removed {}", path.display());
                removed += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(fail(format!("removing {}: {e}", path.display()))),
        }
    }
    if removed == 0 {
        println!("no ptyd units in {}", dir.display());
    }
    install::systemctl(&["daemon-reload"]).map_err(fail)?;
    println!("ran: systemctl --user daemon-reload");
    println!(
        "A running service keeps running (with its panes) until stopped: \
         `ptyd{} stop`, then `systemctl --user stop {socket}`.",
        namespace_flag(&g.paths.namespace)
    );
    Ok(0)
}

fn unit_files(dir: &std::path::Path, units: &Units) -> [(PathBuf, String); 2] {
    [
        (dir.join(&units.service_name), units.service.clone()),
        (dir.join(&units.socket_name), units.socket.clone()),
    ]
}

fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn namespace_flag(namespace: &str) -> String {
    if namespace == crate::paths::DEFAULT_NAMESPACE {
        String::new()
    } else {
        format!(" -L {namespace}")
    }
}

/// The pid of the server serving the namespace now, if one does.
fn serving_pid(g: &Global) -> Option<u64> {
    let mut client = crate::client::Client::connect(&g.paths, false).ok()?;
    let status: Status = client
        .request_as(&Request::ServerStatus(NoParams {}))
        .ok()?;
    Some(u64::from(status.pid))
}
