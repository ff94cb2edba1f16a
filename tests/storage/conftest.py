"""Fixtures of the store tests: a migrated engine on each store (``store_url``: SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from subgate.storage.db import make_engine, upgrade


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    upgrade(store_url)
    engine = make_engine(store_url)
    yield engine
    engine.dispose()
