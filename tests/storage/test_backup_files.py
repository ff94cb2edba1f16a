"""subgate.storage.backup in process: the refusals, the check of a copy, and the PostgreSQL lines that
docs/operations.md documents (the live-server cases are in tests/e2e/test_backup.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from subgate.storage.backup import BackupError, backup_sqlite, inspect_copy, pg_commands, restore_sqlite, sqlite_file
from subgate.storage.db import upgrade

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'subgate.db'}"
    upgrade(url)
    return url


def test_the_documented_postgres_commands_are_the_ones_printed():
    dump, restore = pg_commands("postgresql+psycopg://subgate@db.example:5432/subgate", "subgate.dump")
    text = DOCS.read_text()
    assert dump in text and restore in text
    assert "--exclude-table-data=server_lease" in dump


def test_a_password_never_reaches_the_printed_commands():
    dump, restore = pg_commands("postgresql+psycopg://u:s3cret@h:5/db", "x.dump")
    assert "s3cret" not in dump + restore
    assert "'postgresql://u:PASSWORD@h:5/db'" in dump and "/db_restored'" in restore


def test_only_sqlite_files_are_copied(tmp_path):
    assert sqlite_file("postgresql+psycopg://h/db") is None and sqlite_file("sqlite://") is None
    with pytest.raises(BackupError, match="not a SQLite file store"):
        backup_sqlite("postgresql+psycopg://h/db", tmp_path / "x.db")
    with pytest.raises(BackupError, match="there is no store"):
        backup_sqlite(f"sqlite:///{tmp_path / 'missing.db'}", tmp_path / "x.db")
    assert not (tmp_path / "missing.db").exists()


def test_refusals_leave_the_target_alone(store, tmp_path):
    target = tmp_path / "copy.db"
    target.write_bytes(b"keep me")
    with pytest.raises(BackupError, match="--force"):
        backup_sqlite(store, target)
    assert target.read_bytes() == b"keep me"
    with pytest.raises(BackupError, match="the store itself"):
        backup_sqlite(store, tmp_path / "subgate.db", force=True)
    with pytest.raises(BackupError, match="does not exist"):
        backup_sqlite(store, tmp_path / "no-such-folder" / "copy.db")
    report = backup_sqlite(store, target, force=True)
    assert report.sound and report.revision is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.db", "subgate.db"]  # no temporary file left


def test_a_torn_file_is_not_a_sound_copy_and_is_not_restored(store, tmp_path):
    good = backup_sqlite(store, tmp_path / "good.db")
    data = bytearray(good.path.read_bytes())
    torn = tmp_path / "torn.db"
    torn.write_bytes(bytes(data[: len(data) // 2]))  # cut in the middle, as a copy taken mid-write can be
    try:
        assert not inspect_copy(torn).sound
    except BackupError:
        pass  # or not even readable
    target = f"sqlite:///{tmp_path / 'restored.db'}"
    with pytest.raises(BackupError):
        restore_sqlite(torn, target)
    assert not (tmp_path / "restored.db").exists()
    plain = tmp_path / "plain.db"
    sqlite3.connect(plain).execute("CREATE TABLE t (x)").connection.close()
    assert inspect_copy(plain).revision is None and not inspect_copy(plain).sound
    restored = restore_sqlite(good.path, target)
    assert restored.sound and restored.rows == good.rows


def test_writes_between_the_steps_of_a_backup_stay_out_of_the_copy(store, tmp_path):
    """The copy is the snapshot of its first step: a writer committing between steps (what a running server does)
    changes neither the copy's rows nor makes the backup start over."""
    from sqlalchemy import insert

    from subgate.storage.db import make_engine
    from subgate.storage.models import JournalMessage
    from tests.support.store_rows import message_row

    engine = make_engine(store)
    with engine.begin() as conn:
        conn.execute(insert(JournalMessage), [message_row(n, payload=bytes([n % 256]) * 3000) for n in range(1, 2001)])
    engine.dispose()
    writer = sqlite3.connect(tmp_path / "subgate.db", isolation_level=None, timeout=30)
    steps: list[tuple[int, int]] = []

    def write_between_steps(done: int, total: int) -> None:
        steps.append((done, total))
        if len(steps) > 50:  # a backup that starts over at every write never ends
            raise RuntimeError("the backup keeps starting over")
        n = 10_000 + len(steps)
        writer.execute(
            "INSERT INTO messages (id, address, node_kind, publisher_id, publisher_seq, bookmark, ts, durable, "
            "priority, size, payload) VALUES (?, 'prices', 'topic', 'w', ?, 'w', '2026-01-01', 1, 4, 3000, ?)",
            (n, n, bytes(3000)),
        )

    report = backup_sqlite(store, tmp_path / "copy.db", progress=write_between_steps)
    writer.close()
    assert len(steps) >= 4, "the store should take several steps to copy"
    assert [done for done, _ in steps] == sorted(done for done, _ in steps), "the backup started over"
    assert dict(report.rows)["messages"] == 2000
    assert dict(inspect_copy(tmp_path / "subgate.db").rows)["messages"] == 2000 + len(steps)
