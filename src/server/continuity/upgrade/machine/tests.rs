//! Every edge of the upgrade machine, without a process: the happy path,
//! each rollback edge ([R0] refused, [R1] before the pause, [R2] after
//! it), the take-back in probation ([T]), duplicate and out-of-order
//! messages, and a deadline, a child exit and a stop in every step.

use super::*;

const CHILD: u32 = 4242;

fn probe_json(handoff: u32) -> Vec<u8> {
    format!(
        r#"{{"handoff_version": {handoff}, "server_version": "9.9.9", "snapshot_version": {}}}"#,
        crate::persist::snapshot::SNAPSHOT_VERSION
    )
    .into_bytes()
}

fn probing(restore: bool) -> Step {
    Step::Probing {
        output: Vec::new(),
        restore,
        binary: "/new/ptyd".into(),
    }
}

fn hello(pid: u32) -> Input {
    Input::Msg(Control::Hello {
        handoff_version: HANDOFF_VERSION,
        server_version: "9.9.9".into(),
        pid,
    })
}

fn transfer(batches: usize, next: usize, acked: usize) -> Transfer {
    Transfer {
        batches: (0..batches)
            .map(|i| vec![(FdName::Conn(i), 100 + i as RawFd)])
            .collect(),
        next,
        acked,
    }
}

fn starting() -> Step {
    Step::Starting {
        child: CHILD,
        handoff: HANDOFF_VERSION,
    }
}

fn precopying() -> Step {
    Step::Precopying(Precopied::default())
}

fn transferring() -> Step {
    Step::Transferring(transfer(10, 4, 1))
}

fn importing() -> Step {
    Step::Importing(transfer(3, 3, 1))
}

fn committing() -> Step {
    Step::Committing
}

fn probation() -> Step {
    Step::Probation { answered: false }
}

/// One instance of every step before the commit point, fresh each time.
fn pre_commit_steps() -> Vec<Step> {
    vec![
        probing(false),
        starting(),
        Step::Saving,
        precopying(),
        Step::Settling(Precopied::default()),
        transferring(),
        importing(),
        committing(),
    ]
}

/// Feeds `inputs` one by one, checking the step name after each.
fn walk(mut step: Step, edges: Vec<(Input, &str, Vec<Action>)>) -> Step {
    for (input, want_step, want_actions) in edges {
        let label = format!("{} + {}", step.name(), input.name());
        let (next, actions) = on(step, input);
        assert_eq!(next.name(), want_step, "{label}");
        assert_eq!(actions, want_actions, "{label}");
        step = next;
    }
    step
}

/// Asserts `input` in `step` rolls back, in that phase, for a reason
/// containing `why`.
fn assert_rolls_back(step: Step, input: Input, why: &str) {
    let phase = step.name();
    let label = format!("{phase} + {}", input.name());
    let (next, actions) = on(step, input);
    assert_eq!(next.name(), "done", "{label}");
    match actions.as_slice() {
        [Action::Rollback { reason, phase: p }] => {
            assert_eq!(*p, phase, "{label}");
            assert!(reason.contains(why), "{label}: {reason:?} lacks {why:?}");
        }
        other => panic!("{label}: expected one rollback, got {other:?}"),
    }
}

#[test]
fn with_nothing_changed_since_the_precopy_no_delta_waits_for_an_ack() {
    walk(
        precopying(),
        vec![
            (
                Input::Msg(Control::PrecopyAck),
                "settle",
                vec![
                    Action::FinishPhase("precopy"),
                    Action::SendDelta(Precopied::default()),
                ],
            ),
            (
                Input::DeltaSent {
                    precopied: Precopied::default(),
                    sent: false,
                },
                "transfer",
                vec![
                    Action::FinishPhase("settle"),
                    Action::Pause(Precopied::default()),
                ],
            ),
        ],
    );
    // A delta ack nobody asked for rolls back.
    assert_rolls_back(precopying(), Input::Msg(Control::DeltaAck), "unexpected");
}

