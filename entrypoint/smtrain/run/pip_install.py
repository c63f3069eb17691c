"""Installing the job's requirements as plan.requirements decided (effects): pip, from the CodeArtifact
index where the job names one (a token asked for now, never logged), and with a warm pool's cache: the wheels
the requirements needed are kept in it, and a later job of the pool installs from them alone
(`--no-index`), so that it needs no index at all; where they do not suffice (a new requirement), the index
fills them in. Keeping the wheels is best-effort: where it fails the requirements are installed as without a
cache. CodeSetupFailed (65) when they cannot be installed."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..common.console import log
from ..config.settings import CODEARTIFACT
from ..errors import CodeSetupFailed
from ..plan.requirements import CodeArtifactRepository, RequirementsPlan

__all__ = ["codeartifact_index", "install_requirements", "pip_install_argv"]


def codeartifact_index(repository: CodeArtifactRepository, client: Optional[Any] = None) -> str:
    """The repository's PyPI index with a new token in it, built as sagemaker-training builds it: the
    endpoint's `.../<repository>/` becomes `.../<repository>/simple/`, `https://` `https://aws:<token>@`.
    `client`: a boto3 CodeArtifact client (made for the repository's region when not given)."""
    if client is None:
        try:
            import boto3  # only for a CodeArtifact job: never on the common launch path
        except ImportError:
            raise CodeSetupFailed(f"{CODEARTIFACT.variable} names a CodeArtifact repository, but boto3 is not "
                                  "installed in this image") from None
        client = boto3.client("codeartifact", region_name=repository.region)
    where = f"CodeArtifact repository {repository.domain}/{repository.repository} ({repository.region})"
    try:
        token = client.get_authorization_token(domain=repository.domain, domainOwner=repository.account)
        endpoint = client.get_repository_endpoint(domain=repository.domain, domainOwner=repository.account,
                                                  repository=repository.repository, format="pypi")
    except Exception as e:  # botocore raises many unrelated classes; all mean the same here
        raise CodeSetupFailed(f"cannot reach the {where}: {type(e).__name__}: {e}") from None
    index = re.sub(f"{re.escape(repository.repository)}/?$", f"{repository.repository}/simple/",
                   endpoint["repositoryEndpoint"])
    return index.replace("https://", f"https://aws:{token['authorizationToken']}@", 1)


def pip_install_argv(python: str, requirements: Path, wheels: Optional[Path] = None, *extra: str) -> list[str]:
    """pip's command: from the index (pip's own, or the one `_pip` is given), or from the kept `wheels` alone."""
    where = ["--no-index", "--find-links", str(wheels)] if wheels is not None else []
    return [python, "-m", "pip", "install", "--no-input", *where, *extra, "-r", str(requirements)]


Pip = Callable[[Sequence[str], Path, Optional[str]], int]  # (argv, cwd, index) -> status


def install_requirements(python: str, plan: RequirementsPlan, run: Optional[Pip] = None) -> None:
    """Install the plan's requirements file (nothing where it has none, or where a file found beside the
    program is not there after all); CodeSetupFailed naming the file when pip fails."""
    file = plan.file
    if file is None or not file.is_file():
        if file is not None and plan.required:
            raise CodeSetupFailed(f"the requirements file {file} does not exist ({plan.rule})")
        return
    run = run or _pip
    index = codeartifact_index(plan.index) if plan.index is not None else None
    source = f" from CodeArtifact repository {plan.index.domain}/{plan.index.repository}" if plan.index else ""
    if plan.cache is not None:
        if any(plan.cache.glob("*.whl")) and run(pip_install_argv(python, file, plan.cache), file.parent, None) == 0:
            log(f"installed {file} from the warm pool's cache {plan.cache}")
            return
        log(f"installing {file}{source}, keeping its wheels in the warm pool's cache {plan.cache}")
        if _keep_wheels(python, file, index, plan.cache, run) and \
                run(pip_install_argv(python, file, plan.cache), file.parent, None) == 0:
            return
        log("the warm pool's cache could not serve the requirements: installing them from the index")
    else:
        log(f"installing {file}{source}")
    status = run(pip_install_argv(python, file), file.parent, index)
    if status != 0:
        raise CodeSetupFailed(f"pip install -r {file} failed with status {status}{source}")


def _keep_wheels(python: str, file: Path, index: Optional[str], cache: Path, run: Pip) -> bool:
    """The wheels of what `file` would install here (pip's report of a dry run: what this environment lacks),
    built or downloaded from the index into `cache`; whether that worked."""
    import tempfile  # a warm pool's alone

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        if run(pip_install_argv(python, file, None, "--dry-run", "--quiet", "--report", str(report)), file.parent,
               index) != 0:
            return False
        try:
            wanted = [f"{item['metadata']['name']}=={item['metadata']['version']}"
                      for item in json.loads(report.read_text()).get("install", [])]
        except (OSError, ValueError, KeyError, TypeError):
            return False
    if not wanted:
        return True
    cache.mkdir(parents=True, exist_ok=True)
    return run([python, "-m", "pip", "wheel", "--no-input", "--no-deps", "-w", str(cache), *wanted], file.parent,
               index) == 0


def _pip(argv: Sequence[str], cwd: Path, index: Optional[str]) -> int:
    """pip, its output on this `train`'s stderr (stdout is the program's); `index` through its environment
    (PIP_INDEX_URL), so that a token in it is on no command line."""
    import os

    env = {**os.environ, "PIP_INDEX_URL": index} if index else None
    return subprocess.run(list(argv), stdout=2, cwd=cwd, env=env).returncode
