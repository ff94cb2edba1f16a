"""Artemis wildcard addresses (``news.#``, ``news.*.eu``): refused with the Diffusion form by default, read as that
Diffusion selector with ``--artemis-wildcards``, never created as a node (mapping.wildcards, docs/jms.md).

Driven by the Qpid JMS client's wire behaviour (tests/support/jms) and by rhea, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import pytest
from click.testing import CliRunner

from subgate.cli.main import main
from tests.support.amqp import connect, nothing_arrives, receive_bodies, receiver, send_all, sender
from tests.support.jms import QUEUE, TOPIC, JmsWire, LinkRefused
from tests.support.rhea import messages_of, run_rhea

INVALID_FIELD = "amqp:invalid-field"


def topic_names(server) -> list[str]:
    result = CliRunner().invoke(main, ["topics", "tree", "--json", "--server", server.address], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return [topic["path"] for topic in json.loads(result.output)["topics"]]


def test_by_default_a_wildcard_consumer_is_refused_with_the_diffusion_form_and_nothing_is_created(
    make_server, store_url
):
    server = make_server(store_url)
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        with pytest.raises(LinkRefused) as refused:
            session.consumer("news.#", TOPIC)
        assert refused.value.condition == INVALID_FIELD
        assert "'news.#'" in refused.value.description
        assert '"*news(?:\\.[^/]*)?"' in refused.value.description  # the selector to use instead
        for address, kind in (("news.*.eu", TOPIC), ("news.#", QUEUE)):
            with pytest.raises(LinkRefused) as producer_refused:
                session.producer(address, kind)
            assert producer_refused.value.condition == INVALID_FIELD
        with pytest.raises(LinkRefused) as queue_refused:
            session.consumer("orders.*", QUEUE)
        assert queue_refused.value.condition == INVALID_FIELD
    assert not [name for name in topic_names(server) if "#" in name or "*" in name]


def test_with_artemis_wildcards_a_jms_topic_consumer_gets_what_the_wildcard_matches(make_server, store_url):
    server = make_server(store_url, "--artemis-wildcards")
    with JmsWire.connect(server.address) as jms:
        session = jms.session()
        everything = session.consumer("news.#", TOPIC)
        one_level = session.consumer("news.*", TOPIC)
        sport = session.consumer("news.*.sport", TOPIC)
        for topic in ("news", "news.eu", "news.eu.sport", "news.usa.sport", "newsroom", "weather.eu"):
            session.producer(topic, TOPIC).send(topic)
        got = {
            name: sorted(consumer.receive().accept().body for _ in range(count))
            for name, consumer, count in (("all", everything, 4), ("one", one_level, 1), ("sport", sport, 2))
        }
        assert got == {
            "all": ["news", "news.eu", "news.eu.sport", "news.usa.sport"],
            "one": ["news.eu"],
            "sport": ["news.eu.sport", "news.usa.sport"],
        }
        for consumer in (everything, one_level, sport):
            consumer.drain()
            assert consumer.take_buffered() == []
        with pytest.raises(LinkRefused) as refused:
            session.producer("news.#", TOPIC)  # still never a node
        assert refused.value.condition == INVALID_FIELD


def test_a_configured_delimiter(make_server):
    server = make_server(None, "--artemis-wildcards", "--wildcard-delimiter", "-")
    conn = connect(server.url)
    sub = receiver(conn, "news-#", "topic", credit=10)
    for topic in ("news-eu", "news.eu", "news-eu-sport"):
        send_all(sender(conn, topic, "topic"), [topic])
    assert sorted(receive_bodies(sub, 2)) == ["news-eu", "news-eu-sport"]
    assert nothing_arrives(sub)
    conn.close()


@pytest.mark.interop
def test_rhea_is_refused_by_default_and_served_with_artemis_wildcards(make_server):
    plain = make_server(None)
    lines = run_rhea("receive", "--url", plain.url, "--address", "news.#", "--count", 1, "--timeout", 3, check=False)
    errors = [line["error"] for line in lines if "error" in line]
    assert errors and errors[0]["condition"] == INVALID_FIELD, lines
    translating = make_server(None, "--artemis-wildcards")
    conn = connect(translating.url)
    publisher = sender(conn, "news.eu", "topic")
    with ThreadPoolExecutor(max_workers=1) as pool:
        rhea = pool.submit(
            run_rhea, "receive", "--url", translating.url, "--address", "news.#", "--count", 2, "--timeout", 20,
            timeout=30,
        )  # fmt: skip
        # Publish until rhea's subscription has taken two: a topic keeps nothing for subscribers to come.
        for attempt in range(80):  # at most about 20 s
            send_all(publisher, [f"eu-{attempt}"])
            try:
                lines = rhea.result(timeout=0.25)
                break
            except FutureTimeout:
                continue
        else:
            lines = rhea.result(timeout=30)
    received = [m["body"] for m in messages_of(lines)]
    assert len(received) == 2 and all(body.startswith("eu-") for body in received), lines
    conn.close()
