"""The bounded crash run of ``make test``: 5 SIGKILLs under load on SQLite and 5 on PostgreSQL, every promise of
docs/reliability.md checked after each restart. The long run: ``python -m tests.chaos --kills N --store URL``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.run import run

KILLS = 5


@pytest.mark.slow
def test_kill_9_under_load_loses_and_duplicates_nothing(store_url: str, tmp_path: Path) -> None:
    report = run(store_url, tmp_path, KILLS, seed=19)
    assert report.kills == KILLS
    assert report.problems == [], report.to_json()
    figures = report.figures
    assert figures["confirmed"] > 0 and figures["checked"] > 0 and figures["committed"] > 0, report.to_json()
