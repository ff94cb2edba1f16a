"""Fixtures of the end-to-end tests that share one server per module (see tests.support.server.module_server)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.server import SubgateProcess

STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def broker(shared_server: SubgateProcess) -> Iterator[SubgateProcess]:
    """The module's ``shared_server``; a test during which it dies fails, and the next test gets a fresh process."""
    if not shared_server.alive():
        shared_server.start()
    yield shared_server
    if not shared_server.alive():
        log = shared_server.log()
        shared_server.start()
        pytest.fail(f"the server died during this test:\n{log[-4000:]}")


@pytest.fixture
def uid() -> str:
    """A short unique token that keeps the names of one test apart from the others on a shared server."""
    return uuid.uuid4().hex[:10]
