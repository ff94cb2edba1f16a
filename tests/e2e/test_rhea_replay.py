"""Bookmarks, replay and duplicate detection driven by the Node.js client rhea (design.md §3), on both stores.

rhea numbers its messages with ``x-opt-publisher-id``/``x-opt-publisher-seq``, re-sends some (accepted, not
journaled again), and replays through the ``subgate-bookmark`` filter from EPOCH, after a bookmark and after a
list; a malformed value is refused at the attach with ``amqp:invalid-field``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import STORES
from tests.support.rhea import RheaError, messages_of, run_rhea, summary_of
from tests.support.server import SubgateProcess, module_server

pytestmark = pytest.mark.interop


@pytest.fixture(scope="module", params=STORES)
def shared_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SubgateProcess]:
    with module_server(request, tmp_path_factory, "rhea-replay", request.param) as server:
        yield server


def publish(url: str, topic: str, publisher: str, first: int, count: int) -> dict[str, Any]:
    """``count`` messages numbered ``first``... by ``publisher`` (one rhea process per message: each its seq)."""
    summary: dict[str, Any] = {"accepted": 0}
    for seq in range(first, first + count):
        lines = run_rhea(
            "send", "--url", url, "--address", topic, "--capability", "topic", "--durable",
            "--body", f"m{seq}",
            "--annotation", f'x-opt-publisher-id="{publisher}"',
            "--annotation", f"x-opt-publisher-seq={seq}",
        )  # fmt: skip
        summary["accepted"] += summary_of(lines)["accepted"]
    return summary


def replay(url: str, topic: str, value: str, count: int) -> list[dict[str, Any]]:
    lines = run_rhea(
        "receive", "--url", url, "--address", topic, "--capability", "topic", "--bookmark", value, "--count", count
    )
    assert summary_of(lines)["received"] == count
    return messages_of(lines)


def nothing_more(url: str, topic: str, value: str) -> bool:
    lines = run_rhea(
        "receive", "--url", url, "--address", topic, "--capability", "topic", "--bookmark", value,
        "--count", 1, "--timeout", 1.5, check=False,
    )  # fmt: skip
    errors = [line["error"]["condition"] for line in lines if isinstance(line.get("error"), dict)]
    return not messages_of(lines) and errors == ["timeout"]


def test_rhea_publishes_numbered_messages_resends_and_replays_them(broker, uid):
    topic = f"rhea/replay/{uid}"
    publisher = f"rhea-feed-{uid}"
    assert publish(broker.url, topic, publisher, 1, 5)["accepted"] == 5
    assert publish(broker.url, topic, publisher, 4, 2)["accepted"] == 2  # duplicates: accepted, not kept
    everything = replay(broker.url, topic, "0", 5)
    assert [m["body"] for m in everything] == ["m1", "m2", "m3", "m4", "m5"]
    assert [m["message_annotations"]["x-opt-bookmark"] for m in everything] == [
        f"{publisher}|{seq}|" for seq in range(1, 6)
    ]
    assert nothing_more(broker.url, topic, f"{publisher}|5|")
    after_three = replay(broker.url, topic, f"{publisher}|3|", 2)
    assert [m["body"] for m in after_three] == ["m4", "m5"]
    listed = replay(broker.url, topic, f"{publisher}|4|,{publisher}|2|", 2)
    assert [m["body"] for m in listed] == ["m3", "m5"]


def test_rhea_gets_invalid_field_for_a_malformed_bookmark(broker, uid):
    with pytest.raises(RheaError) as refused:
        run_rhea(
            "receive", "--url", broker.url, "--address", f"rhea/bad/{uid}", "--capability", "topic",
            "--bookmark", "not-a-bookmark", "--timeout", 5,
        )  # fmt: skip
    assert refused.value.condition == "amqp:invalid-field"
    assert "'not-a-bookmark'" in (refused.value.error or {}).get("description", "")
