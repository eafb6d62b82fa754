//! Paste buffers: set-buffer, show-buffer, list-buffers, delete-buffer,
//! save-buffer, load-buffer, paste-buffer, and what `capture-pane`
//! without `-p` keeps. Kept by the front in the namespace's runtime
//! directory, newest first, with tmux's automatic names (`buffer0`, ...)
//! and its limit of 50 automatic buffers (`buffer-limit`).

use super::args::Args;
use super::{CmdResult, Ctx, Failure};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::PathBuf;

const AUTOMATIC_LIMIT: usize = 50;
/// Largest buffer file read or buffer kept: a bound on what one command
/// or a planted file can make the front hold.
const MAX_BYTES: u64 = 16 << 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Buffer {
    name: String,
    automatic: bool,
    data: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Buffers {
    next: u64,
    /// Newest first.
    list: Vec<Buffer>,
}

fn path(ctx: &Ctx) -> PathBuf {
    ctx.paths.runtime_dir.join("tmux-buffers.json")
}

fn load(ctx: &Ctx) -> Buffers {
    crate::persist::files::read_trusted(&path(ctx), MAX_BYTES)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn save(ctx: &Ctx, buffers: &Buffers) -> CmdResult {
    let bytes = serde_json::to_vec(buffers).map_err(|e| Failure::new(e.to_string()))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(Failure::new(format!(
            "paste buffers over {} MiB in all; delete some (delete-buffer)",
            MAX_BYTES >> 20
        )));
    }
    crate::persist::atomic::write_atomic(&path(ctx), &bytes, false)
        .map_err(|e| Failure::new(format!("saving paste buffers: {e}")))
}

/// Adds or replaces a buffer (`name` None: a new automatic one).
pub fn store(ctx: &Ctx, name: Option<&str>, data: String) -> CmdResult {
    let mut buffers = load(ctx);
    let buffer = match name {
        Some(n) => {
            buffers.list.retain(|b| b.name != n);
            Buffer {
                name: n.to_string(),
                automatic: false,
                data,
            }
        }
        None => {
            let n = buffers.next;
            buffers.next += 1;
            Buffer {
                name: format!("buffer{n}"),
                automatic: true,
                data,
            }
        }
    };
    buffers.list.insert(0, buffer);
    let mut automatic = 0;
    buffers.list.retain(|b| {
        automatic += usize::from(b.automatic);
        !b.automatic || automatic <= AUTOMATIC_LIMIT
    });
    save(ctx, &buffers)
}

fn find<'a>(buffers: &'a Buffers, name: Option<&str>) -> Result<&'a Buffer, Failure> {
    match name {
        Some(n) => buffers
            .list
            .iter()
            .find(|b| b.name == n)
            .ok_or_else(|| Failure::new(format!("no buffer {n}"))),
        None => buffers
            .list
            .first()
            .ok_or_else(|| Failure::new("no buffers")),
    }
}

pub fn set(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let name = a.value('b');
    if let Some(new_name) = a.value('n') {
        let mut buffers = load(ctx);
        let old = find(&buffers, name)?.name.clone();
        buffers.list.retain(|b| b.name != new_name);
        if let Some(b) = buffers.list.iter_mut().find(|b| b.name == old) {
            b.name = new_name.to_string();
            b.automatic = false;
        }
        return save(ctx, &buffers);
    }
    let Some(data) = a.positional.first() else {
        return Err(Failure::new("no data specified"));
    };
    let data = if a.has('a') {
        let buffers = load(ctx);
        let old = find(&buffers, name)
            .map(|b| b.data.clone())
            .unwrap_or_default();
        format!("{old}{data}")
    } else {
        data.clone()
    };
    let existing = name.map(str::to_string).or_else(|| {
        a.has('a')
            .then(|| load(ctx).list.first().map(|b| b.name.clone()))
            .flatten()
    });
    store(ctx, existing.as_deref(), data)
}

pub fn show(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let buffers = load(ctx);
    let buffer = find(&buffers, a.value('b'))?;
    use std::io::Write;
    let mut out = std::io::stdout();
    let _ = out.write_all(buffer.data.as_bytes());
    if !buffer.data.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    Ok(())
}

pub fn list(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let buffers = load(ctx);
    let format = a
        .value('F')
        .unwrap_or("#{buffer_name}: #{buffer_size} bytes: \"#{buffer_sample}\"");
    for b in &buffers.list {
        let sample: String = b.data.chars().take(50).collect();
        let vars = [
            ("buffer_name", b.name.clone()),
            ("buffer_size", b.data.len().to_string()),
            ("buffer_sample", sample.replace('\n', "\\n")),
            ("buffer_created", "0".to_string()),
        ];
        let at = super::view::At::NOWHERE;
        if let Some(filter) = a.value('f') {
            let keep = super::vars::expand_with(ctx, at, filter, &vars)?;
            if keep.is_empty() || keep == "0" {
                continue;
            }
        }
        let line = super::vars::expand_with(ctx, at, format, &vars)?;
        out!("{line}");
    }
    Ok(())
}

pub fn delete(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let mut buffers = load(ctx);
    let name = find(&buffers, a.value('b'))?.name.clone();
    buffers.list.retain(|b| b.name != name);
    save(ctx, &buffers)
}

pub fn save_to_file(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let Some(file) = a.positional.first() else {
        return Err(Failure::new("no path specified"));
    };
    let buffers = load(ctx);
    let buffer = find(&buffers, a.value('b'))?;
    if file == "-" {
        out_raw!("{}", buffer.data);
        return Ok(());
    }
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.create(true).write(true);
    if a.has('a') {
        options.append(true);
    } else {
        options.truncate(true);
    }
    options
        .open(file)
        .and_then(|mut f| f.write_all(buffer.data.as_bytes()))
        .map_err(|e| Failure::new(format!("{file}: {e}")))
}

pub fn load_from_file(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let Some(file) = a.positional.first() else {
        return Err(Failure::new("no path specified"));
    };
    let bytes = if file == "-" {
        use std::io::Read;
        let mut data = Vec::new();
        std::io::stdin()
            .take(MAX_BYTES)
            .read_to_end(&mut data)
            .map_err(|e| Failure::new(format!("-: {e}")))?;
        data
    } else {
        let meta = std::fs::metadata(file).map_err(|e| Failure::new(format!("{file}: {e}")))?;
        if meta.len() > MAX_BYTES {
            return Err(Failure::new(format!(
                "{file}: too large for a paste buffer"
            )));
        }
        std::fs::read(file).map_err(|e| Failure::new(format!("{file}: {e}")))?
    };
    let data = String::from_utf8(bytes)
        .map_err(|_| Failure::new(format!("{file}: not UTF-8 text, which ptyd's panes take")))?;
    store(ctx, a.value('b'), data)
}

pub fn paste(ctx: &mut Ctx, a: &Args) -> CmdResult {
    let buffers = load(ctx);
    let buffer = find(&buffers, a.value('b'))?.clone();
    let at = ctx.find_pane(a.value('t'))?;
    let id = ctx.view()?.pane(at).id();
    // tmux turns line feeds into carriage returns unless -r, or -s SEP.
    let data = if a.has('r') {
        buffer.data.clone()
    } else {
        buffer.data.replace('\n', a.value('s').unwrap_or("\r"))
    };
    ctx.call(
        "pane.input",
        json!({"target": id, "data": data, "paste": a.has('p')}),
    )?;
    if a.has('d') {
        let mut buffers = load(ctx);
        buffers.list.retain(|b| b.name != buffer.name);
        save(ctx, &buffers)?;
    }
    Ok(())
}