#[test]
fn the_happy_path_walks_every_step_in_order() {
    let step = walk(
        probing(false),
        vec![
            (
                Input::ProbeOutput(probe_json(HANDOFF_VERSION)),
                "preflight",
                vec![],
            ),
            // The probe's own exit changes nothing; its output decides.
            (
                Input::ChildExited {
                    clean: true,
                    what: "exited with code 0".into(),
                },
                "preflight",
                vec![],
            ),
            (
                Input::ProbeEnded,
                "preflight",
                vec![
                    Action::FinishPhase("preflight"),
                    Action::SpawnNewServer {
                        version: "9.9.9".into(),
                        handoff: HANDOFF_VERSION,
                    },
                ],
            ),
            (
                Input::Spawned {
                    child: CHILD,
                    handoff: HANDOFF_VERSION,
                },
                "prepare",
                vec![],
            ),
            (
                hello(CHILD),
                "save",
                vec![
                    Action::CheckPeer,
                    Action::FinishPhase("prepare"),
                    Action::Fault("old-after-hello"),
                    Action::Save,
                ],
            ),
            (
                Input::SaveFinished,
                "save",
                vec![Action::FinishPhase("save"), Action::SendPrecopy],
            ),
            (Input::PrecopySent(Precopied::default()), "precopy", vec![]),
            // Progress from the new side moves nothing (the driver pushes
            // the deadline back).
            (Input::Msg(Control::Progress), "precopy", vec![]),
            (
                Input::Msg(Control::PrecopyAck),
                "settle",
                vec![
                    Action::FinishPhase("precopy"),
                    Action::SendDelta(Precopied::default()),
                ],
            ),
            // Panes changed since the pre-copy: held and sent again.
            (
                Input::DeltaSent {
                    precopied: Precopied::default(),
                    sent: true,
                },
                "settle",
                vec![],
            ),
            (Input::Msg(Control::Progress), "settle", vec![]),
            (
                Input::Msg(Control::DeltaAck),
                "transfer",
                vec![
                    Action::FinishPhase("settle"),
                    Action::Pause(Precopied::default()),
                ],
            ),
            // Batch 0 rode with the manifest; 1 and 2 go out at once.
            (
                Input::ManifestSent(transfer(3, 1, 0)),
                "transfer",
                vec![Action::SendBatches {
                    from: 1,
                    to: 3,
                    acked: 0,
                }],
            ),
            (Input::BatchesSent { next: 3 }, "import", vec![]),
            (Input::Msg(Control::BatchAck { seq: 0 }), "import", vec![]),
            (Input::Msg(Control::BatchAck { seq: 1 }), "import", vec![]),
            (
                Input::Msg(Control::BatchAck { seq: 2 }),
                "import",
                vec![Action::Fault("old-after-transfer")],
            ),
            (
                Input::Msg(Control::Imported),
                "commit",
                vec![Action::SendCommit],
            ),
            (
                Input::Msg(Control::Committed { blackout_us: 1700 }),
                "probation",
                vec![Action::Committed { blackout_us: 1700 }],
            ),
            (Input::Msg(Control::Answered), "probation", vec![]),
            (
                Input::Deadline { took_ms: 2000 },
                "done",
                vec![Action::HandOver(HandOver::ProbationOver)],
            ),
        ],
    );
    // Nothing moves a finished attempt.
    walk(step, vec![(Input::Stop, "done", vec![])]);
}

#[test]
fn a_transfer_in_one_message_goes_straight_to_importing() {
    walk(
        Step::Transferring(Transfer::default()),
        vec![
            (Input::ManifestSent(transfer(1, 1, 0)), "import", vec![]),
            (
                Input::Msg(Control::BatchAck { seq: 0 }),
                "import",
                vec![Action::Fault("old-after-transfer")],
            ),
            (
                Input::Msg(Control::Imported),
                "commit",
                vec![Action::SendCommit],
            ),
        ],
    );
}

