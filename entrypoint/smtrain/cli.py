"""`train`: the container's entry point.

    train             run the job described by /opt/ml (or $SAGEMAKER_BASE_DIR)
    train --dry-run   print the plan (role, command, environment) as JSON and run nothing
    train --help-settings   every setting: how it is given, its default, what it does
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from . import __version__
from .common import console
from .common.console import exit_flushed, log
from .config.defaults import DEFAULT_BASE_DIR
from .config.load import load_config
from .config.secrets import Redactor
from .errors import FailureCause, ToolkitError
from .run.outcome import FileState, JobOutcome, render

__all__ = ["USAGE", "console_main", "main"]


USAGE = """usage: train [--dry-run] [--version] [--help] [--help-settings]
       train report DIR [DIR ...] [--out OUT] [--param Rule.key=value ...]

Run the SageMaker training job described by /opt/ml (or $SAGEMAKER_BASE_DIR) in this container.

  --dry-run   print the launch plan (role, command, environment) as JSON; run nothing
  --version   print the version
  --help-settings   every setting (hyperparameter / environment variable): its type, default and meaning
  report      write an HTML report and JSON summary of the system monitor's files (train report --help)
"""


def _parse_args(argv: Sequence[str]) -> set[str]:
    """The few flags `train` takes. (argparse alone costs 6 ms of start-up, measured with `python -X importtime`.)"""
    flags = set(argv)
    unknown = flags - {"--dry-run", "--version", "--help", "-h", "--help-settings"}
    if unknown:
        sys.stderr.write(USAGE + f"\ntrain: error: unrecognised arguments: {' '.join(sorted(unknown))}\n")
        raise SystemExit(2)
    if flags & {"--help", "-h"}:
        sys.stdout.write(USAGE)
        raise SystemExit(0)
    if "--help-settings" in flags:
        from .config.settings import help_text

        sys.stdout.write(help_text())
        raise SystemExit(0)
    if "--version" in flags:
        print(f"train {__version__}")
        raise SystemExit(0)
    return flags


def _fail(outcome: JobOutcome, write_file: bool) -> int:
    """A failure before the job could run (the config, this host, a bug of the toolkit), reported as
    every other ending is (run.outcome.render)."""
    if not write_file:
        log(outcome.reason.splitlines()[0])
        return outcome.status
    failure_file = Path(os.environ.get("SAGEMAKER_BASE_DIR") or DEFAULT_BASE_DIR) / "output" / "failure"
    return render(outcome, failure_file, FileState.of(failure_file), redact=console.redact)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`train`: run this host's part of the job (or `train report ...`, `train --dry-run`); the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["report"]:
        from .profiler.job_report import main as report_main

        return report_main(args[1:])
    flags = _parse_args(args)
    dry_run = "--dry-run" in flags
    # First of all, so that a SIGTERM arriving while the config is read is not lost.
    from .common.signals import SignalWaker

    waker = SignalWaker()
    environ = dict(os.environ)
    redact = Redactor.of(environ)
    console.set_redactor(redact)
    try:
        from .config import hostfacts
        from .plan.launch import dumps, plan_launch

        config = load_config(environ)
        redact = redact.merged(Redactor.of(config.hyperparameters))
        console.set_redactor(redact)
        facts = hostfacts.gather(environ, config)
        token = os.urandom(16).hex()
        plan = plan_launch(config, facts, sys.executable, token)
        if dry_run:
            print(dumps(plan, redact))
            return 0
        from .run.host import run_job

        return run_job(plan, environ, sys.executable, waker, token)
    except ToolkitError as e:
        return _fail(JobOutcome.of_error(e), write_file=not dry_run)
    except Exception as e:  # a bug in the toolkit: still report it the SageMaker way
        import traceback

        traceback.print_exc()
        return _fail(JobOutcome.of_cause(FailureCause.INTERNAL_ERROR, f"{type(e).__name__}: {e}"),
                     write_file=not dry_run)


def console_main() -> None:
    """The `train` console script. Once its part is done and its output flushed, it exits without the
    interpreter's teardown of its modules (about 10 ms of CPU that every host's end would wait for):
    train's own threads are daemons, and nothing of it runs at exit."""
    exit_flushed(main())
