"""A read whose values the store refuses fails by itself, at once, through the journal writer (issue 33, defect 2).

Before: the bookmark ``p|9223372036854775808|`` reached the writer as a replay read; SQLite refused to bind it
("Python int too large to convert to SQLite INTEGER"), the whole batch was retried five times with back-off
(1.55 s) and then applied one operation at a time: every publisher's writes waited behind it. Now the read answers
with ``StoreReadFailed`` and the rest of its batch commits in the same pass, with no retry. (The gateway refuses
such a value before it gets here: ``mapping.store_values``; this is the writer's own guard.)
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlalchemy import Engine

from subgate.engine.records import ReplayAnswer, ReplayRead
from subgate.storage.models import JournalMessage
from tests.storage.test_journal import Journal, new_message


def _poison(engine: Engine) -> tuple[str, int]:
    """A bookmark the store cannot bind: SQLite has no integer above 2^63 - 1, PostgreSQL no text with U+0000."""
    return ("p", 2**63) if engine.dialect.name == "sqlite" else ("p\x00q", 1)


def test_a_read_the_store_refuses_fails_alone_at_once_and_the_batch_commits(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    slept: list[float] = []
    monkeypatch.setattr("subgate.storage.journal.back_off", slept.append)  # the retry back-off
    journal = Journal(engine)
    answers: dict[str, Any] = {}
    writer = journal.writer
    for seq in (1, 2, 3):
        writer.submit_message(new_message(seq, "t"), f"m{seq}")
    writer.submit_read(ReplayRead("t", (_poison(engine),)), lambda r: answers.update(poison=r))
    writer.submit_read(ReplayRead("t", (("c1/snd", 2),)), lambda r: answers.update(good=r))
    for seq in (4, 5):
        writer.submit_message(new_message(seq, "t"), f"m{seq}")
    caplog.set_level(logging.WARNING, "subgate.journal")
    try:
        result = journal.start_and_sync()
        for token in result.tokens:
            if not isinstance(token, str):
                token(None)  # the reactor's side: a claimed ReadAnswer calls its token with what it read
    finally:
        writer.close(timeout=30)
    assert result.error is None and not result.failed
    assert {f"m{seq}" for seq in range(1, 6)} <= set(result.tokens)  # every message committed in this batch
    assert [row[0] for row in journal.rows(JournalMessage)] == [1, 2, 3, 4, 5]
    assert isinstance(answers["poison"], Exception) and "refused the read" in str(answers["poison"]), answers
    assert isinstance(answers["good"], ReplayAnswer) and answers["good"].found == {("c1/snd", 2): 2}
    assert not slept  # no back-off
    assert "commit failed" not in caplog.text  # not retried as a store outage
    assert caplog.text.count("ReadReplay failed by itself") == 1