#[test]
fn batches_go_out_at_most_a_window_ahead_of_the_acks() {
    walk(
        Step::Transferring(Transfer::default()),
        vec![
            (
                Input::ManifestSent(transfer(10, 1, 0)),
                "transfer",
                vec![Action::SendBatches {
                    from: 1,
                    to: BATCH_WINDOW,
                    acked: 0,
                }],
            ),
            // A full socket stopped the sending after batch 1.
            (Input::BatchesSent { next: 2 }, "transfer", vec![]),
            (
                Input::Msg(Control::BatchAck { seq: 0 }),
                "transfer",
                vec![Action::SendBatches {
                    from: 2,
                    to: 1 + BATCH_WINDOW,
                    acked: 1,
                }],
            ),
            (Input::BatchesSent { next: 5 }, "transfer", vec![]),
            (
                Input::Msg(Control::BatchAck { seq: 1 }),
                "transfer",
                vec![Action::SendBatches {
                    from: 5,
                    to: 6,
                    acked: 2,
                }],
            ),
        ],
    );
}

#[test]
fn r0_the_probe_refuses_with_nothing_touched() {
    let refused = |output: Vec<u8>, restore: bool, why: &str| {
        let (step, _) = on(probing(restore), Input::ProbeOutput(output));
        assert_rolls_back(step, Input::ProbeEnded, why);
    };
    refused(
        probe_json(HANDOFF_VERSION + 1),
        false,
        "speaks handoff version",
    );
    refused(
        b"not json".to_vec(),
        false,
        "did not answer `version --json`",
    );
    refused(Vec::new(), false, "did not answer `version --json`");
    refused(
        b"{\"snapshot_version\": 0}".to_vec(),
        true,
        "older than this server's",
    );
    // Output beyond the bound.
    let mut step = probing(false);
    for _ in 0..16 {
        step = on(step, Input::ProbeOutput(vec![b' '; 4096])).0;
    }
    assert_rolls_back(step, Input::ProbeOutput(vec![b' ']), "printed too much");
    // The restore mode restarts in place when the binary reads our snapshot.
    let (step, _) = on(probing(true), Input::ProbeOutput(probe_json(0)));
    let (step, actions) = on(step, Input::ProbeEnded);
    assert_eq!(step.name(), "done");
    assert_eq!(actions, vec![Action::RestartInPlace]);
}

/// Version skew: a newer build that still reads our handoff version says
/// so (`handoff_accepts`), and is handed over to live; its hello must then
/// name the version its probe did.
#[test]
fn a_newer_build_that_reads_our_version_is_accepted_live() {
    let newer = HANDOFF_VERSION + 1;
    let probe = format!(
        r#"{{"handoff_version": {newer}, "handoff_accepts": [{HANDOFF_VERSION}, {newer}], "server_version": "9.9.9"}}"#
    );
    let (step, _) = on(probing(false), Input::ProbeOutput(probe.into_bytes()));
    let (step, actions) = on(step, Input::ProbeEnded);
    assert_eq!(
        actions,
        vec![
            Action::FinishPhase("preflight"),
            Action::SpawnNewServer {
                version: "9.9.9".into(),
                handoff: newer,
            },
        ]
    );
    let (step, _) = on(
        step,
        Input::Spawned {
            child: CHILD,
            handoff: newer,
        },
    );
    let hello = Input::Msg(Control::Hello {
        handoff_version: newer,
        server_version: "9.9.9".into(),
        pid: CHILD,
    });
    let (step, _) = on(step, hello);
    assert_eq!(step.name(), "save");
    // One that no longer reads ours is refused, nothing touched.
    let probe = format!(
        r#"{{"handoff_version": {newer}, "handoff_accepts": [{newer}, {newer}], "server_version": "9.9.9"}}"#
    );
    let (step, _) = on(probing(false), Input::ProbeOutput(probe.into_bytes()));
    assert_rolls_back(step, Input::ProbeEnded, "--mode restore");
}

