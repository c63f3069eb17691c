"""`train`: the container's entry point.

    train             run the job described by /opt/ml (or $SAGEMAKER_BASE_DIR)
    train --dry-run   print the plan (role, command, environment) as JSON and run nothing
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from .config import DEFAULT_BASE_DIR, load_config
from .console import log
from .errors import ExitCode, ToolkitError
from .outcome import failure_text, write_atomically

VERSION = "0.1.0"


def _parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="train", description="Run a SageMaker training job in this container.")
    parser.add_argument("--dry-run", action="store_true", help="print the launch plan as JSON; run nothing")
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
    return parser.parse_args(argv)


def _fail(kind: str, message: str, write_file: bool) -> None:
    log(f"error: {kind}: {message}")
    if not write_file:
        return
    base = Path(os.environ.get("SAGEMAKER_BASE_DIR") or DEFAULT_BASE_DIR)
    try:
        write_atomically(base / "output" / "failure", failure_text(kind, message))
    except OSError as e:
        log(f"cannot write the failure file under {base / 'output'}: {e.strerror}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parse_args(argv)
    # First of all, so that a SIGTERM arriving while the config is read is not lost.
    from .supervise import SignalWaker

    waker = SignalWaker()
    try:
        from . import hostfacts
        from .plan import dumps, plan_launch

        environ = dict(os.environ)
        config = load_config(environ)
        facts = hostfacts.gather(environ, config.resources.current_instance_type)
        plan = plan_launch(config, facts, sys.executable)
        if args.dry_run:
            print(dumps(plan))
            return 0
        from .run import run_single

        return run_single(plan, environ, sys.executable, waker)
    except ToolkitError as e:
        _fail(e.kind, str(e), write_file=not args.dry_run)
        return int(e.exit_code)
    except Exception as e:  # a bug in the toolkit: still report it the SageMaker way
        import traceback

        traceback.print_exc()
        _fail("InternalError", f"{type(e).__name__}: {e}", write_file=not args.dry_run)
        return int(ExitCode.INTERNAL_ERROR)


def console_main() -> None:
    sys.exit(main())
