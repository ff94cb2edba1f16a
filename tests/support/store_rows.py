"""Rows for seeding a store directly in tests: subscriptions, journal cursors and journal messages.

Each builder returns a dict for ``sqlalchemy.insert(Model)`` with sensible defaults; keyword arguments override.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

CREATED = datetime(2026, 1, 2, 3, 4, 5, 123000, tzinfo=UTC)


def subscription_row(id: int, name: str, client_id: str | None, **fields: Any) -> dict[str, Any]:
    """A durable subscription on ``prices`` (``shared-durable`` when global) unless ``fields`` say otherwise."""
    row = {
        "id": id,
        "kind": "durable" if client_id is not None else "shared-durable",
        "durable": True,
        "client_id": client_id,
        "name": name,
        "topic": "prices",
        "selector": None,
        "no_local": False,
        "consumers": 0,
        "cursor_id": None,
        "created_at": CREATED,
    }
    return {**row, **fields}


def cursor_row(id: int, owner: str, address: str = "prices", low_water: int = 0) -> dict[str, Any]:
    return {
        "id": id,
        "owner_kind": "subscription",
        "owner": owner,
        "address": address,
        "low_water": low_water,
        "updated_at": CREATED,
    }


def message_row(id: int, address: str = "prices", payload: bytes = b"x") -> dict[str, Any]:
    return {
        "id": id,
        "address": address,
        "node_kind": "topic",
        "publisher_id": "pub",
        "publisher_seq": id,
        "bookmark": f"pub:{id}",
        "ts": CREATED,
        "durable": True,
        "priority": 4,
        "size": len(payload),
        "payload": payload,
    }
