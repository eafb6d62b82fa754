//! Resume rules: how a pane whose program is a known agent CLI comes back
//! after a reboot when nobody set its `resume` command. Built-in rules cover
//! well-known agents; the user's rules come from the config file
//! (`config.rs`: `{"resume_rules": [{"program": "myagent", "resume":
//! "myagent --continue"}]}`).
//!
//! A rule matches on the program's file name (`argv[0]`, or the first word
//! of a shell string). User rules win over built-ins; a pane's own `resume`
//! wins over both.

use crate::model::CommandSpec;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Agents whose CLIs can pick up their last conversation in the same
/// directory, which is where the pane is restored.
const BUILT_IN: &[(&str, &str)] = &[
    ("claude", "claude --continue"),
    ("codex", "codex resume --last"),
];

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub program: String,
    pub resume: String,
}

#[derive(Debug, Clone, Default)]
pub struct ResumeRules {
    user: Vec<Rule>,
}

impl ResumeRules {
    /// The user's rules (from `config.rs`), in front of the built-ins.
    pub fn new(user: Vec<Rule>) -> ResumeRules {
        ResumeRules { user }
    }

    /// The user's rules, for `server.status` and `ptyd config reload`.
    pub fn user_rules(&self) -> &[Rule] {
        &self.user
    }

    /// The resume command for a pane running `command`, if a rule knows it.
    pub fn resume_for(&self, command: &CommandSpec) -> Option<String> {
        let program = match command {
            CommandSpec::Argv(argv) => argv.first()?.clone(),
            CommandSpec::Shell(s) => s.split_whitespace().next()?.to_string(),
            CommandSpec::LoginShell => return None,
        };
        let name = Path::new(&program).file_name()?.to_str()?.to_string();
        self.user
            .iter()
            .find(|r| r.program == name)
            .map(|r| r.resume.clone())
            .or_else(|| {
                BUILT_IN
                    .iter()
                    .find(|(p, _)| *p == name)
                    .map(|(_, r)| r.to_string())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_rules_win_and_built_ins_match_by_file_name() {
        let rules = ResumeRules {
            user: vec![Rule {
                program: "claude".into(),
                resume: "mine".into(),
            }],
        };
        let argv = |a: &[&str]| CommandSpec::Argv(a.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            rules
                .resume_for(&argv(&["/usr/bin/claude", "-p"]))
                .as_deref(),
            Some("mine")
        );
        assert_eq!(
            rules.resume_for(&argv(&["codex"])).as_deref(),
            Some("codex resume --last")
        );
        assert_eq!(
            rules
                .resume_for(&CommandSpec::Shell("codex --model x".into()))
                .as_deref(),
            Some("codex resume --last")
        );
        assert_eq!(rules.resume_for(&argv(&["vim"])), None);
        assert_eq!(rules.resume_for(&CommandSpec::LoginShell), None);
    }
}
