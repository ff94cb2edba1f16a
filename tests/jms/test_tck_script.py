"""scripts/tck's pieces that decide its figures: the administered objects it writes, how it reads JUnit's reports,
and the reset before each TCK test method, which must leave a real server as a fresh store would."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from proton import Endpoint

from tests.support.jms import DURABLE, QUEUE, TOPIC, JmsWire

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "tck"


@pytest.fixture(scope="module")
def tck() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("subgate_tck_script", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module
    loader.exec_module(module)
    return module


def test_jndi_properties_name_the_official_objects_with_the_client_options(tck):
    text = tck.jndi_properties("amqp://127.0.0.1:5", "jms.prefetchPolicy.all=0")
    entries = dict(line.split("=", 1) for line in text.splitlines())
    assert entries["java.naming.factory.initial"] == "org.apache.qpid.jms.jndi.JmsInitialContextFactory"
    for name in ("MyConnectionFactory", "MyQueueConnectionFactory", "MyTopicConnectionFactory"):
        assert entries[f"connectionfactory.{name}"] == "amqp://127.0.0.1:5?jms.prefetchPolicy.all=0"
    durable = entries["connectionfactory.DURABLE_SUB_CONNECTION_FACTORY"]
    assert durable == "amqp://127.0.0.1:5?jms.clientID=cts&jms.prefetchPolicy.all=0"
    queues = {k.removeprefix("queue.") for k in entries if k.startswith("queue.")}
    topics = {k.removeprefix("topic.") for k in entries if k.startswith("topic.")}
    assert queues == {"MY_QUEUE", "MY_QUEUE2", "testQ0", "testQ1", "testQ2", "testQueue2", "Q2"}
    assert topics == {"MY_TOPIC", "MY_TOPIC2", "testT0", "testT1", "testT2"}
    plain = dict(line.split("=", 1) for line in tck.jndi_properties("amqp://h:1", "").splitlines())
    assert plain["connectionfactory.MyConnectionFactory"] == "amqp://h:1"
    assert plain["connectionfactory.DURABLE_SUB_CONNECTION_FACTORY"] == "amqp://h:1?jms.clientID=cts"


def test_a_report_counts_failures_errors_and_skips_as_failed_and_no_report_as_a_failure(tck, tmp_path):
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "TEST-junit-jupiter.xml").write_text(
        """<testsuite>
        <testcase classname="a.ClientIT" name="ok()"/>
        <testcase classname="a.ClientIT" name="bad()"><failure message="boom">x
Caused by: java.lang.Exception: Did not receive TextMessage
</failure></testcase>
        <testcase classname="a.ClientIT" name="err()"><error message="timed out"/></testcase>
        <testcase classname="a.ClientIT" name="skip()"><skipped message="disabled"/></testcase>
        </testsuite>"""
    )
    result = tck.read_report("a.ClientIT", reports)
    assert result["passed"] == ["a.ClientIT.ok"]
    assert [f["test"] for f in result["failed"]] == ["a.ClientIT.bad", "a.ClientIT.err", "a.ClientIT.skip"]
    assert result["failed"][0]["reason"] == "boom Caused by: java.lang.Exception: Did not receive TextMessage"
    empty = tck.read_report("b.ClientIT", tmp_path / "none")
    assert empty["passed"] == [] and empty["failed"][0]["test"] == "b.ClientIT"


def test_fresh_state_closes_leftover_connections_removes_durable_subscriptions_and_purges_queues(tck, subgate_start):
    server = subgate_start("--allow-anonymous")
    tck.seed_store(server.info["store"])
    host, port = server.info["host"], server.info["port"]
    address = f"{host}:{port}"
    leftover = JmsWire.connect(address, client_id="cts", user="j2ee", password="j2ee")
    try:
        session = leftover.session()
        subscriber = session.consumer("MY_TOPIC", DURABLE, name="TxTopicTestSubscription")
        subscriber.detach()  # inactive: it keeps what is published from now on
        session.producer("MY_TOPIC", TOPIC).send("left in the subscription")
        queue = session.producer("MY_QUEUE", QUEUE)
        queue.send("left in the queue 1")
        queue.send("left in the queue 2")

        account = tck.fresh_state(host, port)

        assert account.startswith("closed 1 connections, removed 1 durable subscriptions, purged 2 messages")
        closed = Endpoint.REMOTE_CLOSED
        leftover.pump(lambda: leftover.socket_closed or leftover.connection.state & closed, 30, "the close")
    finally:
        leftover.close()
    with JmsWire.connect(address, client_id="cts", user="j2ee", password="j2ee") as jms:
        session = jms.session()
        again = session.consumer("MY_TOPIC", DURABLE, name="TxTopicTestSubscription")
        assert again.drain() == 0  # a new subscription: nothing of the removed one
        consumer = session.consumer("MY_QUEUE", QUEUE)
        assert consumer.drain() == 0
        again.detach()
        jms.unsubscribe("TxTopicTestSubscription")
    assert tck.fresh_state(host, port) == "closed 0 connections, removed 0 durable subscriptions, purged 0 messages"
