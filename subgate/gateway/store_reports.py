"""Management reads answered from the store over ``$management``: types ``bookmark`` and ``journal``.

Owns the request/response contract of these two types (``subscription`` is ``gateway.management``'s, ``topic``
and ``permissions`` are ``gateway.topic_admin``'s):

Type ``bookmark``
    ``READ`` (``name`` plus ``client-id``, or ``global`` = true): one map: ``name``, ``client_id`` (null for a
    global subscription), ``topic``, ``kind``, ``low_water``, ``accepted_above`` (the cursor's ``acks`` rows),
    ``highest_accepted`` (the highest of them, or null), ``backlog`` (journal rows of the topic above the
    low-water mark not acked, before the selector). 200; 404 when there is no such subscription or it has no
    journal cursor (a shared-volatile one); 403 when it is on a temporary topic of another connection; 400 for a
    request without ``name`` or scope.
Type ``journal``
    ``READ``: one map: ``rows``, ``bytes``, ``oldest`` and ``newest`` (each ``{id, ts}``, ``ts`` in ms since the
    epoch, or null for an empty journal), and ``branches``: a list of maps with ``branch``, ``kind`` and the same
    four figures (``storage.journal_stats.branch_of``). 200.

The answers come from the store, and the reactor thread never waits on the store: ``handle`` hands the read to
the journal writer (``JournalPort.submit_read``), which runs it (``storage.journal_stats``, the queries the
offline commands run too) once everything submitted before it is committed. The result comes back on the
reactor thread (``gateway.completions``) to the read's token, an ``_Answer``, which sends the response through
the ``reply`` it was given. So the answer is what the store holds: acks submitted before the request are in it,
but a cursor's low-water mark is written by the housekeeping pass, about once a second, and may lag the running
server by that much (then the acks below the server's mark still count in ``accepted_above``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from subgate.engine.ports import JournalPort
from subgate.engine.records import Bookmark, BookmarkRead, JournalEnd, JournalFigures, JournalStats, JournalStatsRead
from subgate.gateway.management import Request, Response, foreign_topic, requested_key
from subgate.storage.journal_stats import missing_bookmark
from subgate.storage.subscription_admin import describe

log = logging.getLogger("subgate.management")

BOOKMARK_TYPE = "bookmark"
JOURNAL_TYPE = "journal"
STORE_TYPES = (BOOKMARK_TYPE, JOURNAL_TYPE)

Reply = Callable[[Response], None]


class _Answer:
    """The token of one read: comes back on the reactor thread with what the store answered (or the error) and
    sends the response. Nothing it does may escape: other tokens of the same journal result come after it."""

    __slots__ = ("reply", "respond")

    def __init__(self, reply: Reply, respond: Callable[[Any], Response]) -> None:
        self.reply = reply
        self.respond = respond

    def __call__(self, outcome: object) -> None:
        try:
            if isinstance(outcome, BaseException):
                log.warning("management read of the store failed: %s", outcome)
                response = Response(500, f"the store could not be read: {outcome}")
            else:
                response = self.respond(outcome)
            self.reply(response)
        except Exception:
            log.exception("management answer from the store failed")


class StoreReports:
    """Answers ``bookmark`` and ``journal`` requests through the journal writer (see the module docstring).

    Args:
        journal: where reads are submitted.
        non_durable_after: the journal's end at start-up (0 with ``--journal-non-persistent``): rows with
            ``durable = false`` at or below it did not survive the restart and are not in any backlog.
    """

    def __init__(self, journal: JournalPort, non_durable_after: int) -> None:
        self._journal = journal
        self._non_durable_after = non_durable_after

    def handle(self, request: Request, owns: Callable[[str], bool], reply: Reply) -> Response | None:
        """A response now (a request refused before any read), or None: ``reply`` gets it once the store has
        answered. ``owns(address)`` says whether the asking connection made the temporary node at ``address``."""
        if request.operation != "READ":
            return Response(501, f"unknown operation {request.operation!r} for type {request.type!r}")
        if request.type == JOURNAL_TYPE:
            self._journal.submit_read(JournalStatsRead(), _Answer(reply, _stats_response))
            return None
        key = requested_key(request.properties)
        if isinstance(key, str):
            return Response(400, key)
        read = BookmarkRead(key.name, key.client_id, self._non_durable_after)
        self._journal.submit_read(read, _Answer(reply, lambda found: _bookmark_response(found, read, owns)))
        return None


def _bookmark_response(bookmark: Bookmark | None, read: BookmarkRead, owns: Callable[[str], bool]) -> Response:
    if bookmark is not None and foreign_topic(bookmark.subscription.topic, owns):
        return Response(403, f"{describe(read.name, read.client_id)} is on a temporary topic of another connection")
    missing = missing_bookmark(bookmark, read.name, read.client_id)
    if missing is not None or bookmark is None:
        return Response(404, missing or "")
    return Response(200, "OK", bookmark_map(bookmark))


def _stats_response(stats: JournalStats) -> Response:
    return Response(200, "OK", stats_map(stats))


def bookmark_map(bookmark: Bookmark) -> dict[str, Any]:
    """A bookmark with a journal position as the READ answer's map."""
    sub, position = bookmark.subscription, bookmark.position
    assert position is not None
    return {
        "name": sub.name,
        "client_id": sub.client_id,
        "topic": sub.topic,
        "kind": sub.kind,
        "low_water": position.low_water,
        "accepted_above": position.accepted_above,
        "highest_accepted": position.highest_accepted,
        "backlog": position.backlog,
    }


def stats_map(stats: JournalStats) -> dict[str, Any]:
    """The journal's figures as the READ answer's map."""
    branches = [{"branch": b.branch, "kind": b.kind, **_figures_map(b.figures)} for b in stats.branches]
    return {**_figures_map(stats.total), "branches": branches}


def _figures_map(figures: JournalFigures) -> dict[str, Any]:
    return {
        "rows": figures.rows,
        "bytes": figures.bytes,
        "oldest": _end_map(figures.oldest),
        "newest": _end_map(figures.newest),
    }


def _end_map(end: JournalEnd | None) -> dict[str, int] | None:
    return None if end is None else {"id": end.id, "ts": end.ts_ms}
