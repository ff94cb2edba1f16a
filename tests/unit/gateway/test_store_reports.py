"""gateway.store_reports over the in-memory pair: ``$management`` types ``bookmark`` and ``journal`` are answered
from the store, so the request goes to the journal (``submit_read``) and the reply goes out only when the read's
token comes back on the reactor; nothing is answered synchronously from memory."""

from __future__ import annotations

from typing import Any

from proton import Link, Message

from subgate.engine.records import (
    Bookmark,
    BookmarkRead,
    BranchFigures,
    JournalEnd,
    JournalFigures,
    JournalPosition,
    JournalStats,
    JournalStatsRead,
    SubscriptionRecord,
)
from tests.unit.gateway.pair import Pair

T0 = 1_790_000_000_123


def management(pair: Pair) -> tuple[Link, Link, str]:
    """A request sender to $management and a dynamic reply receiver with credit."""
    reply = pair.session.receiver("reply")
    reply.source.dynamic = True
    reply.open()
    reply.flow(10)
    pair.pump()
    return pair.sender("$management", name="mgmt"), reply, reply.remote_source.address


def ask(pair: Pair, sender: Link, reply_to: str, type_: str, **properties: Any) -> None:
    request = Message(id="req-1", reply_to=reply_to, properties={"operation": "READ", "type": type_, **properties})
    sender.delivery(b"r")
    sender.send(request.encode())
    sender.advance()
    pair.pump()


def responses(link: Link) -> list[Message]:
    out = []
    while link.current is not None and not link.current.partial:
        message = Message()
        message.decode(link.recv(link.current.pending))
        link.advance()
        out.append(message)
    return out


def submitted_reads(pair: Pair) -> list[tuple[Any, Any]]:
    return [(call[1], call[2]) for call in pair.journal.calls if call[0] == "submit_read"]


def record(kind: str = "durable", topic: str = "prices") -> SubscriptionRecord:
    return SubscriptionRecord(7, kind, kind != "shared-volatile", "app1", "sub1", topic, None, False, 1, 3, T0)


def test_a_bookmark_read_is_answered_when_the_store_answers_not_before():
    pair = Pair()
    sender, reply, address = management(pair)
    ask(pair, sender, address, "bookmark", name="sub1", **{"client-id": "app1"})
    ((read, token),) = submitted_reads(pair)
    assert read == BookmarkRead("sub1", "app1", non_durable_after=0)
    assert responses(reply) == []  # nothing yet: the reactor did not wait for the store

    token(Bookmark(record(), JournalPosition(12, 3, 20, 5)))
    pair.pump()
    (response,) = responses(reply)
    assert response.correlation_id == "req-1"
    assert response.properties["statusCode"] == 200
    assert response.body == {
        "name": "sub1",
        "client_id": "app1",
        "topic": "prices",
        "kind": "durable",
        "low_water": 12,
        "accepted_above": 3,
        "highest_accepted": 20,
        "backlog": 5,
    }


def test_missing_and_cursorless_subscriptions_are_404_with_the_reason():
    pair = Pair()
    sender, reply, address = management(pair)
    ask(pair, sender, address, "bookmark", name="sub1", **{"client-id": "app1"})
    ask(pair, sender, address, "bookmark", name="vol", **{"global": True})
    (_, missing), (read, cursorless) = submitted_reads(pair)
    assert read == BookmarkRead("vol", None, 0)
    missing(None)
    cursorless(Bookmark(record("shared-volatile"), None))
    pair.pump()
    first, second = responses(reply)
    assert (first.properties["statusCode"], first.properties["statusDescription"]) == (
        404,
        "no subscription 'sub1' of client-id 'app1'",
    )
    assert second.properties["statusCode"] == 404
    assert "is shared-volatile, not durable: it has no journal cursor" in second.properties["statusDescription"]


def test_a_bookmark_on_another_connections_temporary_topic_is_403():
    pair = Pair()
    sender, reply, address = management(pair)
    ask(pair, sender, address, "bookmark", name="sub1", **{"client-id": "app1"})
    ((_, token),) = submitted_reads(pair)
    token(Bookmark(record(topic="$temp.topic.0f"), JournalPosition(0, 0, None, 0)))
    pair.pump()
    (response,) = responses(reply)
    assert response.properties["statusCode"] == 403


def test_bad_requests_are_answered_at_once_without_a_read():
    pair = Pair()
    sender, reply, address = management(pair)
    ask(pair, sender, address, "bookmark", name="sub1")  # no scope
    ask(pair, sender, address, "journal", operation="QUERY")
    assert submitted_reads(pair) == []
    scope, operation = responses(reply)
    assert scope.properties["statusCode"] == 400
    assert operation.properties["statusCode"] == 501


def test_journal_figures_and_a_failed_read():
    pair = Pair()
    sender, reply, address = management(pair)
    ask(pair, sender, address, "journal")
    ask(pair, sender, address, "journal")
    (read, token), (_, failing) = submitted_reads(pair)
    assert read == JournalStatsRead()
    figures = JournalFigures(2, 30, JournalEnd(1, T0), JournalEnd(2, T0 + 5))
    token(JournalStats(figures, (BranchFigures("prices", "topic", figures),)))
    failing(RuntimeError("disk on fire"))
    pair.pump()
    ok, failed = responses(reply)
    ends = {"oldest": {"id": 1, "ts": T0}, "newest": {"id": 2, "ts": T0 + 5}}
    assert ok.properties["statusCode"] == 200
    assert ok.body == {
        "rows": 2,
        "bytes": 30,
        **ends,
        "branches": [{"branch": "prices", "kind": "topic", "rows": 2, "bytes": 30, **ends}],
    }
    assert failed.properties["statusCode"] == 500
    assert "disk on fire" in failed.properties["statusDescription"]


def test_an_answer_after_the_reply_link_went_away_is_dropped():
    pair = Pair()
    sender, reply, address = management(pair)
    ask(pair, sender, address, "journal")
    ((_, token),) = submitted_reads(pair)
    reply.close()
    pair.pump()
    assert pair.router.node(address) is None
    token(JournalStats(JournalFigures(0, 0, None, None), ()))  # no node at reply-to: logged and dropped
    pair.pump()
