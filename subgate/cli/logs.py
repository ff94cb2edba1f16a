"""How ``subgate serve`` writes its log: the level and the format (``text`` lines or one JSON object per line).

Owns the root handler's set-up. JSON lines come from python-json-logger: each record becomes an object with
``time``, ``level``, ``logger`` and ``message``, plus the fields an event passes in ``extra`` (``event``,
``container_id``, ``principal``, ``peer``...), so a log shipper can index them without parsing the message.
Repeated per-connection refusals are held back to a few lines per kind and a summary (``cli.log_repeats``,
``engine.repeats``).
"""

from __future__ import annotations

import atexit
import logging
import sys

from pythonjsonlogger.json import JsonFormatter

from subgate.cli.log_repeats import RepeatFilter
from subgate.engine.repeats import RepeatLimit

FORMATS = ("text", "json")
_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str, log_format: str = "text") -> None:
    """Send records at ``level`` and above to stderr in ``log_format``."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s",
                rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            )
        )
    else:
        handler.setFormatter(logging.Formatter(_TEXT))
    repeats = RepeatFilter(RepeatLimit())
    handler.addFilter(repeats)
    atexit.register(repeats.close)  # the summaries of the windows still open
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("alembic").setLevel(logging.WARNING)
