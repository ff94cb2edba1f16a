"""Retention: how long the journal keeps messages for replay (``--retention``, docs/bookmarks.md "Retention").

Owns the duration syntax (``7d``, ``12h``, ``30m``, ``45s``, ``250ms``, a bare number of seconds, ``0``) and the
rule, stated once: a journal row may be deleted when it is older than the retention period **and** every queue
and durable subscription of its address has accepted it (a cursor's low-water mark is at or above it, or an
``acks`` row records it) — or when it is a non-persistent row of an earlier run, which no one can read any more.
The store applies the rule (``storage.retention``) in bounded batches on the journal writer thread.
"""

from __future__ import annotations

import re

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}


class DurationError(ValueError):
    """A duration that is not a number with an optional unit (ms, s, m, h, d, w)."""


def parse_duration_ms(text: str) -> int:
    """``"7d"`` → 604800000. Raises DurationError naming the text."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise DurationError(f"retention {text!r} is not a duration such as 7d, 12h, 30m, 45s or 0")
    return int(float(match.group(1)) * _UNIT_MS[match.group(2) or "s"])
