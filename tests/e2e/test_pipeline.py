"""``subgate pipeline lag`` and ``audit`` on what a real server journaled, on SQLite and PostgreSQL.

Real publishers number their messages (``x-opt-publisher-id``/``seq``): ``feed-gap`` skips seqs 4 and 5,
``feed-resend`` re-sends 3..5 (the server drops the re-sends), and a plain sender to a queue is numbered by the
server. A durable subscriber accepts some messages out of order and holds the rest, a global shared durable
subscription takes nothing, and a queue consumer accepts two of four. Once the store holds those positions, the
commands run (in this process, on the test run's shared SparkSession; and once as a child process with its own
Spark) and their JSON is compared whole with what was published and accepted; then the journal is exported to
Parquet and lag and audit from the export give the same answer, and the HTML report, opened in headless
Chromium, shows its charts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from click.testing import CliRunner
from proton import Delivery, Message, symbol, ulong
from proton.reactor import Copy, DurableSubscription
from proton.utils import BlockingConnection, BlockingReceiver

from subgate.cli.main import main
from subgate.storage.db import make_engine
from subgate.storage.models import JournalMessage
from tests.support.amqp import Capabilities, SharedDurable, connect, receiver, sender
from tests.support.cli import run_subgate
from tests.support.png import pixels
from tests.support.polling import eventually

TOPIC = "pl/prices"
QUEUE = "pl-jobs"
PUBLISHER_ID = symbol("x-opt-publisher-id")
PUBLISHER_SEQ = symbol("x-opt-publisher-seq")
ACCEPTED = (0, 1, 2, 5, 7, 10)  # of the subscriber's 11 deliveries, in this order: 5 and 7 before 3, 4, 6
ACCEPT_ORDER = (7, 1, 10, 0, 5, 2)


def numbered(publisher: str, seq: int) -> Message:
    return Message(
        body=f"{publisher}-{seq}", durable=True, annotations={PUBLISHER_ID: publisher, PUBLISHER_SEQ: ulong(seq)}
    )


def accept_some(conn: BlockingConnection, rcv: BlockingReceiver, count: int, order: tuple[int, ...]) -> None:
    """Receive ``count`` deliveries, then accept those at the positions ``order`` (in that order); the rest stay
    unsettled (held) while the connection lives."""
    for _ in range(count):
        rcv.receive(timeout=10)
    deliveries: list[Delivery] = list(rcv.fetcher.unsettled)
    for index in order:
        deliveries[index].update(Delivery.ACCEPTED)
        deliveries[index].settle()
        rcv.fetcher.unsettled.remove(deliveries[index])
    conn.wait(lambda: conn.conn.transport is None or conn.conn.transport.pending() <= 0, timeout=10)


def store_backlogs(url: str) -> dict[str, int]:
    """Each cursor's backlog as the store holds it (persistent rows above its mark and not in its acks)."""
    query = sa.text(
        "SELECT c.owner, count(m.id) FROM ack_cursors c LEFT JOIN messages m ON m.address = c.address "
        "AND m.id > c.low_water AND m.durable AND m.id NOT IN (SELECT message_id FROM acks a WHERE a.cursor_id = c.id) "
        "GROUP BY c.owner"
    )
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return {owner: count for owner, count in conn.execute(query)}
    finally:
        engine.dispose()


