"""Which requirements file this job installs before its program, from which package index, with which cache
(pure; run.pip_install installs them).

- The file: in a job SDK v3's ModelTrainer started, the one `SourceCode(requirements=...)` names, in the code
  folder, and none without it (v3's rule: its driver installs nothing else); in every other job,
  `requirements.txt` beside the program where there is one (sagemaker-training's rule).
- The index: where `CA_REPOSITORY_ARN` names an AWS CodeArtifact repository, that repository's PyPI endpoint
  with a token made when the job starts (as sagemaker-training's `modules._get_codeartifact_index` and v3's
  install_requirements.py build it); else pip's own (PIP_INDEX_URL, pip.conf).
- The cache: where SageMaker mounts a warm pool's cache (`SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY`, kept
  between the pool's jobs), the wheels the requirements needed are kept there, and a later job of the pool
  installs from them without reaching the index.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

from ..config.model import CodeFacts, TrainingConfig
from ..config.settings import CODEARTIFACT, WARM_POOL_CACHE
from ..errors import ConfigError

__all__ = ["CodeArtifactRepository", "RequirementsPlan", "requirements_plan"]

_ARN = re.compile(r"^arn:(?P<partition>[^:]+):codeartifact:(?P<region>[^:]+):(?P<account>[^:]+)"
                  r":repository/(?P<domain>[^/]+)/(?P<repository>.+)$")


class CodeArtifactRepository(NamedTuple):
    """An AWS CodeArtifact repository, as its ARN names it."""

    region: str
    account: str  # the domain's owner
    domain: str
    repository: str

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


class RequirementsPlan(NamedTuple):
    """What is installed before the program (see the module's docstring)."""

    file: Optional[Path]  # the requirements file; None: nothing to install
    required: bool  # the job named it, so it must be there (else it is installed where it is)
    rule: str  # why this file (or none)
    index: Optional[CodeArtifactRepository]  # None: pip's own index
    cache: Optional[Path]  # the warm pool's wheels; None: no warm pool

    def to_json(self) -> dict[str, Any]:
        return {"file": str(self.file) if self.file else None, "required": self.required, "rule": self.rule,
                "codeartifact": self.index.to_json() if self.index else None,
                "cache": str(self.cache) if self.cache else None}


def codeartifact_repository(environ: Mapping[str, str]) -> Optional[CodeArtifactRepository]:
    """The repository CA_REPOSITORY_ARN names; ConfigError naming it where it is not a repository's ARN."""
    arn = environ.get(CODEARTIFACT.variable)
    if not arn:
        return None
    match = _ARN.match(arn)
    if match is None:
        raise ConfigError(f"environment variable {CODEARTIFACT.variable}: expected a CodeArtifact repository's ARN "
                          f"(arn:aws:codeartifact:REGION:ACCOUNT:repository/DOMAIN/REPOSITORY), got {arn!r}")
    return CodeArtifactRepository(match["region"], match["account"], match["domain"], match["repository"])


def requirements_plan(config: TrainingConfig, program_dir: Path, fetched: bool, code: CodeFacts) -> RequirementsPlan:
    """This job's requirements (`fetched`: the code comes as a tarball, unpacked into `program_dir` first, so
    what it holds is known only then)."""
    trainer = config.model_trainer
    if trainer is not None:
        file = program_dir / trainer.requirements if trainer.requirements else None
        rule = ("SDK v3: SourceCode(requirements=...)" if file else
                "SDK v3: SourceCode names no requirements file, so none is installed")
    else:
        beside = fetched or code.has_requirements
        file = program_dir / "requirements.txt" if beside else None
        rule = "sagemaker-training: requirements.txt beside the program" + ("" if beside else " (there is none)")
    cache = config.environ.get(WARM_POOL_CACHE.variable)
    return RequirementsPlan(file, trainer is not None and file is not None, rule, codeartifact_repository(config.environ),
                            Path(cache) / "smtrain" / "wheels" if cache and file else None)
