"""The report page (``subgate.pipeline.report``) from plain rows: charts per section, labels escaped, empty input."""

from __future__ import annotations

from datetime import UTC, datetime

from subgate.pipeline.report import bar_chart, render

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def test_a_bar_per_row_with_escaped_labels_and_values():
    chart = bar_chart("Backlog <x>", [("a<b", 10), ("c&d", 5), ("zero", 0)])
    assert chart.count("<rect") == 3
    assert "a&lt;b" in chart and "c&amp;d" in chart and "Backlog &lt;x&gt;" in chart and "a<b" not in chart
    assert 'width="520.0"' in chart and 'width="260.0"' in chart and 'width="0.0"' in chart


def test_an_empty_chart_says_so():
    assert "nothing to show" in bar_chart("Backlog", [])


def test_the_page_has_every_chart_and_the_gap_table():
    lag = [
        {"kind": "queue", "name": "q", "client_id": None, "topic": "q", "backlog": 2, "oldest_unaccepted_age_s": 1.5}
    ]
    audit = [{"publisher_id": "p", "gaps": [[4, 5]], "gap_bookmarks": [["p|3|", "p|6|"]]}]
    volume = [{"topic": "t", "kind": "topic", "day": "2026-03-04", "rows": 3, "bytes": 30}]
    page = render(lag, audit, volume, generated=NOW, cut=9)
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 5
    assert "journal up to #9" in page and "2026-03-04 05:06:07 UTC" in page
    assert "<td>p</td><td>4..5</td><td>p|3|</td><td>p|6|</td>" in page
    assert "<script" not in page


def test_an_empty_store_gives_a_page_without_bars():
    page = render([], [], [], generated=NOW, cut=0)
    assert page.count("nothing to show") == 5 and "<table" not in page
