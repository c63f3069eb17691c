"""A setting, a failure cause and a control message are each one declaration: shown here with a hypothetical
setting and a hypothetical cause, added by one declaration each and seen everywhere the product uses the
declared ones - loaded, checked, in the dry-run and `--help-settings`, in the README's tables, in the failure
file and the exit status, in the restart rule - with nothing else edited."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from smtrain.config.hostfacts import HostFacts
from smtrain.config.load import load_config
from smtrain.config.setting_types import Seconds
from smtrain.config.settings import SETTINGS, Setting, help_text, markdown_table
from smtrain.errors import CauseKind, ConfigError, FailureCause
from smtrain.errors import markdown_table as exit_table
from smtrain.plan.launch import dumps, plan_launch
from smtrain.plan.mpirun_command import NetworkFacts
from smtrain.run.outcome import FileState, JobOutcome, render
from smtrain.run.attempts import AttemptEnd, why_not_restart
from tests.support import make_tree

FACTS = HostFacts(num_cpus=2, num_gpus=0, num_neurons=0, smddprun_installed=False, smddpmprun_installed=False,
                  network=NetworkFacts(("eth0", "lo"), "eth0", efa_present=False))
EVERY = Setting("checkpoint_every_s", "sagemaker_checkpoint_every_seconds", "SM_CHECKPOINT_EVERY_SECONDS",
                Seconds(1.0), 60.0, "how often the program is asked to checkpoint")
TABLE = (*SETTINGS, EVERY)


def test_a_setting_declared_once_is_loaded_checked_in_the_dry_run_the_help_and_the_readme_table(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "a", hyperparameters={"sagemaker_checkpoint_every_seconds": "30"})
    config = load_config(tree.env(), TABLE)
    assert config.settings[EVERY] == 30.0 and load_config(tree.env(SM_CHECKPOINT_EVERY_SECONDS="5"), TABLE).settings[EVERY] == 5
    assert load_config(make_tree(tmp_path / "b").env(), TABLE).settings[EVERY] == 60.0  # its default
    assert "checkpoint_every_s" not in load_config(tree.env()).settings  # the product's own table lacks it
    with pytest.raises(ConfigError, match=r"hyperparameters.json: sagemaker_checkpoint_every_seconds \(or "
                                          r"SM_CHECKPOINT_EVERY_SECONDS\) must be a number of seconds >= 1, got 0.5"):
        load_config(make_tree(tmp_path / "c", hyperparameters={"sagemaker_checkpoint_every_seconds": "0.5"}).env(), TABLE)
    shown = json.loads(dumps(plan_launch(config, FACTS, "/venv/bin/python")))
    assert shown["settings"]["checkpoint_every_s"] == 30.0 and shown["settings"]["grace_period_s"] == 110.0
    assert ("| `sagemaker_checkpoint_every_seconds` / `SM_CHECKPOINT_EVERY_SECONDS` | seconds | 60 | every job | how "
            "often the program is asked to checkpoint |") in markdown_table(TABLE).splitlines()
    assert "sagemaker_checkpoint_every_seconds / SM_CHECKPOINT_EVERY_SECONDS\n    how often" in help_text(TABLE)


# FailureCause's members and one more, declared as FailureCause declares its own
WithDiskFull = CauseKind("WithDiskFull", {**{c.name: c.value for c in FailureCause},
                                          "DISK_FULL": ("DiskFull", 75, "the checkpoint volume is full",
                                                        "the disk is full: a restart would fill it again")})


def test_a_failure_cause_declared_once_names_the_failure_sets_the_status_rules_restarts_and_is_in_the_table(
        tmp_path: Path) -> None:
    disk_full = WithDiskFull.DISK_FULL
    outcome = JobOutcome.of_cause(disk_full, "no space left on /opt/ml/checkpoints")
    failure = tmp_path / "failure"
    assert render(outcome, failure, FileState.of(failure)) == 75
    assert failure.read_text().startswith("DiskFull: no space left on /opt/ml/checkpoints")
    attempt = AttemptEnd(outcome, progressed=True, steps=40, seconds=12.0)
    assert why_not_restart([attempt], 3, None) == "the disk is full: a restart would fill it again"
    row = "| 75 | `DiskFull` | no: the disk is full: a restart would fill it again | the checkpoint volume is full |"
    assert row in exit_table(WithDiskFull).splitlines() and row not in exit_table()
    assert len(exit_table(WithDiskFull).splitlines()) == len(exit_table().splitlines()) + 1
