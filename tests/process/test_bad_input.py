"""Bad input: a message naming the file, field or value and what was expected; the failure file;
a documented exit code; and nothing lost (the model and checkpoint folders are untouched)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from tests.support import Tree, make_tree, run_train

CONFIG_ERROR, NOT_EXECUTABLE, NOT_FOUND = 78, 126, 127


def _hosts(value: object) -> Callable[[Tree], None]:
    return lambda t: t.write_config("resourceconfig.json", {"current_host": "algo-1", "hosts": value})


CASES: dict[str, tuple[Callable[[Tree], None], int, list[str]]] = {
    "malformed-resourceconfig": (lambda t: t.write_config("resourceconfig.json", '{"current_host": "algo-1",'),
                                 CONFIG_ERROR, ["resourceconfig.json", "malformed JSON", "line 1"]),
    "malformed-hyperparameters": (lambda t: t.write_config("hyperparameters.json", "{'lr': 1}"),
                                  CONFIG_ERROR, ["hyperparameters.json", "malformed JSON"]),
    "malformed-inputdataconfig": (lambda t: t.write_config("inputdataconfig.json", "[1, 2"),
                                  CONFIG_ERROR, ["inputdataconfig.json", "malformed JSON"]),
    "hyperparameters-not-object": (lambda t: t.write_config("hyperparameters.json", "[1, 2]"),
                                   CONFIG_ERROR, ["hyperparameters.json", "expected a JSON object", "a list"]),
    "missing-current-host": (lambda t: t.write_config("resourceconfig.json", {"hosts": ["algo-1"]}),
                             CONFIG_ERROR, ["resourceconfig.json", "missing field 'current_host'"]),
    "mistyped-current-host": (lambda t: t.write_config("resourceconfig.json", {"current_host": 1, "hosts": ["algo-1"]}),
                              CONFIG_ERROR, ["resourceconfig.json", "'current_host' must be a string", "a number"]),
    "current-host-not-in-hosts": (lambda t: t.write_config("resourceconfig.json",
                                                           {"current_host": "algo-9", "hosts": ["algo-1", "algo-2"]}),
                                  CONFIG_ERROR, ["resourceconfig.json", "'algo-9' is not in hosts", "algo-2"]),
    "empty-hosts": (_hosts([]), CONFIG_ERROR, ["resourceconfig.json", "'hosts'", "non-empty list"]),
    "hosts-not-a-list": (_hosts("algo-1"), CONFIG_ERROR, ["resourceconfig.json", "'hosts'", "non-empty list"]),
    "duplicated-hosts": (_hosts(["algo-1", "algo-2", "algo-1"]), CONFIG_ERROR,
                         ["resourceconfig.json", "duplicated host names ['algo-1']"]),
    "pytorch-ddp": (lambda t: t.write_config("hyperparameters.json", {
        "sagemaker_program": '"train.py"', "sagemaker_pytorch_ddp_enabled": "true"}),
        CONFIG_ERROR, ["hyperparameters.json", "'sagemaker_pytorch_ddp_enabled'", "PyTorch DDP", "sagemaker_mpi_enabled"]),
    "smdistributed-dataparallel": (lambda t: t.write_config("hyperparameters.json", {
        "sagemaker_program": '"train.py"', "sagemaker_distributed_dataparallel_enabled": "true"}),
        CONFIG_ERROR, ["'sagemaker_distributed_dataparallel_enabled'", "data-parallel library"]),
    "model-parallel": (lambda t: t.write_config("hyperparameters.json", {
        "sagemaker_program": '"train.py"', "sagemaker_mpi_enabled": "true", "mp_parameters": '{"partitions": 2}'}),
        CONFIG_ERROR, ["'mp_parameters'", "model-parallel library", "MultiWorkerMirroredStrategy"]),
    "pytorch-xla": (lambda t: t.write_config("hyperparameters.json", {
        "sagemaker_program": '"train.py"', "sagemaker_pytorch_xla_multi_worker_enabled": "true"}),
        CONFIG_ERROR, ["'sagemaker_pytorch_xla_multi_worker_enabled'", "PyTorch/XLA"]),
    "torch-distributed": (lambda t: t.write_config("hyperparameters.json", {
        "sagemaker_program": '"train.py"', "sagemaker_torch_distributed_enabled": "true"}),
        CONFIG_ERROR, ["'sagemaker_torch_distributed_enabled'", "torch.distributed"]),
    "two-distributions": (lambda t: (_hosts(["algo-1", "algo-2"])(t), t.write_config("hyperparameters.json", {
        "sagemaker_program": '"train.py"', "sagemaker_mpi_enabled": True,
        "sagemaker_multi_worker_mirrored_strategy_enabled": "true"})),
        CONFIG_ERROR, ["'sagemaker_mpi_enabled' and 'sagemaker_multi_worker_mirrored_strategy_enabled'", "one of them"]),
    "no-program": (lambda t: t.write_config("hyperparameters.json", {"lr": "0.1"}),
                   CONFIG_ERROR, ["sagemaker_program", "SAGEMAKER_PROGRAM"]),
    "absolute-program": (lambda t: t.write_config("hyperparameters.json", {"sagemaker_program": '"/etc/passwd"'}),
                         CONFIG_ERROR, ["sagemaker_program", "'/etc/passwd'", "a leading '/'", "a path inside the code folder"]),
    "program-outside-the-code": (lambda t: t.write_config("hyperparameters.json", {"sagemaker_program": '"../../x.py"'}),
                                 CONFIG_ERROR, ["sagemaker_program", "'../../x.py'", "'..' segment"]),
    "missing-program": (lambda t: t.write_config("hyperparameters.json", {"sagemaker_program": '"nope.py"'}),
                        NOT_FOUND, ["nope.py", "does not exist", "train.py"]),
    "non-executable-program": (lambda t: (t.write_config("hyperparameters.json", {"sagemaker_program": '"run"'}),
                                          t.write_program("run", "#!/bin/sh\n", mode=0o644)),
                               NOT_EXECUTABLE, ["run is not executable", "chmod +x"]),
    "unknown-channel-mode": (lambda t: t.write_config("inputdataconfig.json", {"train": {"TrainingInputMode": "Stream"}}),
                             CONFIG_ERROR, ["inputdataconfig.json", "channel 'train'", "'TrainingInputMode'", "'Stream'",
                                            "File, Pipe, FastFile"]),
    "bad-channel-name": (lambda t: t.write_config("inputdataconfig.json", {"tr ain": {}}),
                         CONFIG_ERROR, ["inputdataconfig.json", "channel 'tr ain'"]),
    "bad-mpi-processes": (lambda t: t.write_config("hyperparameters.json", {"sagemaker_program": '"train.py"',
                                                                            "sagemaker_mpi_num_of_processes_per_host": '"two"'}),
                          CONFIG_ERROR, ["hyperparameters.json", "sagemaker_mpi_num_of_processes_per_host",
                                         "positive integer", '"two"']),
    "bad-grace-period": (lambda t: t.write_config("hyperparameters.json", {"sagemaker_program": '"train.py"',
                                                                           "sagemaker_grace_period_seconds": "-5"}),
                         CONFIG_ERROR, ["sagemaker_grace_period_seconds", ">= 0", "-5"]),
}


def _valuables(tree: Tree) -> dict[str, bytes]:
    files = {}
    for folder in ("model", "checkpoints"):
        path = tree.base / folder / "keep.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(folder.encode() * 1000)
        files[str(path)] = path.read_bytes()
    return files


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_reported_clearly(tmp_path: Path, case: str) -> None:
    spoil, code, words = CASES[case]
    tree = make_tree(tmp_path)
    tree.write_program("train.py", "print('must not run')\n")
    valuables = _valuables(tree)
    spoil(tree)

    done = run_train(tree)
    stderr = done.stderr.decode()
    assert done.returncode == code, stderr
    for word in words:
        assert word in stderr, f"{word!r} not in: {stderr}"
    assert b"must not run" not in done.stdout
    failure = tree.failure.read_text()
    assert failure.split(":")[0] in {"ConfigError", "ProgramNotFound", "ProgramNotExecutable"}
    assert words[0] in failure and len(failure.encode()) <= 1024
    assert all(Path(p).read_bytes() == content for p, content in valuables.items())
    assert sorted(p.name for p in (tree.base / "model").iterdir()) == ["keep.bin"]


def test_dry_run_reports_but_writes_nothing(tmp_path: Path) -> None:
    tree = make_tree(tmp_path)
    tree.write_config("resourceconfig.json", {"current_host": "algo-3", "hosts": ["algo-1"]})
    done = run_train(tree, "--dry-run")
    assert done.returncode == CONFIG_ERROR
    assert b"algo-3" in done.stderr
    assert not (tree.base / "output").exists()


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path: Path) -> None:
    tree = make_tree(tmp_path, hosts=("algo-1", "algo-2"), hyperparameters={"epochs": "3"})
    tree.write_program("train.py", "open('ran', 'w')\n")
    done = run_train(tree, "--dry-run")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["role"] == "single" and plan["host"] == "algo-1"
    assert str(tree.base / "model") in plan["folders"]
    assert plan["argv"][1:] == [str(tree.code_dir / "train.py"), "--epochs", "3"]
    assert plan["env"]["SM_HOSTS"] == '["algo-1","algo-2"]' and plan["env"]["SM_HP_EPOCHS"] == "3"
    assert not (tree.code_dir / "ran").exists() and not (tree.base / "output").exists()
    assert not (tree.base / "model").exists()


def test_a_bad_value_of_a_setting_read_outside_train_ends_the_job_before_the_program_starts(tmp_path: Path) -> None:
    """SMTRAIN_S3_READAHEAD_BYTES is read by the s3:// plugin inside the program, which fell back to its default
    on `abc`: `train` checks it first (every row: tests/unit/test_declarations.py)."""
    tree = make_tree(tmp_path)
    tree.write_program("train.py", "print('must not run')\n")
    done = run_train(tree, env=tree.env(SMTRAIN_S3_READAHEAD_BYTES="abc"))
    assert done.returncode == CONFIG_ERROR, done.stderr
    assert b"SMTRAIN_S3_READAHEAD_BYTES must be a whole number of bytes >= 65536, got 'abc'" in done.stderr
    assert b"must not run" not in done.stdout
    assert tree.failure.read_text().startswith("ConfigError: environment variable SMTRAIN_S3_READAHEAD_BYTES")