#[test]
fn r1_the_new_server_must_be_our_child_speaking_our_version() {
    assert_rolls_back(starting(), hello(CHILD + 1), "not the process we started");
    let other_version = Input::Msg(Control::Hello {
        handoff_version: HANDOFF_VERSION + 1,
        server_version: "x".into(),
        pid: CHILD,
    });
    assert_rolls_back(starting(), other_version, "speaks handoff version");
    // A failed action (here the peer's uid) rolls back in the step it left.
    assert_rolls_back(
        Step::Saving,
        Input::Failed("the handoff peer's uid is not ours".into()),
        "uid is not ours",
    );
}

#[test]
fn every_step_before_the_commit_rolls_back_on_a_deadline_an_exit_a_stop_or_a_lost_channel() {
    for step in pre_commit_steps() {
        assert_rolls_back(
            step,
            Input::Deadline { took_ms: 10_000 },
            "ms without progress (phase",
        );
    }
    for step in pre_commit_steps() {
        let exit = Input::ChildExited {
            clean: false,
            what: "was killed by SIGKILL".into(),
        };
        if matches!(step, Step::Probing { .. }) {
            // While probing the only child is the probe.
            assert_eq!(on(step, exit).0.name(), "preflight");
            continue;
        }
        let phase = step.name();
        assert_rolls_back(
            step,
            exit,
            &format!("was killed by SIGKILL in phase {phase}"),
        );
    }
    for step in pre_commit_steps() {
        assert_rolls_back(step, Input::Stop, "asked to stop");
    }
    for step in pre_commit_steps() {
        assert_rolls_back(step, Input::ChannelLost("EOF".into()), "channel failed");
    }
    for step in pre_commit_steps() {
        assert_rolls_back(step, Input::BadMessage("junk".into()), "bad message");
    }
    for step in pre_commit_steps() {
        let abort = Input::Msg(Control::Abort {
            reason: "disk full".into(),
        });
        assert_rolls_back(step, abort, "gave up: disk full");
    }
    for step in pre_commit_steps() {
        assert_rolls_back(step, Input::Failed("sending x".into()), "sending x");
    }
}

#[test]
fn r2_the_phase_of_a_rollback_after_the_pause_is_where_it_happened() {
    for (step, phase) in [
        (transferring(), "transfer"),
        (importing(), "import"),
        (committing(), "commit"),
    ] {
        let (next, actions) = on(step, Input::Deadline { took_ms: 1 });
        assert_eq!(next.name(), "done");
        assert!(
            matches!(&actions[..], [Action::Rollback { phase: p, .. }] if *p == phase),
            "{actions:?}"
        );
    }
}

#[test]
fn duplicate_and_out_of_order_messages_roll_back_before_the_commit() {
    // `imported` twice: the second arrives in Committing.
    assert_rolls_back(
        committing(),
        Input::Msg(Control::Imported),
        "unexpected Imported",
    );
    // `imported` before every batch was acked.
    assert_rolls_back(
        importing(),
        Input::Msg(Control::Imported),
        "unexpected Imported",
    );
    // `committed` before `commit` was sent.
    for step in [transferring(), importing()] {
        let committed = Input::Msg(Control::Committed { blackout_us: 1 });
        assert_rolls_back(step, committed, "unexpected Committed");
    }
    // A `batch_ack` for a batch never sent, out of order, or twice.
    let never_sent = Step::Transferring(transfer(10, 4, 4));
    assert_rolls_back(
        never_sent,
        Input::Msg(Control::BatchAck { seq: 4 }),
        "BatchAck",
    );
    assert_rolls_back(
        transferring(),
        Input::Msg(Control::BatchAck { seq: 2 }),
        "BatchAck",
    );
    assert_rolls_back(
        transferring(),
        Input::Msg(Control::BatchAck { seq: 0 }),
        "BatchAck",
    );
    assert_rolls_back(
        committing(),
        Input::Msg(Control::BatchAck { seq: 0 }),
        "BatchAck",
    );
    // `hello` twice, and a pre-copy ack before the pre-copy or twice.
    assert_rolls_back(Step::Saving, hello(CHILD), "unexpected Hello");
    assert_rolls_back(
        Step::Saving,
        Input::Msg(Control::PrecopyAck),
        "unexpected PrecopyAck",
    );
    assert_rolls_back(
        transferring(),
        Input::Msg(Control::PrecopyAck),
        "unexpected PrecopyAck",
    );
    // Messages only the old side sends.
    assert_rolls_back(starting(), Input::Msg(Control::Commit), "unexpected Commit");
    assert_rolls_back(
        importing(),
        Input::Msg(Control::Answered),
        "unexpected Answered",
    );
    // Action results in a step that did not ask for them are bugs: roll back.
    assert_rolls_back(committing(), Input::BatchesSent { next: 1 }, "internal");
    assert_rolls_back(
        Step::Transferring(transfer(10, 4, 1)),
        Input::BatchesSent { next: 3 },
        "internal",
    );
    assert_rolls_back(
        starting(),
        Input::PrecopySent(Precopied::default()),
        "internal",
    );
}

