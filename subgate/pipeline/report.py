"""The HTML report of ``subgate pipeline report``: one self-contained page (inline CSS and SVG, no script, nothing
fetched) with charts of the lag, audit and volume rows.

Owns the page's rendering from plain rows (what ``jobs.run_report`` collected); no Spark, no I/O. Charts are
horizontal bar charts drawn as SVG: backlog per subscription and queue, missing seqs per publisher (gaps),
journal rows and bytes per topic and day. Every label is escaped (a topic or a publisher id may hold ``<``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import Any

Row = dict[str, Any]
_BAR_HEIGHT = 22
_LABEL_WIDTH = 260
_BAR_WIDTH = 520
_COLOURS = ("#3b6fb6", "#c2542d", "#4b9a5f", "#8a5bb0")


def bar_chart(title: str, bars: Sequence[tuple[str, float]], *, unit: str = "", colour: int = 0) -> str:
    """An SVG bar chart: one bar per (label, value), the value written at the bar's end."""
    if not bars:
        return f'<section><h2>{escape(title)}</h2><p class="none">nothing to show</p></section>'
    top = max(value for _label, value in bars) or 1
    height = _BAR_HEIGHT * len(bars) + 10
    width = _LABEL_WIDTH + _BAR_WIDTH + 120
    parts = [f'<svg role="img" aria-label="{escape(title)}" width="{width}" height="{height}">']
    for index, (label, value) in enumerate(bars):
        y = index * _BAR_HEIGHT + 5
        length = max(1.0, _BAR_WIDTH * value / top) if value else 0.0
        parts.append(
            f'<text x="{_LABEL_WIDTH - 8}" y="{y + 15}" text-anchor="end">{escape(label)}</text>'
            f'<rect x="{_LABEL_WIDTH}" y="{y + 2}" width="{length:.1f}" height="{_BAR_HEIGHT - 6}" '
            f'fill="{_COLOURS[colour % len(_COLOURS)]}"><title>{escape(label)}: {value:g}{unit}</title></rect>'
            f'<text x="{_LABEL_WIDTH + length + 6:.1f}" y="{y + 15}">{value:g}{escape(unit)}</text>'
        )
    parts.append("</svg>")
    return f"<section><h2>{escape(title)}</h2>{''.join(parts)}</section>"


def _consumer_label(row: Row) -> str:
    if row["kind"] == "queue":
        return f"queue {row['name']}"
    owner = f"{row['client_id']}/" if row["client_id"] else ""
    return f"{owner}{row['name']} on {row['topic']}"


def _missing(row: Row) -> int:
    return sum(last - first + 1 for first, last in row["gaps"])


def render(lag: list[Row], audit: list[Row], volume: list[Row], *, generated: datetime, cut: int) -> str:
    """The whole page."""
    charts = [
        bar_chart("Backlog per subscription and queue (messages)", [(_consumer_label(r), r["backlog"]) for r in lag]),
        bar_chart(
            "Oldest unaccepted message per subscription and queue (seconds)",
            [(_consumer_label(r), round(r["oldest_unaccepted_age_s"] or 0, 1)) for r in lag],
            unit=" s",
            colour=3,
        ),
        bar_chart("Missing seqs (gaps) per publisher", [(r["publisher_id"], _missing(r)) for r in audit], colour=1),
        bar_chart(
            "Journal rows per topic and day",
            [(f"{r['topic']} · {r['day']}", r["rows"]) for r in volume],
            colour=2,
        ),
        bar_chart(
            "Journal bytes per topic and day",
            [(f"{r['topic']} · {r['day']}", r["bytes"]) for r in volume],
            unit=" B",
            colour=2,
        ),
    ]
    gaps = "".join(
        f"<tr><td>{escape(r['publisher_id'])}</td><td>{first}..{last}</td><td>{escape(str(before))}</td>"
        f"<td>{escape(str(after))}</td></tr>"
        for r in audit
        for (first, last), (before, after) in zip(r["gaps"], r["gap_bookmarks"], strict=True)
    )
    gap_table = (
        "<section><h2>Gaps</h2><table><tr><th>publisher</th><th>missing</th><th>bookmark before</th>"
        f"<th>bookmark after</th></tr>{gaps}</table></section>"
        if gaps
        else ""
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>subgate pipeline report</title>'
        f"<style>{_CSS}</style></head><body><h1>subgate pipeline report</h1>"
        f"<p>Generated {generated:%Y-%m-%d %H:%M:%S} UTC from the journal up to #{cut}.</p>"
        f"{''.join(charts)}{gap_table}</body></html>\n"
    )


_CSS = (
    "body{font-family:sans-serif;margin:24px;color:#222}h1{font-size:22px}h2{font-size:16px;margin:24px 0 6px}"
    "svg text{font-size:12px;fill:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;"
    "font-size:12px}.none{color:#777}"
)
