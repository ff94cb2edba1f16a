"""How ``subgate serve`` writes its log: the level and the format (``text`` lines or one JSON object per line).

Owns the root handler's set-up. JSON lines come from python-json-logger: each record becomes an object with
``time``, ``level``, ``logger`` and ``message``, plus the fields an event passes in ``extra`` (``event``,
``container_id``, ``principal``, ``peer``...), so a log shipper can index them without parsing the message.
"""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter

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
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("alembic").setLevel(logging.WARNING)