#[test]
fn a_save_finishing_matters_only_while_saving() {
    for step in pre_commit_steps().into_iter().chain([probation()]) {
        let name = step.name();
        let (next, actions) = on(step, Input::SaveFinished);
        if name == "save" {
            assert_eq!(
                actions,
                vec![Action::FinishPhase("save"), Action::SendPrecopy]
            );
        } else {
            assert!(actions.is_empty(), "{name}: {actions:?}");
        }
        assert_eq!(next.name(), name);
    }
}

#[test]
fn t_a_new_server_dying_in_probation_is_taken_back() {
    let died = || Input::ChildExited {
        clean: false,
        what: "was killed by SIGKILL".into(),
    };
    let (step, actions) = on(probation(), died());
    assert_eq!(step.name(), "done");
    assert!(
        matches!(&actions[..], [Action::TakeBack { reason, answer_caller: true }]
            if reason.contains("was killed by SIGKILL during probation")),
        "{actions:?}"
    );
    // It answered the caller before dying: we must not answer again.
    let (step, _) = on(probation(), Input::Msg(Control::Answered));
    let (_, actions) = on(step, died());
    assert!(
        matches!(
            &actions[..],
            [Action::TakeBack {
                answer_caller: false,
                ..
            }]
        ),
        "{actions:?}"
    );
}

#[test]
fn probation_ends_by_deadline_clean_exit_or_stop_and_ignores_the_rest() {
    for (input, why) in [
        (Input::Deadline { took_ms: 2000 }, HandOver::ProbationOver),
        (
            Input::ChildExited {
                clean: true,
                what: "exited with code 0".into(),
            },
            HandOver::NewServerStopped,
        ),
        (Input::Stop, HandOver::StopRequested),
    ] {
        let (step, actions) = on(probation(), input);
        assert_eq!(step.name(), "done");
        assert_eq!(actions, vec![Action::HandOver(why)]);
    }
    // Past the commit point nothing the new server says can roll back:
    // it serves, and only its death takes back.
    for input in [
        Input::Msg(Control::Committed { blackout_us: 1 }),
        Input::Msg(Control::Imported),
        Input::Msg(Control::Abort {
            reason: "late".into(),
        }),
        Input::BadMessage("junk".into()),
        Input::Failed("late".into()),
    ] {
        let label = input.name();
        let (step, actions) = on(probation(), input);
        assert_eq!(step.name(), "probation", "{label}");
        assert!(
            matches!(&actions[..], [Action::Log("upgrade_ignored", _)]),
            "{label}: {actions:?}"
        );
    }
    let (step, actions) = on(probation(), Input::ChannelLost("EOF".into()));
    assert_eq!(step.name(), "probation");
    assert_eq!(actions, vec![Action::DeregisterChannel]);
}

#[test]
fn a_finished_attempt_ignores_everything() {
    for input in [
        Input::Stop,
        Input::Deadline { took_ms: 1 },
        Input::Msg(Control::Committed { blackout_us: 1 }),
        Input::ChildExited {
            clean: false,
            what: "x".into(),
        },
    ] {
        let (step, actions) = on(Step::Done, input);
        assert_eq!(step.name(), "done");
        assert!(actions.is_empty());
    }
}
