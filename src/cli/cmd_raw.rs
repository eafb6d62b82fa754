//! The commands that speak the API as it is: `api` (one request) and
//! `events` (the event stream).

use super::args::Parsed;
use super::commands::{connect, print_json};
use super::{CliError, Global};
use crate::protocol::methods::{self, Request};
use serde_json::json;

pub fn events(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let since = a.value_as("since", |v| {
        v.parse::<u64>()
            .map_err(|_| CliError::usage("--since takes a sequence number"))
    })?;
    let mut client = connect(g)?;
    client.request(&Request::EventsSubscribe(methods::Subscribe { since }))?;
    // Each event object as the server sends it inside `{"event": ...}`,
    // one per line (docs/protocol.md, "ptyd events").
    loop {
        let msg = client.read_message()?;
        if let Some(event) = msg.get("event") {
            println!("{event}");
        }
    }
}

pub fn api(g: &Global, a: &Parsed) -> Result<i32, CliError> {
    let (method, params) = match a.operands()?.as_slice() {
        [m] => (m.clone(), json!({})),
        [m, raw] => (
            m.clone(),
            serde_json::from_str(raw)
                .map_err(|e| CliError::usage(format!("params are not valid JSON: {e}")))?,
        ),
        _ => return Err(CliError::usage("usage: ptyd api METHOD [JSON]")),
    };
    let result = connect(g)?.call(&method, params)?;
    print_json(&result);
    Ok(0)
}
