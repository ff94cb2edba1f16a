"""pytest fixtures for a throwaway PostgreSQL cluster.

Enable in ``tests/conftest.py`` with::

    pytest_plugins = ["tests.support.pytest_postgres"]

Fixtures:

* ``postgres_cluster`` (session): a started :class:`~tests.support.postgres.PostgresCluster`,
  shared by every test of the session (one per xdist worker) and removed at the end.
* ``postgres_url`` (function): the SQLAlchemy URL (``postgresql+psycopg://...``) of a fresh,
  empty database created for this test only; dropped afterwards (set ``SUBGATE_PG_KEEP_DBS=1``
  to keep them for debugging until the session ends).

Tests using either fixture are automatically marked ``postgres`` so ``-m "not postgres"``
deselects them.
"""

from __future__ import annotations

import itertools
import os
import re
import uuid
import warnings
from collections.abc import Iterator

import pytest

from tests.support.postgres import PostgresCluster
from tests.support.server import stop_servers_using

__all__ = ["postgres_cluster", "postgres_url", "unique_database_name"]

_counter = itertools.count(1)


def unique_database_name(hint: str = "t") -> str:
    """A valid, unique PostgreSQL database name derived from ``hint`` (e.g. a test name)."""
    slug = re.sub(r"[^a-z0-9_]+", "_", hint.lower()).strip("_")[:36] or "t"
    return f"t_{slug}_{next(_counter)}_{uuid.uuid4().hex[:8]}"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "postgres: needs a throwaway PostgreSQL cluster (started by the fixtures)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "postgres_cluster" in names or "postgres_url" in names:
            item.add_marker(pytest.mark.postgres)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A running throwaway PostgreSQL cluster for the whole test session."""
    with PostgresCluster() as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """URL of a fresh database, unique to this test."""
    name = unique_database_name(request.node.name)
    url = postgres_cluster.create_database(name)
    yield url
    stop_servers_using(url)  # before the drop, whatever the order of the fixtures' teardown
    if os.environ.get("SUBGATE_PG_KEEP_DBS") == "1" or not postgres_cluster.started:
        return
    try:
        postgres_cluster.drop_database(name)
    except Exception as err:  # noqa: BLE001 - cleanup must not mask the test result
        warnings.warn(f"could not drop test database {name}: {err}", stacklevel=1)