def journal(url: str) -> list[dict[str, Any]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            m = JournalMessage
            rows = conn.execute(sa.select(m.id, m.address, m.publisher_id, m.publisher_seq, m.ts).order_by(m.id))
            return [dict(row._mapping) for row in rows]
    finally:
        engine.dispose()


def pipeline_json(*args: str) -> Any:
    result = CliRunner().invoke(main, ["pipeline", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def publish_pattern(url: str) -> tuple[BlockingConnection, list[Any]]:
    """The publishers, subscribers and accepts of the module docstring; the connections holding deliveries stay
    open (returned) so that what they hold stays in their backlogs."""
    app1 = connect(url, container_id="app1")
    sub = app1.create_receiver(TOPIC, name="s-accept", options=[DurableSubscription(), Copy(), Capabilities("topic")])
    app1.create_receiver(TOPIC, name="s-idle", options=[SharedDurable()])
    publishers = connect(url, container_id="publishers")
    to_topic = sender(publishers, TOPIC, "topic")
    for seq in (1, 2, 3, 6, 7):
        to_topic.send(numbered("feed-gap", seq))
    for seq in (1, 2, 3, 4, 5, 3, 4, 5, 6):
        to_topic.send(numbered("feed-resend", seq))
    jobs = sender(publishers, QUEUE, "queue")
    for number in range(4):
        jobs.send(Message(body=f"job-{number}", durable=True))
    accept_some(app1, sub, 11, ACCEPT_ORDER)
    worker = connect(url, container_id="worker")
    accept_some(worker, receiver(worker, QUEUE, "queue", credit=4), 4, (3, 1))
    return [app1, worker], [publishers, jobs.link.name]


def test_lag_and_audit_on_what_a_server_journaled(make_server, store_url, spark, tmp_path):
    server = make_server(store_url)
    holding, (publishers, jobs_link) = publish_pattern(server.url)
    expected_backlogs = {"app1.s-accept": 5, "s-idle": 11, QUEUE: 2}
    eventually(
        lambda: (
            {k: v for k, v in store_backlogs(store_url).items() if k in expected_backlogs} == expected_backlogs
            or store_backlogs(store_url)
        ),
        what="the accepts in the store",
    )
    rows = journal(store_url)
    topic_rows = [r for r in rows if r["address"] == TOPIC]
    assert [(r["publisher_id"], r["publisher_seq"]) for r in topic_rows] == [
        *[("feed-gap", s) for s in (1, 2, 3, 6, 7)],
        *[("feed-resend", s) for s in (1, 2, 3, 4, 5, 6)],
    ]
    held = [r for i, r in enumerate(topic_rows) if i not in ACCEPTED]

    before = datetime.now(UTC)
    lag = pipeline_json("lag", "--store", store_url)
    after = datetime.now(UTC)
    ages = [row.pop("oldest_unaccepted_age_s") for row in lag]
    assert [row.pop("low_water") >= 0 for row in lag] == [True] * 3
    assert lag == [
        {"kind": "queue", "name": QUEUE, "client_id": None, "topic": QUEUE, "subscription_kind": None,
         "backlog": 2, "in_last_hour": 4, "out_last_hour": 2},
        {"kind": "subscription", "name": "s-accept", "client_id": "app1", "topic": TOPIC,
         "subscription_kind": "durable", "backlog": 5, "in_last_hour": 11, "out_last_hour": 6},
        {"kind": "subscription", "name": "s-idle", "client_id": None, "topic": TOPIC,
         "subscription_kind": "shared-durable", "backlog": 11, "in_last_hour": 11, "out_last_hour": 0},
    ]  # fmt: skip
    queue_rows = [r for r in rows if r["address"] == QUEUE]
    oldest = [queue_rows[0]["ts"], held[0]["ts"], topic_rows[0]["ts"]]
    for age, ts in zip(ages, oldest, strict=True):
        ts = ts if ts.tzinfo else ts.replace(tzinfo=UTC)  # SQLite gives its UTC times back naive
        assert (before - ts).total_seconds() <= age <= (after - ts).total_seconds()

    audit = pipeline_json("audit", "--store", store_url)
    jobs_id = f"publishers/{jobs_link}"
    assert audit == [
        {"publisher_id": "feed-gap", "numbered": "publisher", "count": 5, "first_seq": 1, "last_seq": 7,
         "gaps": [[4, 5]], "duplicates": 0, "out_of_order": 0, "gap_bookmarks": [["feed-gap|3|", "feed-gap|6|"]]},
        {"publisher_id": "feed-resend", "numbered": "publisher", "count": 6, "first_seq": 1, "last_seq": 6,
         "gaps": [], "duplicates": 0, "out_of_order": 0, "gap_bookmarks": []},
        {"publisher_id": jobs_id, "numbered": "server", "count": 4, "first_seq": queue_rows[0]["id"],
         "last_seq": queue_rows[-1]["id"], "gaps": [], "duplicates": 0, "out_of_order": 0, "gap_bookmarks": []},
    ]  # fmt: skip
    exported = pipeline_json("export", "--store", store_url, "--out", str(tmp_path / "export"))
    assert (exported["rows"], exported["from_id"], exported["to_id"]) == (len(rows), rows[0]["id"], rows[-1]["id"])
    parquet = ("--store", store_url, "--from-parquet", str(tmp_path / "export"))
    from_parquet = pipeline_json("lag", *parquet)
    for row in from_parquet:
        assert row.pop("oldest_unaccepted_age_s") is not None and row.pop("low_water") >= 0
    assert from_parquet == lag
    assert pipeline_json("audit", *parquet) == audit

    table = CliRunner().invoke(main, ["pipeline", "audit", "--store", store_url], catch_exceptions=False)
    assert table.exit_code == 0, table.output
    lines = [line.split() for line in table.stdout.splitlines()]
    assert ["feed-gap", "publisher", "5", "1", "7", "4..5", "0", "0"] in lines
    if store_url.startswith("sqlite"):  # once, the command as an operator runs it: its own Spark, stdout only JSON
        child = run_subgate("pipeline", "audit", "--json", "--store", store_url, cwd=tmp_path, timeout=240)
        assert child.returncode == 0, child.stderr
        assert json.loads(child.stdout) == audit
        check_report(store_url, tmp_path / "report")
    for conn in [*holding, publishers]:
        conn.close()


BAR_COLOURS = {"backlog": (0x3B, 0x6F, 0xB6), "gaps": (0xC2, 0x54, 0x2D), "volume": (0x4B, 0x9A, 0x5F)}


def check_report(store_url: str, out: Path) -> None:
    """``report`` writes one self-contained page; headless Chromium's screenshot of it shows each chart's bars."""
    made = pipeline_json("report", "--store", store_url, "--out", str(out))
    page = Path(made["path"]).read_text()
    assert "<script" not in page and "http://" not in page and "https://" not in page  # nothing fetched
    for title in ("Backlog per subscription and queue", "Missing seqs (gaps) per publisher", "Journal rows per topic"):
        assert title in page
    assert page.count("<svg") == 5 and "app1/s-accept on pl/prices" in page and "feed-gap|3|" in page
    shot = out / "report.png"
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser, "headless Chromium is needed (scripts/install-test-deps installs the Debian package chromium)"
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={out / 'chromium'}",
         "--window-size=1100,1600", f"--screenshot={shot}", Path(made["path"]).as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    seen = pixels(shot)
    for chart, colour in BAR_COLOURS.items():
        assert seen[colour] > 500, f"the {chart} chart's bars are not in the screenshot"


def test_lag_of_a_durable_subscription_on_a_topic_selector(make_server, sqlite_url, spark):
    """Its backlog is every row of the topics its selector matches, not only of its cursor's path prefix."""
    from tests.support.jms import DURABLE, TOPIC, JmsWire

    server = make_server(sqlite_url)
    with JmsWire.connect(server.address, client_id="sel-app") as jms:
        assert jms.session().consumer("?plsel/.*", DURABLE, name="s").detach() is None
        session = jms.session()
        for topic in ("plsel/eu", "other/x", "plsel/us", "plsel", "plsel/eu/deeper"):
            session.producer(topic, TOPIC).send(f"to {topic}")
    lag = pipeline_json("lag", "--store", sqlite_url)
    assert [(r["kind"], r["name"], r["client_id"], r["topic"], r["backlog"], r["in_last_hour"]) for r in lag] == [
        ("subscription", "s", "sel-app", "?plsel/.*", 2, 2)  # eu and us: one pattern per segment (docs/topics.md)
    ]
