"""Where the user's program is and how to start it: `.py` with the image's python, `.sh` with bash,
anything else directly (it must then be executable)."""
from __future__ import annotations

import enum
import os
from pathlib import Path
from typing import NamedTuple, Optional, Sequence

from ..config.model import ProgramSpec
from ..errors import ConfigError, ProgramNotExecutable, ProgramNotFound

__all__ = ["CodeSource", "ProgramLaunch", "check_program", "plan_program"]


class CodeSource(enum.Enum):
    """Where the program's code comes from."""
    LOCAL_DIR = "local folder"
    TARBALL = "local tarball"
    S3 = "s3 tarball"


class ProgramLaunch(NamedTuple):
    """How the program starts: its folder, path, argv and the code's source."""
    program_dir: Path  # where the code is (after fetching, for a tarball); the program's cwd
    program_path: Path
    argv: tuple[str, ...]
    source: CodeSource
    fetch_from: Optional[str]  # tarball or s3 URI to extract into program_dir first


def _source(spec: ProgramSpec, submit_is_file: bool) -> CodeSource:
    if spec.local_dir is None:
        return CodeSource.S3
    if submit_is_file:
        return CodeSource.TARBALL
    return CodeSource.LOCAL_DIR


def plan_program(spec: Optional[ProgramSpec], code_dir: Path, args: Sequence[str], python: str,
                 submit_is_file: bool) -> ProgramLaunch:
    """The program's argv and folder (`.py` with the image's Python, `.sh` with bash, else directly)."""
    if spec is None:
        raise ConfigError(
            "no program to run: set hyperparameter 'sagemaker_program' in hyperparameters.json "
            "or environment variable SAGEMAKER_PROGRAM (e.g. train.py)"
        )
    source = _source(spec, submit_is_file)
    program_dir = spec.local_dir if source is CodeSource.LOCAL_DIR else code_dir
    assert program_dir is not None
    path = program_dir / spec.entry_point
    if spec.shell_command:  # as ModelTrainer runs it: in the code folder, hyperparameters only in SM_HPS
        path, args = program_dir, ()
        command: tuple[str, ...] = ("/bin/bash", "-c", spec.entry_point)
    elif spec.entry_point.endswith(".py"):
        command = (python, str(path))
    elif spec.entry_point.endswith(".sh"):
        command = ("/bin/bash", str(path))
    else:
        command = (str(path),)
    return ProgramLaunch(
        program_dir=program_dir,
        program_path=path,
        argv=command + tuple(args),
        source=source,
        fetch_from=None if source is CodeSource.LOCAL_DIR else spec.submit_dir,
    )


def check_program(launch: ProgramLaunch) -> None:
    """Fail with a clear error if the program is missing or cannot be executed (read-only checks)."""
    path = launch.program_path
    if not launch.program_dir.is_dir():
        raise ProgramNotFound(f"program folder {launch.program_dir} does not exist (sagemaker_submit_directory)")
    if path == launch.program_dir:  # a shell command line: nothing more to check
        return
    if not path.is_file():
        present = sorted(p.name for p in launch.program_dir.iterdir())[:10]
        raise ProgramNotFound(f"program {path} does not exist; {launch.program_dir} holds {present}")
    interpreted = path.suffix in (".py", ".sh")
    if not interpreted and not os.access(path, os.X_OK):
        raise ProgramNotExecutable(
            f"program {path} is not executable: chmod +x it, or name it .py or .sh to run it with python or bash"
        )
    if interpreted and not os.access(path, os.R_OK):
        raise ProgramNotExecutable(f"program {path} is not readable")
