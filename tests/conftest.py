"""Session checks: the tests exercise the installed `train`, so it must be this checkout's code - except
where only the image tier runs: it tests an image (its own `train`), and needs only requirements/dev.txt
(buildspec.yml runs it so, in CodeBuild's Python)."""
from __future__ import annotations

import hashlib
import sysconfig
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parent.parent / "entrypoint" / "smtrain"
IMAGE_TIER = Path(__file__).resolve().parent / "image"


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*.py")):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _image_tier_only(config: pytest.Config) -> bool:
    """Whether every path pytest was given lies in tests/image (`pytest tests/image`, a test of it)."""
    given = [Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args]
    return bool(given) and all(path.is_relative_to(IMAGE_TIER) for path in given)


def pytest_sessionstart(session: pytest.Session) -> None:
    if _image_tier_only(session.config):
        return
    installed = Path(sysconfig.get_paths()["purelib"]) / "smtrain"
    if not installed.is_dir():
        pytest.exit(f"the project is not installed in {installed.parent}: run scripts/setup.sh", 3)
    if _digest(installed) != _digest(CHECKOUT):
        pytest.exit(f"the installed smtrain ({installed}) differs from this checkout: run scripts/setup.sh", 3)


@pytest.fixture(scope="session")
def image() -> str:
    """The CPU image under test (tests/image, tests/sdk): a real Docker engine (started here if none
    runs) and the image built once per session from a local base image made from the OS mirror
    (scripts/base-image.sh), or $SMTRAIN_IMAGE."""
    from tests.harness.docker_cluster import ensure_docker, image_under_test

    ensure_docker()
    return image_under_test()
