"""Make the infra tests self-contained: load the PostgreSQL fixtures plugin unless the root
conftest already did (``pytest_plugins = ["tests.support.pytest_postgres"]``)."""

from __future__ import annotations

import pytest

_PLUGIN = "tests.support.pytest_postgres"


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin(_PLUGIN):
        config.pluginmanager.import_plugin(_PLUGIN)
