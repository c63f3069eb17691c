"""The SDK tests run the image under test (built once per session, tests/conftest.py) through the
real SDKs; each test's containers are removed after it."""
from __future__ import annotations

from typing import Iterator

import pytest

from tests.sdk.sdk import remove_containers


@pytest.fixture
def containers(image: str) -> Iterator[str]:
    remove_containers(image)
    yield image
    remove_containers(image)
