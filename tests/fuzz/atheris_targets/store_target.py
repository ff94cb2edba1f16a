"""atheris target: client values that become store query parameters, through the edge's checks into a real store.

The input's first byte picks a field, the rest (read as UTF-8, bad bytes kept as lone surrogates, the form a
decoder with ``surrogateescape`` hands on) is its text, and for a publisher identity the last 9 bytes are its seq
(up to 2^72, so both sides of 2^63). Each value goes through the check the server applies at the edge:

    0  a ``subgate-bookmark`` filter value        ``mapping.bookmarks.parse_replay``  -> ReadReplay
    1  a message's x-opt-publisher-id and seq     ``engine.duplicates.publisher_identity`` -> AppendMessage
    2  a subscription attach (link name, container-id, shared/global)  ``mapping.subscriptions.key_for``
                                                                      -> CreateSubscription, ReadBookmark
    3  a $management bookmark READ (name, client-id or global)  ``gateway.management.requested_key`` -> ReadBookmark
    4  a stored selector                          ``mapping.names.check_selector``    -> CreateSubscription
    5  a $management topic name                   ``mapping.names.stored_name_problem`` -> CreateNode
    6  a remove-with-session registration         ``mapping.store_values.check_registration`` -> RegisterRemoval

Contract checked: a check either refuses with ``Refused`` (``amqp:invalid-field``, a description naming the
field) or lets the value through, and a value it lets through is applied by the journal writer's own code
(``storage.applying.apply_batch``) on a real SQLite store without any error (each input's transaction is rolled
back, so the store stays small). A value the store cannot bind that got past a check is a finding.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import Engine

from subgate.engine.codec.types import ULong
from subgate.engine.duplicates import PUBLISHER_ID, PUBLISHER_SEQ, publisher_identity
from subgate.engine.records import BookmarkRead, NewMessage, ReplayRead, SubscriptionRecord
from subgate.gateway.management import requested_key
from subgate.mapping.bookmarks import Start, format_bookmark, parse_replay
from subgate.mapping.errors import INVALID_FIELD, Refused
from subgate.mapping.names import MAX_SELECTOR_LENGTH, check_selector, stored_name_problem
from subgate.mapping.store_values import check_registration
from subgate.mapping.subscriptions import Details, SubscribeRequest, key_for
from subgate.storage.applying import apply_batch
from subgate.storage.db import make_engine, upgrade
from subgate.storage.high_water import MarkLedger
from subgate.storage.operations import (
    AppendMessage,
    CreateNode,
    CreateSubscription,
    Operation,
    ReadBookmark,
    ReadReplay,
    RegisterRemoval,
)

INSTRUMENT = (
    "subgate.mapping.store_values",
    "subgate.mapping.bookmarks",
    "subgate.mapping.subscriptions",
    "subgate.mapping.names",
    "subgate.engine.duplicates",
)
MAX_LEN = 4096
FIELDS = 7
DICTIONARY = tuple(
    word.encode("utf-8", "surrogateescape")
    for word in (
        "|", "|1|", ",", "0", "0|1|", "20261202T120000", "99991231T235959", "00010101T000000", "9223372036854775807",
        "9223372036854775808", "18446744073709551615", "\x00", "\udcff", "é", "global", "shared", "|global",
        "'", " = ", "x" * 64,
    )
)  # fmt: skip

_engine: Engine | None = None


def seeds() -> list[bytes]:
    texts = [
        (0, "p|9223372036854775808|"), (0, "p|9223372036854775807|"), (0, "a|1|,b|2|"), (0, "20261202T101500"),
        (0, "0"), (0, "0|1|"), (0, "p\x00q|1|"), (1, "feed-1"), (2, "orders|global"), (3, "sub"), (4, "a = 'x'"),
        (5, "prices/fx"), (6, "remover"),
    ]  # fmt: skip
    return [bytes([field]) + text.encode("utf-8", "surrogateescape") + b"\x7f" * 9 for field, text in texts]


def test_one(data: bytes) -> None:
    if not data:
        return
    field, rest = data[0] % FIELDS, data[1:]
    text = rest.decode("utf-8", "surrogateescape")
    try:
        operations = _checked(field, text, rest)
    except Refused as refusal:
        assert refusal.condition == INVALID_FIELD and refusal.description, refusal
        return
    _apply(operations)


def _checked(field: int, text: str, raw: bytes) -> Sequence[Operation]:
    """The operations the server would submit for ``text`` as field ``field``, once its edge let it through.

    Raises:
        Refused: the edge's refusal.
    """
    if field == 0:
        request = parse_replay(text)
        bookmarks = tuple((b.publisher_id, b.seq) for b in request.bookmarks)
        at_ms = request.after_ms if request.start is Start.TIME else None
        return [ReadReplay(ReplayRead("t", bookmarks, at_ms), 1)]
    if field == 1:
        publisher_id = raw[:-9].decode("utf-8", "surrogateescape")
        seq = int.from_bytes(raw[-9:], "big")
        identity = publisher_identity({PUBLISHER_ID: publisher_id, PUBLISHER_SEQ: ULong(seq)})
        if identity is None:
            return []
        return [AppendMessage(_message(*identity), 1)]
    if field == 2:
        flags, name = raw[:1], text[1:]
        caps = frozenset(c for c, bit in (("shared", 1), ("global", 2)) if flags and flags[0] & bit)
        container_id, _, link_name = name.partition("\x1f")
        key = key_for(SubscribeRequest(link_name, container_id, True, caps, Details("t", None, False)))
        if key is None:
            return []
        return [_subscription(key.name, key.client_id, None), ReadBookmark(BookmarkRead(key.name, key.client_id), 1)]
    if field == 3:
        name, _, client_id = text.partition("\x1f")
        props: dict[str, object] = {"name": name, "client-id": client_id} if client_id else {"name": name}
        if not client_id:
            props["global"] = True
        key = requested_key(props)
        if isinstance(key, str):
            assert key  # a 400 with a reason
            return []
        return [ReadBookmark(BookmarkRead(key.name, key.client_id), 1)]
    if field == 4:
        selector = text[:MAX_SELECTOR_LENGTH] or None
        check_selector(selector, MAX_SELECTOR_LENGTH)
        return [_subscription("s", "c", selector)]
    if field == 5:
        problem = stored_name_problem("'name'", text)
        if problem is not None:
            raise Refused(INVALID_FIELD, problem)
        return [CreateNode(1, text, "topic", True, False)]
    container_id, _, link_name = text.partition("\x1f")
    check_registration(container_id, link_name)
    return [RegisterRemoval(1, "b", container_id or None, link_name)]


def _message(publisher_id: str, seq: int) -> NewMessage:
    bookmark = format_bookmark(publisher_id, seq)
    return NewMessage(1, "t", "topic", publisher_id, seq, bookmark, 0, None, None, True, 4, b"x", tracked=True)


def _subscription(name: str, client_id: str | None, selector: str | None) -> CreateSubscription:
    return CreateSubscription(SubscriptionRecord(1, "durable", True, client_id, name, "t", selector, False, 0, None, 0))


def _apply(operations: Sequence[Operation]) -> None:
    """Apply ``operations`` as the journal writer does, in a transaction rolled back afterwards."""
    if not operations:
        return
    ledger = MarkLedger()
    with _store().connect() as conn:
        transaction = conn.begin()
        try:
            apply_batch(conn, operations, ledger)
        finally:
            transaction.rollback()
            ledger.abandoned()


def _store() -> Engine:
    """A migrated SQLite store in a directory of its own, made once per process."""
    global _engine
    if _engine is None:
        directory = Path(tempfile.mkdtemp(prefix="subgate-atheris-store-"))
        atexit.register(shutil.rmtree, directory, True)
        url = f"sqlite:///{directory / 'subgate.db'}"
        upgrade(url)
        _engine = make_engine(url)
    return _engine
