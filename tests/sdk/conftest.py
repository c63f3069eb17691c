"""The SDK tests run the image under test (built once per session, tests/image/conftest.py) through
the real SDKs; each test's containers are removed after it."""
from __future__ import annotations

from typing import Iterator

import pytest

from tests.image.conftest import image  # noqa: F401 - the session's image fixture
from tests.sdk.sdk import remove_containers


@pytest.fixture
def containers(image: str) -> Iterator[str]:  # noqa: F811
    remove_containers(image)
    yield image
    remove_containers(image)
