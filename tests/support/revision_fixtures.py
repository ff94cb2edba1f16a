"""A store as an older release left it: representative rows for every table that exists at a schema revision.

The fixtures of the upgrade tests (issue 19 item 7) are generated at test time from this description, not
committed as database files: ``rows_at(revision)`` gives, per table present at that revision, several rows with
the edge values a migration could lose (NULLs, text at its column's length, long selectors, unicode, binary
bodies with every byte value, 62-bit integers, microsecond times). The rows also make sense to a server:

* queue ``legacy.q``: messages 1–5; the cursor's low-water mark takes 1, an ``acks`` row takes 3, and 2 has
  failed three deliveries, so a consumer gets 2 (delivery-count 3), 4 and 5;
* queue ``очередь.ü``: message 9 (a unicode body);
* topic ``legacy/t``: messages 6–8, the backlog of the durable subscription ``legacy-sub`` of the ClientID
  ``legacy-app`` (from revision 0002, which adds subscriptions);
* users ``alice`` (password ``PASSWORD``) and a second one with a long unicode name; from 0003 roles and grants.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

from proton import Message

PASSWORD = "pw-ü"
WHEN = datetime(2026, 3, 4, 5, 6, 7, 891234, tzinfo=UTC)
LATER = datetime(2100, 1, 1, tzinfo=UTC)
BIG = 2**62 + 7
ALL_BYTES = bytes(range(256)) * 4
LONG_TEXT = "ünïcødé ✓ 中文 🎉 " * 4000  # ~72 000 characters in a body
SELECTOR = " OR ".join(f"k{i} = 'wert-ä{i}'" for i in range(300))  # a long Text column
QUEUE_BODIES: dict[int, Any] = {
    1: "gone: under the low-water mark",
    2: ALL_BYTES,
    3: "gone: acked",
    4: LONG_TEXT,
    5: b"",
}
TOPIC_BODIES: dict[int, Any] = {6: "t-six", 7: "t-sept ✓", 8: bytes(range(255, -1, -1))}
UNICODE_QUEUE = "очередь.ü"
LONG_NAME = ("user-é-" * 40)[:256]

# The revision that created each table (subgate/migrations/versions).
SINCE = {
    "nodes": "0001",
    "messages": "0001",
    "ack_cursors": "0001",
    "acks": "0001",
    "delivery_failures": "0001",
    "publishers": "0001",
    "principals": "0001",
    "subscriptions": "0002",
    "roles": "0003",
    "principal_roles": "0003",
    "permission_grants": "0003",
    "removal_registrations": "0004",
    "server_lease": "0005",
}


def payload(key: str, body: Any) -> bytes:
    return bytes(Message(id=key, body=body, durable=True, properties={"fixture": "ü"}).encode())


def message(id: int, address: str, kind: str, body: Any, **fields: Any) -> dict[str, Any]:
    data = payload(f"m{id}", body)
    row = {
        "id": id,
        "address": address,
        "node_kind": kind,
        "publisher_id": "legacy-publisher/ü",
        "publisher_seq": id,
        "bookmark": f"legacy-publisher/ü|{id}|",
        "ts": WHEN,
        "expires_at": None,
        "deliver_at": None,
        "durable": True,
        "priority": 4,
        "size": len(data),
        "payload": data,
    }
    return {**row, **fields}


@cache
def _password_hash() -> str:
    from subgate.storage.passwords import hash_password

    return hash_password(PASSWORD)


def _core() -> dict[str, list[dict[str, Any]]]:
    queue = [message(n, "legacy.q", "queue", body) for n, body in QUEUE_BODIES.items()]
    queue[3].update(expires_at=LATER, priority=9, publisher_seq=BIG)  # message 4
    queue[4].update(deliver_at=WHEN, priority=0, bookmark="b" * 600)  # message 5
    topic = [message(n, "legacy/t", "topic", body) for n, body in TOPIC_BODIES.items()]
    return {
        "nodes": [
            {"id": 1, "name": "legacy.q", "kind": "queue", "durable": True, "auto_created": False, "created_at": WHEN},
            {"id": 2, "name": "legacy/t", "kind": "topic", "durable": True, "auto_created": True, "created_at": WHEN},
            {
                "id": 3,
                "name": UNICODE_QUEUE,
                "kind": "queue",
                "durable": True,
                "auto_created": True,
                "created_at": WHEN,
            },
            {"id": 4, "name": "x" * 1024, "kind": "queue", "durable": False, "auto_created": True, "created_at": WHEN},
        ],
        "messages": [*queue, *topic, message(9, UNICODE_QUEUE, "queue", "привет ✓")],
        "ack_cursors": [
            {"id": 1, "owner_kind": "queue", "owner": "legacy.q", "address": "legacy.q", "low_water": 1},
            {"id": 3, "owner_kind": "queue", "owner": UNICODE_QUEUE, "address": UNICODE_QUEUE, "low_water": 0},
            {"id": 4, "owner_kind": "queue", "owner": "x" * 1024, "address": "x" * 1024, "low_water": BIG},
        ],
        "acks": [{"cursor_id": 1, "message_id": 3}, {"cursor_id": 4, "message_id": BIG + 1}],
        "delivery_failures": [{"cursor_id": 1, "message_id": 2, "failures": 3}],
        "publishers": [
            {"publisher_id": "legacy-publisher/ü", "last_seq": 9, "updated_at": WHEN},
            {"publisher_id": "p" * 512, "last_seq": BIG, "updated_at": WHEN},
        ],
        "principals": [
            {"id": 1, "name": "alice", "password_hash": _password_hash(), "created_at": WHEN},
            {"id": 2, "name": LONG_NAME, "password_hash": "pbkdf2_sha256$1$AA==$AA==", "created_at": WHEN},
        ],
    }


def _subscriptions() -> dict[str, list[dict[str, Any]]]:
    def sub(id: int, kind: str, client_id: str | None, name: str, **fields: Any) -> dict[str, Any]:
        row = {"id": id, "kind": kind, "durable": True, "client_id": client_id, "name": name, "topic": "legacy/t"}
        row |= {"selector": None, "no_local": False, "consumers": 0, "cursor_id": None, "created_at": WHEN}
        return row | fields

    return {
        "ack_cursors": [
            {"id": 2, "owner_kind": "subscription", "owner": "subscription/1", "address": "legacy/t", "low_water": 5},
            {"id": 5, "owner_kind": "subscription", "owner": "subscription/2", "address": "legacy/t", "low_water": 8},
        ],
        "subscriptions": [
            sub(1, "durable", "legacy-app", "legacy-sub", cursor_id=2),
            sub(2, "shared-durable", None, "global-ü", selector=SELECTOR, cursor_id=5),
            sub(3, "durable", "client-✓", "n" * 512, no_local=True, durable=True, cursor_id=None),
        ],
    }


def _permissions() -> dict[str, list[dict[str, Any]]]:
    def grant(id: int, kind: str, subject: str, permission: str, path: str, allow: bool) -> dict[str, Any]:
        return {"id": id, "subject_kind": kind, "subject": subject, "permission": permission, "path": path} | {
            "allow": allow,
            "created_at": WHEN,
        }

    return {
        "roles": [{"id": 1, "name": "admin", "created_at": WHEN}, {"id": 2, "name": "lecteurs-é", "created_at": WHEN}],
        "principal_roles": [{"principal_id": 1, "role_id": 1}, {"principal_id": 2, "role_id": 2}],
        "permission_grants": [
            grant(1, "role", "lecteurs-é", "READ_TOPIC", "legacy", True),
            grant(2, "principal", "anonymous", "SELECT_TOPIC", "", False),
            grant(3, "principal", LONG_NAME, "UPDATE_TOPIC", "/".join(["ä"] * 500), True),
        ],
    }


def _removals() -> dict[str, list[dict[str, Any]]]:
    return {
        "removal_registrations": [
            {"id": 1, "branch": "other/rws", "container_id": None, "link_name": "l" * 1024, "created_at": WHEN},
            {"id": 2, "branch": "other/ü", "container_id": "c-✓", "link_name": "rws", "created_at": WHEN},
        ]
    }


def rows_at(revision: str) -> dict[str, list[dict[str, Any]]]:
    """Rows for every table that exists at ``revision`` (a four-digit revision id below the head)."""
    parts = [_core()]
    if revision >= "0002":
        parts.append(_subscriptions())
    if revision >= "0003":
        parts.append(_permissions())
    if revision >= "0004":
        parts.append(_removals())
    merged: dict[str, list[dict[str, Any]]] = {}
    for part in parts:
        for table, rows in part.items():
            merged.setdefault(table, []).extend(rows)
    for row in merged["ack_cursors"]:
        row.setdefault("updated_at", WHEN)
    assert all(SINCE[table] <= revision for table in merged)
    return merged
