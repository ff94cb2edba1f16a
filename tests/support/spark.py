"""pytest fixture ``spark``: the one local SparkSession of a test run (per xdist worker), shared by every Spark test.

Started once, the first time a test asks for it, with ``subgate.pipeline.session``'s settings plus the quick ones
for tiny data (``local[2]``, 2 shuffle partitions, C1-only JIT and serial GC, UI off) and its scratch under
pytest's temporary directory; stopped at the end of the run. Tests using it are marked ``spark``. A missing
pyspark, Java or JDBC driver fails them (with the line saying what to install): they are never skipped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from subgate.pipeline.session import SessionSettings, missing_requirement, start_session

    missing = missing_requirement()
    if missing is not None:
        pytest.fail(missing, pytrace=False)
    os.environ["TZ"] = "UTC"  # collect() turns timestamps into naive datetimes in the process's zone
    time.tzset()
    settings = SessionSettings(
        master="local[2]",
        app_name="subgate-tests",
        shuffle_partitions=2,
        driver_memory="1g",
        scratch=tmp_path_factory.mktemp("spark"),
        for_tests=True,
    )
    session = start_session(settings)
    yield session
    session.stop()
