"""Shared fixtures: a real subgate server process over SQLite or a throwaway PostgreSQL database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import SubgateProcess

# pytester: tests/jms/test_testing_plugin.py runs pytest sessions of its own against the subgate.testing plugin.
pytest_plugins = ["tests.support.pytest_postgres", "tests.support.spark", "pytester"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` run first (in their order): under pytest-xdist (``make test``) the bounded fuzz run,
    the longest test by far, then starts at once beside the rest instead of holding one worker alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL; tests using it run once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'subgate.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'subgate.db'}"


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator:
    """Factory: ``make_server(store_url, *flags)`` returns a started SubgateProcess, stopped at teardown."""
    servers: list[SubgateProcess] = []

    def factory(store_url: str | None = None, *flags: str, env: dict[str, str] | None = None) -> SubgateProcess:
        workdir = tmp_path / f"server{len(servers)}"
        workdir.mkdir()
        url = store_url or f"sqlite:///{workdir / 'subgate.db'}"
        server = SubgateProcess(url, workdir, *flags, env=env)
        servers.append(server)
        return server.start()

    yield factory
    for server in servers:
        if server.alive():
            try:
                server.stop(timeout=10)
            except Exception:
                server.kill()


@pytest.fixture
def server(make_server, sqlite_url: str) -> SubgateProcess:
    """A running server on a fresh SQLite store."""
    return make_server(sqlite_url)
