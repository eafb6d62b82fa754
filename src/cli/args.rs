//! The one parser of every command line, driven by the table in `help/`:
//! a command's options, their short spellings, which take a value and what
//! its operands are all come from its entry there, so an option parses as
//! it is documented, completed and listed in the man page.
//!
//! lexopt splits the words (`-abc`, `-nNAME`, `--name=NAME`, `--`); this
//! module decides what each one is and keeps them in order, and a command
//! then reads typed values from the [`Parsed`] arguments. `-h`/`--help`
//! anywhere before a command's trailing ARGV prints its help.

use super::CliError;
use super::help::{self, Command, Operands, Opt};
use lexopt::prelude::*;
use std::ffi::OsString;

/// One option as given on the command line.
struct Given {
    opt: &'static Opt,
    /// Its place among the words after the command, for options whose
    /// meaning depends on what comes after them (`send --keys`).
    at: usize,
    /// Spelled `-x`, not `--long`.
    short: bool,
    value: Option<OsString>,
}

/// A command line as the table reads it.
pub struct Parsed {
    command: &'static Command,
    given: Vec<Given>,
    /// Positional words, with their places.
    operands: Vec<(usize, OsString)>,
    /// From the first operand on, for commands that run one (`-- ARGV...`).
    argv: Vec<String>,
}

/// What a parse found: the arguments, or a request for help (printed).
pub enum Outcome {
    Args(Parsed),
    Help,
}

/// Parses the words after `command` (a table entry) until they end.
pub fn parse(command: &'static Command, p: &mut lexopt::Parser) -> Result<Outcome, CliError> {
    let mut parsed = Parsed {
        command,
        given: Vec::new(),
        operands: Vec::new(),
        argv: Vec::new(),
    };
    let mut at = 0;
    while let Some(arg) = p.next()? {
        at += 1;
        let (opt, short) = match arg {
            Short('h') | Long("help") => {
                print!("{}", help::render_command(command));
                return Ok(Outcome::Help);
            }
            Short(c) => match find(command, |o| o.short == Some(c)) {
                Some(o) => (o, true),
                None => return Err(arg.unexpected().into()),
            },
            Long(l) => match find(command, |o| o.long == l) {
                Some(o) => (o, false),
                None => return Err(arg.unexpected().into()),
            },
            Value(v) => {
                parsed.operand(at, v, p)?;
                if !parsed.argv.is_empty() {
                    break;
                }
                continue;
            }
        };
        let value = match opt.value {
            Some(_) => Some(p.value()?),
            None => None,
        };
        parsed.given.push(Given {
            opt,
            at,
            short,
            value,
        });
    }
    Ok(Outcome::Args(parsed))
}

/// What stands before the command: `ptyd [-L NAME] COMMAND`.
pub struct Leading {
    /// Each option given (by its long name), with its value or nothing.
    pub given: Vec<(&'static str, OsString)>,
    pub command: Option<String>,
}

/// Parses the options before a command: stops at the command's name,
/// leaving the rest to the command.
pub fn parse_global(options: &'static [Opt], p: &mut lexopt::Parser) -> Result<Leading, CliError> {
    let mut given = Vec::new();
    while let Some(arg) = p.next()? {
        let opt = match arg {
            Short(c) => options.iter().find(|o| o.short == Some(c)),
            Long(l) => options.iter().find(|o| o.long == l),
            Value(v) => {
                let command = Some(v.string()?);
                return Ok(Leading { given, command });
            }
        };
        let Some(opt) = opt else {
            return Err(arg.unexpected().into());
        };
        let value = match opt.value {
            Some(_) => p.value()?,
            None => OsString::new(),
        };
        given.push((opt.long, value));
    }
    Ok(Leading {
        given,
        command: None,
    })
}

fn find(command: &'static Command, is: impl Fn(&Opt) -> bool) -> Option<&'static Opt> {
    command.options.iter().chain(command.hidden).find(|o| is(o))
}

impl Parsed {
    fn operand(&mut self, at: usize, v: OsString, p: &mut lexopt::Parser) -> Result<(), CliError> {
        match self.command.operands {
            Operands::Argv => {
                self.argv.push(v.string()?);
                self.argv
                    .extend(p.raw_args()?.map(|a| a.to_string_lossy().into_owned()));
            }
            Operands::Upto(n) if self.operands.len() >= n => {
                return Err(lexopt::Error::UnexpectedArgument(v).into());
            }
            Operands::Upto(_) | Operands::Any => self.operands.push((at, v)),
        }
        Ok(())
    }

    /// The table entry of `long`: reading an option the command does not
    /// have is a mistake in ptyd, not in the command line.
    fn known(&self, long: &str) -> &'static str {
        let opt = find(self.command, |o| o.long == long);
        debug_assert!(opt.is_some(), "ptyd {} has no --{long}", self.command.name);
        opt.map_or("", |o| o.long)
    }

    fn all<'a>(&'a self, long: &str) -> impl Iterator<Item = &'a Given> + 'a {
        let long = self.known(long);
        self.given.iter().filter(move |g| g.opt.long == long)
    }

