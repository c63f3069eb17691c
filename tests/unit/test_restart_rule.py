"""In-job restarts without processes: the setting (config), the plan's policy (which jobs can be
restarted in place, shown by --dry-run) and the rule that judges each failed attempt (run.attempts)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from smtrain.config.load import load_config
from smtrain.errors import ConfigError, FailureCause
from smtrain.plan.launch import dumps, plan_launch
from smtrain.run.outcome import JobOutcome
from smtrain.run.attempt import AttemptProgress
from smtrain.run.attempts import AttemptEnd, describe_attempts, why_not_restart
from smtrain.config.settings import SKIP_TEARDOWN
from smtrain.wire.progress_file import Counts, InitPhase
from tests.support import make_tree
from tests.harness.plans import FACTS

MPI = {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2"}
RAISED = JobOutcome.failed(1, "RuntimeError", "rank 3 fails at step 30 (rank 3 on host algo-2)")


def _plan(tmp_path: Path, hyperparameters: dict, hosts=("algo-1", "algo-2"), channels=None, current_host=None,
          **env: str):
    tree = make_tree(tmp_path, hosts=hosts, hyperparameters=hyperparameters, channels=channels,
                     **({"current_host": current_host} if current_host else {}))
    return plan_launch(load_config(tree.env(**env)), FACTS, "/venv/bin/python", token="t" * 32)


def test_the_setting_is_a_whole_number_the_variable_wins_and_a_bad_one_is_named(tmp_path: Path) -> None:
    assert _plan(tmp_path / "a", MPI).restarts.max_restarts == 0
    assert _plan(tmp_path / "b", {**MPI, "sagemaker_max_restarts": "2"}).restarts.max_restarts == 2
    assert _plan(tmp_path / "c", {**MPI, "sagemaker_max_restarts": "2"}, SMTRAIN_MAX_RESTARTS="3").restarts.max_restarts == 3
    for bad in ('"-1"', '"two"', "1.5", "true"):
        tree = make_tree(tmp_path / f"bad{len(bad)}{bad[0]}", hyperparameters={"sagemaker_max_restarts": bad})
        with pytest.raises(ConfigError, match=r"hyperparameters.json: sagemaker_max_restarts \(or SMTRAIN_MAX_RESTARTS\) "
                                              r"must be a whole number >= 0"):
            load_config(tree.env())


def test_the_plan_restarts_jobs_across_ranks_only_where_a_restart_can_resume_them(tmp_path: Path) -> None:
    shown = json.loads(dumps(_plan(tmp_path / "mpi", {**MPI, "sagemaker_max_restarts": "2"})))
    assert shown["restarts"] == {"max_restarts": 2, "asked": 2, "refused": None}
    mwms = _plan(tmp_path / "mwms", {"sagemaker_multi_worker_mirrored_strategy_enabled": "true",
                                     "sagemaker_max_restarts": "1"})
    assert mwms.restarts.max_restarts == 1
    # a program on its own, and channels train streams itself from files (local mode's Pipe emulation)
    alone = _plan(tmp_path / "alone", {"sagemaker_max_restarts": "1"}, hosts=("algo-1",))
    emulated = _plan(tmp_path / "emulated", {**MPI, "sagemaker_max_restarts": "1", "sagemaker_pipe_emulation": "on"},
                     channels={"train": {"TrainingInputMode": "File"}})
    # a shuffled channel dealt by every host's demultiplexer: the ranks hand each their consumed records
    shuffled = _plan(tmp_path / "shuffled", {**MPI, "sagemaker_max_restarts": "1", "sagemaker_pipe_emulation": "on"},
                     channels={"train": {"TrainingInputMode": "File", "ShuffleConfig": {"Seed": 1}}})
    assert (alone.restarts.max_restarts, emulated.restarts.max_restarts, shuffled.restarts.max_restarts) == (1, 1, 1)
    assert emulated.emulated == ("train",)
    refused = {
        "ps": _plan(tmp_path / "ps", {"sagemaker_parameter_server_enabled": "true", "sagemaker_max_restarts": "1"}),
    }
    assert {name: plan.restarts.max_restarts for name, plan in refused.items()} == dict.fromkeys(refused, 0)
    assert "parameter servers hold its state" in refused["ps"].restarts.refused
    # SageMaker's channel dealt to several ranks: its demultiplexers serve the restart (the next epoch as FIFO 0)
    dealt = _plan(tmp_path / "dealt", {**MPI, "sagemaker_max_restarts": "1"},
                  channels={"train": {"TrainingInputMode": "Pipe"}, "eval": {"TrainingInputMode": "Pipe"}})
    assert dealt.restarts.max_restarts == 1 and len(dealt.demux) == 2
    assert all(spec.restartable for spec in dealt.demux)
    assert not any(spec.restartable for spec in shuffled.demux)  # emulated: started again instead
    # ... and to the one reader a host has (one rank a host; a program on its own): relayed by a demultiplexer
    for name, plan in (("one-a-host", _plan(tmp_path / "one", {**MPI, "sagemaker_mpi_num_of_processes_per_host": "1",
                                                                 "sagemaker_max_restarts": "1"},
                                             channels={"train": {"TrainingInputMode": "Pipe"}})),
                       ("alone", _plan(tmp_path / "alone-pipe", {"sagemaker_max_restarts": "1"}, hosts=("algo-1",),
                                       channels={"train": {"TrainingInputMode": "Pipe"}}))):
        (spec,) = plan.demux
        assert plan.restarts.max_restarts == 1 and spec.restartable, name
        assert spec.ranks == 1 and plan.env_set["SM_PIPE_MODE_TRAIN"] == "demux", name
        assert spec.args[spec.args.index("--format"):][:3] == ("--format", "tfrecord", "--restartable"), name
    # AWS's per-rank channels: each member a local rank reads, through a relay of its own (algo-2: ranks 2, 3)
    per_rank = _plan(tmp_path / "per-rank", {**MPI, "sagemaker_max_restarts": "1"}, current_host="algo-2",
                     channels={f"train_{r}": {"TrainingInputMode": "Pipe"} for r in range(4)})
    assert per_rank.restarts.max_restarts == 1
    assert [spec.channel for spec in per_rank.demux] == ["train_2", "train_3"]
    assert all(spec.restartable and spec.ranks == 1 for spec in per_rank.demux)
    group = next(p for p in per_rank.pipes if p.channel == "train")
    assert group.for_rank(0, 2).endswith(".smtrain-pipes/train_2-0")  # where rank 2 reads its member
    # without restarts a single reader reads SageMaker's FIFO itself
    assert _plan(tmp_path / "plain", {"sagemaker_mpi_enabled": "false"}, hosts=("algo-1",),
                 channels={"train": {"TrainingInputMode": "Pipe"}}).demux == ()


def _attempt(outcome: JobOutcome = RAISED, progressed: bool = True, steps: int = 0) -> AttemptEnd:
    return AttemptEnd(outcome, progressed, steps, 12.5)


def test_a_transient_failure_after_progress_is_restarted_up_to_the_limit() -> None:
    assert why_not_restart([_attempt()], 2, None) is None
    killed = JobOutcome.failed(137, FailureCause.PROGRAM_KILLED, "died of SIGKILL")
    stalled = JobOutcome.of_cause(FailureCause.STALLED, "rank 1 on algo-1 stopped")
    assert why_not_restart([_attempt(killed)], 1, None) is None and why_not_restart([_attempt(stalled)], 1, None) is None
    assert why_not_restart([_attempt(steps=10), _attempt(steps=20)], 2, None) is None
    assert why_not_restart([_attempt(steps=10), _attempt(steps=20), _attempt(steps=30)], 2, None) == (
        "the limit of 2 restart(s) is reached")


def test_what_a_restart_cannot_help_is_never_restarted() -> None:
    assert why_not_restart([_attempt()], 2, "SIGTERM") == "train was asked to stop (SIGTERM)"
    for kind in (FailureCause.OUT_OF_MEMORY, FailureCause.HOST_LOST, FailureCause.CONFIG_ERROR, FailureCause.STARTUP_FAILED):
        outcome = JobOutcome(137 if kind.status is None else kind.exit_code, kind, "x")
        assert why_not_restart([_attempt(outcome)], 2, None) is not None, kind
    assert "out of memory" in why_not_restart([_attempt(JobOutcome(137, FailureCause.OUT_OF_MEMORY, "x"))], 2, None)
    # the causes' own declarations say which (smtrain.errors): the program's own failures and a stall are restarted
    restarted = {c for c in FailureCause if c.not_restarted is None}
    assert restarted == {FailureCause.PROGRAM_ERROR, FailureCause.PROGRAM_KILLED, FailureCause.STALLED}
    assert why_not_restart([_attempt(progressed=False)], 2, None) == "the program failed before any progress"
    assert why_not_restart([_attempt(steps=30), _attempt(steps=30)], 5, None) == (
        "it failed at the same step again (step 30)")
    assert why_not_restart([_attempt(), _attempt()], 5, None) == "it failed the same way again"
    # a repeat is named as one even where the restarted program failed before its progress reached train
    # (resumed at the failing step, it fails right after Horovod's init)
    assert why_not_restart([_attempt(), _attempt(progressed=False)], 5, None) == "it failed the same way again"


def test_the_final_reason_names_every_attempt() -> None:
    text = describe_attempts([_attempt(), _attempt()], "it failed the same way again")
    assert text == ("attempt 2 of the job; attempt 1 failed after 12.5 s: RuntimeError: rank 3 fails at step 30 "
                    "(rank 3 on host algo-2); not restarted: it failed the same way again")
    assert describe_attempts([_attempt()], "a host was lost") == "not restarted: a host was lost"


@pytest.mark.parametrize("counts,progressed", [
    (Counts(0, 0, InitPhase.NOT_REACHED), False), (Counts(0, 0, InitPhase.WAITING), False),
    (Counts(3, 0, InitPhase.NOT_REACHED), True),  # a step
    (Counts(0, 2, InitPhase.WAITING), True),  # a sign of life alone (smtrain.progress.alive, a checkpoint)
    (Counts(0, 0, InitPhase.DONE), True),  # Horovod's init returned, nothing else yet
])
def test_progress_is_a_step_a_sign_of_life_or_horovod_s_init_returned(counts: Counts, progressed: bool) -> None:
    """Each on its own counts (dropping any one from run/attempt.py fails its row)."""
    progress = AttemptProgress()
    progress.observe("algo-1", 0, Counts(0, 0, InitPhase.WAITING))
    progress.observe("algo-1", 1, counts)
    assert progress.progressed is progressed and progress.steps == counts.steps


def test_where_restarts_are_asked_for_a_failed_program_skips_its_teardown_unless_the_user_says_otherwise(
        tmp_path: Path) -> None:
    mpi = _plan(tmp_path / "mpi", {**MPI, "sagemaker_max_restarts": "1"})
    assert mpi.env_set[SKIP_TEARDOWN.variable] == "1" and f"-x {SKIP_TEARDOWN.variable}" in " ".join(mpi.argv)  # every rank
    assert _plan(tmp_path / "alone", {"sagemaker_max_restarts": "1"}, hosts=("algo-1",)).env_set[SKIP_TEARDOWN.variable] == "1"
    assert SKIP_TEARDOWN.variable not in _plan(tmp_path / "none", MPI).env_set
    own = _plan(tmp_path / "own", {**MPI, "sagemaker_max_restarts": "1"}, **{SKIP_TEARDOWN.variable: "0"})
    assert SKIP_TEARDOWN.variable not in own.env_set and f"-x {SKIP_TEARDOWN.variable}" in " ".join(own.argv)  # theirs
