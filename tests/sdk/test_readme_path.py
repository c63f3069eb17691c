"""A new user's path through the README, followed as written: the quick start's blocks, in their order, in a
fresh folder - a local job with the image and its report (step 3), then the same job through SDK v3's local
mode (step 4). What differs from a user's machine, and only that: the image under test stands for
`smtrain:cpu` (built once per session by the build command of step 1, tests/conftest.py); step 4's
environment is the session's SDK v3 environment of the same version instead of a new one from PyPI; the
SDK's telemetry is opted out (no network here)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

from tests.harness.docker_cluster import REPO

STEPS = ("### 1. Build the image", "### 2. A training script", "### 3. Run it", "### 4. The same job through SDK v3's local mode")


def _quick_start() -> dict[str, list[tuple[str, str]]]:
    """Each step's blocks in order: ("shell", commands) for an indented block, ("python", code) for a fenced one."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    quick = text[text.index("## Quick start"):text.index("### Next")]
    steps: dict[str, list[tuple[str, str]]] = {}
    for n, heading in enumerate(STEPS):
        end = quick.index(STEPS[n + 1]) if n + 1 < len(STEPS) else len(quick)
        section = quick[quick.index(heading):end]
        blocks = [(m.start(), "python", m.group(1)) for m in re.finditer(r"```python\n(.*?)```", section, re.S)]
        blocks += [(m.start(), "shell", "\n".join(line[4:] for line in m.group(1).splitlines()))
                   for m in re.finditer(r"((?:^    .*\n)+)", section, re.M)]
        steps[heading] = [(kind, body) for _, kind, body in sorted(blocks)]
    return steps


def _run(script: str, folder: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", "set -e\n" + script], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_a_new_user_reaches_a_local_job_and_its_report_then_the_sdk_v3_local_job(containers: str,
                                                                                 tmp_path: Path) -> None:
    image, steps = containers, _quick_start()
    (tmp_path / "examples").symlink_to(REPO / "examples")  # "in a checkout of this repository"
    env = {**os.environ, "HOME": str(tmp_path)}
    build, script, run, local = (steps[h] for h in STEPS)
    assert build == [("shell", "docker build --target cpu -t smtrain:cpu .")]  # what tests/conftest.py builds
    assert script[0][0] == "python" and script[0][1] == (REPO / "examples" / "minimal" / "train.py").read_text()
    # step 3: the job, then its log's last lines as the README shows them
    (commands, shown) = (run[0][1], run[1][1])
    done = _run(commands.replace("smtrain:cpu", shlex.quote(image)), tmp_path, env, 300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1] == shown.splitlines()[-1] == "[train] the program succeeded"
    assert re.search(r"^epoch=1; loss=[0-9.]+;$", done.stdout, re.M), done.stdout
    assert (tmp_path / "ml" / "model" / "model.keras").is_file()
    report = tmp_path / "ml" / "output" / "data" / "profiler-report" / "profiler-report.html"
    assert report.is_file() and report.stat().st_uid == os.getuid()  # given back by the last command
    # step 4: SDK v3's environment, the job saved as the README says and run as it says
    kinds = [kind for kind, _ in local]
    assert kinds == ["shell", "python", "shell"][:len(kinds)] and len(kinds) >= 2, kinds
    venv, code = local[0][1], local[1][1]
    assert venv == 'python3 -m venv sdk && sdk/bin/pip install -q "sagemaker==3.27.0"'
    (tmp_path / "sdk").symlink_to("/opt/smtrain/sdk3")  # that environment, as made by scripts/setup.sh
    (tmp_path / "local_job.py").write_text(code.replace('"smtrain:cpu"', repr(image)))
    defaults = tmp_path / "sagemaker-config.yaml"
    defaults.write_text("SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n")
    sdk_env = {**env, "SAGEMAKER_USER_CONFIG_OVERRIDE": str(defaults)}
    sdk_env.pop("AWS_DEFAULT_REGION", None), sdk_env.pop("AWS_REGION", None)  # a user need not have one for local mode
    done = _run("sdk/bin/python local_job.py", tmp_path, sdk_env, 600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "[train] the program succeeded" in output and re.search(r"epoch=1; loss=[0-9.]+;", output), output[-3000:]
    assert (tmp_path / "artifacts" / "model" / "model.keras").is_file(), sorted(p.name for p in tmp_path.iterdir())
    assert (tmp_path / "artifacts" / "output" / "data" / "profiler-report" / "profiler-report.html").is_file()
    assert sorted(p.name for p in (tmp_path / "compressed_artifacts").iterdir()) == ["model.tar.gz", "output.tar.gz"]