    fn last(&self, long: &str) -> Option<&Given> {
        self.all(long).last()
    }

    /// Whether the flag (or option) `--long` was given.
    pub fn flag(&self, long: &str) -> bool {
        self.last(long).is_some()
    }

    /// Whether the last `--long` was spelled by its short name.
    pub fn spelled_short(&self, long: &str) -> bool {
        self.last(long).is_some_and(|g| g.short)
    }

    /// The value of the last `--long`, as given.
    pub fn os(&self, long: &str) -> Option<OsString> {
        self.last(long).and_then(|g| g.value.clone())
    }

    /// The value of the last `--long` (a later one overrides).
    pub fn value(&self, long: &str) -> Result<Option<String>, CliError> {
        self.os(long).map(text).transpose()
    }

    /// The value of the last `--long`, read by `read`.
    pub fn value_as<T>(
        &self,
        long: &str,
        read: impl FnOnce(&str) -> Result<T, CliError>,
    ) -> Result<Option<T>, CliError> {
        self.value(long)?.as_deref().map(read).transpose()
    }

    /// Every value of a repeatable `--long`, in order.
    pub fn values(&self, long: &str) -> Result<Vec<String>, CliError> {
        self.all(long)
            .filter_map(|g| g.value.clone())
            .map(text)
            .collect()
    }

    /// A duration option in milliseconds (`5s`, `2m`; bare milliseconds).
    pub fn millis(&self, long: &str) -> Result<Option<u64>, CliError> {
        let what = format!("--{}", self.known(long));
        self.value_as(long, |v| super::duration::parse_ms(v, &what))
    }

    /// `--client N`: a client number from `ptyd clients`.
    pub fn client(&self) -> Result<Option<usize>, CliError> {
        self.value_as("client", |v| {
            v.parse().map_err(|_| {
                CliError::usage(format!(
                    "--client takes a client number from `ptyd clients`, got {v:?}"
                ))
            })
        })
    }

    /// The operands, in order.
    pub fn operands(&self) -> Result<Vec<String>, CliError> {
        self.operands.iter().map(|(_, v)| text(v.clone())).collect()
    }

    /// The operands that come after the first `--long`, and those before.
    pub fn operands_split_at(&self, long: &str) -> Result<(Vec<String>, Vec<String>), CliError> {
        let from = self.all(long).next().map_or(usize::MAX, |g| g.at);
        let (mut before, mut after) = (Vec::new(), Vec::new());
        for (at, v) in &self.operands {
            let v = text(v.clone())?;
            if *at < from {
                before.push(v);
            } else {
                after.push(v);
            }
        }
        Ok((before, after))
    }

    /// The command line to run: the first operand and every word after it.
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// The pane (or tree node) named by `-t TARGET` or the positional
    /// TARGET, which are one argument: giving it twice is an error, named
    /// by the second.
    pub fn target(&self) -> Result<Option<String>, CliError> {
        let mut named: Vec<(usize, OsString)> = self
            .all("target")
            .filter_map(|g| Some((g.at, g.value.clone()?)))
            .chain(self.operands.iter().cloned())
            .collect();
        named.sort_by_key(|(at, _)| *at);
        let mut named = named.into_iter().map(|(_, v)| v);
        let first = named.next();
        if let Some(second) = named.next() {
            return Err(lexopt::Error::UnexpectedArgument(second).into());
        }
        first.map(text).transpose()
    }

