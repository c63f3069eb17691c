"""The job's requirements installed by the real `train` with real pip from a package index on loopback
(tests/harness/package_index.py): the file each toolkit's rule picks, and a warm pool's cache - the first
job of the pool keeps the wheels in SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY, the next installs from them
with the index unreachable, and a job without the cache cannot."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.harness.package_index import UNREACHABLE, PackageIndex, installed, make_wheel, pip_env
from tests.support import make_tree, run_train

PACKAGES = ["smtrain-probe-one", "smtrain-probe-two"]
PROGRAM = "import smtrain_probe_one\nprint('probe', smtrain_probe_one.VALUE)\n"


@pytest.fixture
def index(tmp_path: Path) -> Iterator[PackageIndex]:
    """The probes on an index; never left installed (a warm pool's next job is a new container)."""
    assert installed(sys.executable, PACKAGES) == [], "a probe package is installed already: the tests would pass falsely"
    wheels = tmp_path / "index"
    wheels.mkdir()
    make_wheel(wheels, "smtrain-probe-one", "1.0", "VALUE = 'one'\n")
    make_wheel(wheels, "smtrain-probe-two", "2.0", "VALUE = 'two'\n")
    try:
        with PackageIndex(wheels) as served:
            yield served
    finally:
        _uninstall()


def _uninstall() -> None:
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", *PACKAGES], capture_output=True, timeout=120)


def _job(tmp_path: Path, name: str, pip_index: str, **env: str) -> subprocess.CompletedProcess:
    tree = make_tree(tmp_path / name)
    tree.write_program("train.py", PROGRAM)
    (tree.code_dir / "requirements.txt").write_text("smtrain-probe-one==1.0\n")
    return run_train(tree, env={**tree.env(SM_SYSTEM_MONITOR="off"), **pip_env(pip_index, tmp_path / "home"), **env},
                     timeout=240)


def test_a_warm_pools_second_job_installs_from_the_cache_with_the_index_unreachable(tmp_path: Path,
                                                                                    index: PackageIndex) -> None:
    cache = tmp_path / "warmpoolcache"
    first = _job(tmp_path, "first", index.url, SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY=str(cache))
    assert first.returncode == 0 and b"probe one" in first.stdout, first.stderr.decode()[-3000:]
    assert [p.name for p in (cache / "smtrain" / "wheels").iterdir()] == ["smtrain_probe_one-1.0-py3-none-any.whl"]
    _uninstall()
    second = _job(tmp_path, "second", UNREACHABLE, SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY=str(cache))
    assert second.returncode == 0 and b"probe one" in second.stdout, second.stderr.decode()[-3000:]
    assert b"from the warm pool's cache" in second.stderr
    _uninstall()
    without = _job(tmp_path, "without", UNREACHABLE)
    assert without.returncode == 65, without.stderr.decode()[-3000:]
    assert "CodeSetupFailed: pip install -r" in (tmp_path / "without" / "output" / "failure").read_text()


def test_a_modeltrainer_job_installs_the_file_its_source_code_names_and_no_other(tmp_path: Path,
                                                                                  index: PackageIndex) -> None:
    """SDK v3: SourceCode(requirements="requirements-train.txt"); the requirements.txt beside it is not v3's."""
    tree = make_tree(tmp_path / "ml")
    tree.write_config("hyperparameters.json", {})
    code, drivers = tree.base / "input" / "data" / "code", tree.base / "input" / "data" / "sm_drivers"
    for folder in (code, drivers):
        folder.mkdir(parents=True)
    (code / "train.py").write_text(PROGRAM)
    (code / "requirements-train.txt").write_text("smtrain-probe-one\n")
    (code / "requirements.txt").write_text("smtrain-probe-two\n")
    (drivers / "sourcecode.json").write_text(json.dumps({"source_dir": "/src", "entry_script": "train.py",
                                                         "requirements": "requirements-train.txt"}))
    plan = json.loads(run_train(tree, "--dry-run", env=tree.env()).stdout)["requirements"]
    assert plan["file"] == str(code / "requirements-train.txt") and plan["rule"].startswith("SDK v3")
    done = run_train(tree, env={**tree.env(SM_SYSTEM_MONITOR="off"), **pip_env(index.url, tmp_path / "home")},
                     timeout=240)
    assert done.returncode == 0 and b"probe one" in done.stdout, done.stderr.decode()[-3000:]
    assert installed(sys.executable, PACKAGES) == ["smtrain-probe-one"]
