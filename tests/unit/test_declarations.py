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


@pytest.mark.parametrize("variable,value,expected", [
    ("SM_SYSTEM_MONITOR", "maybe", "on or off"),  # any word but an off word used to mean on
    ("SMTRAIN_S3_READAHEAD_BYTES", "abc", "a whole number of bytes >= 65536"),  # the s3:// plugin fell back silently
    ("SMTRAIN_S3_PART_BYTES", "1048576", "from 5242880"),  # the plugin raised it to 5 MiB silently
    ("SMTRAIN_S3_UPLOADS_IN_FLIGHT", "0", "1-1024"),
    ("SMTRAIN_S3_FILESYSTEM", "OFF", "on or off"),  # the plugin honours "off" alone
    ("SMTRAIN_NATIVE_PIPES", "2", "0 or 1"),
    ("SM_SKIP_TEARDOWN_ON_FAILURE", "yes", "0 or 1"),
    ("SMTRAIN_INTERMEDIATE_RETRY_S", "1,x", "comma-separated"),
    ("SMTRAIN_MODELTRAINER_DRIVERS", "SDK", "train or sdk"),
])
def test_every_typed_setting_is_checked_when_train_starts_whoever_reads_it(tmp_path: Path, variable: str, value: str,
                                                                        expected: str) -> None:
    """A row read where it acts (the s3:// plugin, the start-up hook, the syncer, the shell hook) is checked with
    the rest when `train` loads its config: a bad value is a ConfigError naming the variable, what is expected and
    what was given, before anything starts; its documented spellings pass."""
    tree = make_tree(tmp_path)
    with pytest.raises(ConfigError, match=rf"{variable}\)? must be .*{expected}.*, got '{value}'"):
        load_config(tree.env(**{variable: value}))
    good = {"SM_SYSTEM_MONITOR": "OFF", "SMTRAIN_S3_READAHEAD_BYTES": "65536", "SMTRAIN_S3_PART_BYTES": "5242880",
            "SMTRAIN_S3_UPLOADS_IN_FLIGHT": "16", "SMTRAIN_S3_FILESYSTEM": "off", "SMTRAIN_NATIVE_PIPES": "0",
            "SM_SKIP_TEARDOWN_ON_FAILURE": "0", "SMTRAIN_INTERMEDIATE_RETRY_S": "0.5,2", "SMTRAIN_MODELTRAINER_DRIVERS": "sdk"}
    load_config(tree.env(**{variable: good[variable]}))
    assert load_config(tree.env(SM_SYSTEM_MONITOR="No")).settings["system_monitor"] is False