    /// [`target`](Self::target), which the command needs.
    pub fn need_target(&self) -> Result<String, CliError> {
        self.target()?
            .ok_or_else(|| CliError::usage("missing TARGET (a pane id like p1, or a pane name)"))
    }

    /// Refuses the options not in `allowed`, for actions that take fewer
    /// than their command (`service uninstall`), as an unknown one is.
    pub fn only(&self, allowed: &[&str]) -> Result<(), CliError> {
        match self.given.iter().find(|g| !allowed.contains(&g.opt.long)) {
            Some(g) => Err(lexopt::Error::UnexpectedOption(spelling(g)).into()),
            None => Ok(()),
        }
    }

    /// Refuses operands beyond the first `n`, as the parser does.
    pub fn at_most(&self, n: usize) -> Result<(), CliError> {
        match self.operands.get(n) {
            Some((_, v)) => Err(lexopt::Error::UnexpectedArgument(v.clone()).into()),
            None => Ok(()),
        }
    }
}

fn spelling(g: &Given) -> String {
    match (g.short, g.opt.short) {
        (true, Some(c)) => format!("-{c}"),
        _ => format!("--{}", g.opt.long),
    }
}

fn text(v: OsString) -> Result<String, CliError> {
    Ok(v.string()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_words(command: &str, words: &[&str]) -> Result<Parsed, String> {
        let entry = help::command(command).unwrap();
        let mut p = lexopt::Parser::from_args(words.iter().copied());
        match parse(entry, &mut p) {
            Ok(Outcome::Args(a)) => Ok(a),
            Ok(Outcome::Help) => Err("help".into()),
            Err(e) => Err(e.message),
        }
    }

    #[test]
    fn options_values_and_operands_follow_the_table() {
        let a = parse_words("kill", &["-sKILL", "--grace=2s", "p1"]).unwrap();
        assert_eq!(a.value("signal").unwrap().as_deref(), Some("KILL"));
        assert_eq!(a.millis("grace").unwrap(), Some(2000));
        assert_eq!(a.need_target().unwrap(), "p1");
        assert!(!a.flag("json"));
        let a = parse_words("new", &["-d", "-e", "A=1", "-eB=2", "--", "sh", "-c", "x"]).unwrap();
        assert_eq!(a.values("env").unwrap(), ["A=1", "B=2"]);
        assert_eq!(a.argv(), ["sh", "-c", "x"]);
        // A command's own options after its program belong to the program.
        let a = parse_words("run", &["true", "--rm", "-h"]).unwrap();
        assert_eq!(a.argv(), ["true", "--rm", "-h"]);
        assert!(!a.flag("rm"));
    }

    #[test]
    fn mistakes_read_as_they_always_have() {
        let e = |c, w: &[&str]| parse_words(c, w).err().unwrap();
        assert_eq!(e("kill", &["--bogus"]), "invalid option '--bogus'");
        assert_eq!(e("kill", &["-x"]), "invalid option '-x'");
        assert_eq!(
            e("kill", &["--signal"]),
            "missing argument for option '--signal'"
        );
        assert_eq!(
            e("ls", &["--json=1"]),
            "unexpected argument for option '--json': \"1\""
        );
        assert_eq!(e("kill", &["p1", "p2"]), "unexpected argument \"p2\"");
        let twice = parse_words("kill", &["-t", "p1", "p2"]).unwrap();
        assert_eq!(
            twice.target().err().unwrap().message,
            "unexpected argument \"p2\""
        );
        assert_eq!(e("kill", &["-h"]), "help");
        assert_eq!(
            parse_words("kill", &[])
                .unwrap()
                .need_target()
                .err()
                .unwrap()
                .message,
            "missing TARGET (a pane id like p1, or a pane name)"
        );
    }

    #[test]
    fn operands_split_where_an_option_stands() {
        let a = parse_words("send", &["p1", "ls", "-l", "--keys", "Enter", "C-c"]);
        // `-l` is no option of send.
        assert!(a.is_err());
        let a = parse_words("send", &["p1", "echo", "hi", "-k", "Enter", "C-c"]).unwrap();
        let (before, after) = a.operands_split_at("keys").unwrap();
        assert_eq!(before, ["p1", "echo", "hi"]);
        assert_eq!(after, ["Enter", "C-c"]);
    }
}
