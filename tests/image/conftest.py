"""Image tests: a real Docker engine (started here if none runs) and the CPU image, built once per
session from a local base image made from the OS mirror (scripts/base-image.sh)."""
from __future__ import annotations

import pytest

from tests.harness.docker_cluster import ensure_docker, image_under_test


@pytest.fixture(scope="session")
def image() -> str:
    ensure_docker()
    return image_under_test()
