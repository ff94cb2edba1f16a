"""What the harness reads from the store itself, with its own SQLAlchemy engine: the integrity check (SQLite's
``PRAGMA integrity_check``; for both stores, acks, failure counts and subscriptions that point at rows that do
not exist) and snapshots of the rows that must come through a crash unchanged (users, roles, grants,
subscriptions, remove-with-session registrations)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

DANGLING = {
    "acks without their cursor": "SELECT count(*) FROM acks a LEFT JOIN ack_cursors c ON c.id = a.cursor_id"
    " WHERE c.id IS NULL",
    "acks of no journal row": "SELECT count(*) FROM acks a LEFT JOIN messages m ON m.id = a.message_id"
    " WHERE m.id IS NULL",
    "failure counts without their cursor": "SELECT count(*) FROM delivery_failures f"
    " LEFT JOIN ack_cursors c ON c.id = f.cursor_id WHERE c.id IS NULL",
    "failure counts of no journal row": "SELECT count(*) FROM delivery_failures f"
    " LEFT JOIN messages m ON m.id = f.message_id WHERE m.id IS NULL",
    "subscriptions with a missing cursor": "SELECT count(*) FROM subscriptions s"
    " LEFT JOIN ack_cursors c ON c.id = s.cursor_id WHERE s.cursor_id IS NOT NULL AND c.id IS NULL",
}

SNAPSHOTS = {
    "users": "SELECT name, password_hash FROM principals",
    "roles": "SELECT p.name, r.name FROM principal_roles pr JOIN principals p ON p.id = pr.principal_id"
    " JOIN roles r ON r.id = pr.role_id",
    "grants": "SELECT subject_kind, subject, permission, path, allow FROM permission_grants",
    "subscriptions": "SELECT kind, client_id, name, topic, selector, no_local, cursor_id IS NOT NULL"
    " FROM subscriptions",
    "registrations": "SELECT branch, container_id, link_name FROM removal_registrations",
}


def _engine(url: str) -> sa.Engine:
    return sa.create_engine(url, poolclass=NullPool)


def integrity_problems(url: str) -> list[str]:
    """Run while the server is down (after a kill): what is wrong with the store's structure."""
    engine = _engine(url)
    problems: list[str] = []
    try:
        with engine.connect() as conn:
            if url.startswith("sqlite"):
                rows = [r[0] for r in conn.exec_driver_sql("PRAGMA integrity_check")]
                if rows != ["ok"]:
                    problems.append(f"PRAGMA integrity_check: {rows[:5]}")
            for what, query in DANGLING.items():
                count = conn.exec_driver_sql(query).scalar_one()
                if count:
                    problems.append(f"{count} {what}")
    finally:
        engine.dispose()
    return problems


def snapshot(url: str) -> dict[str, list[tuple[object, ...]]]:
    """The rows of ``SNAPSHOTS``, as tuples."""
    engine = _engine(url)
    try:
        with engine.connect() as conn:
            return {name: [tuple(r) for r in conn.exec_driver_sql(q)] for name, q in SNAPSHOTS.items()}
    finally:
        engine.dispose()
