"""The topic tree's control links driven by a client nobody here wrote: rhea (Node.js) as missing-topic handler,
as a subscriber held by a handler, and as a remove-with-session registration."""

from __future__ import annotations

import threading
from typing import Any

from tests.support.amqp import connect, send_all, sender
from tests.support.control import ControlClient, handler_counts, topic_paths
from tests.support.polling import until
from tests.support.rhea import messages_of, run_rhea


def in_background(*args: Any) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["lines"] = run_rhea(*args, timeout=30, check=False)
        except Exception as exc:  # reported by the test through ``result``
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def test_rhea_as_a_missing_topic_handler_cancels_and_proceeds(server):
    for outcome, refused in (("reject", True), ("accept", False)):
        thread, result = in_background(
            "receive", "--url", server.url, "--address", "$subgate/missing-topic/rh", "--outcome", outcome
        )
        assert until(lambda: handler_counts(server).get("rh", 0) == 1, timeout=15), result
        with ControlClient(server.url, "jms-user") as subscriber:
            refusal = subscriber.await_attach(subscriber.attach(f"rh/{outcome}"))
            assert (refusal is not None and refusal.condition == "amqp:not-found") is refused
        thread.join(30)
        (notification,) = messages_of(result["lines"])
        properties = notification["application_properties"]
        assert properties["selector"] == f">rh/{outcome}" and properties["session"] == "jms-user"
        assert properties["request"] == "subscribe" and properties["server"] == "subgate"
        assert until(lambda: handler_counts(server).get("rh", 0) == 0, timeout=15)


def test_rhea_as_a_subscriber_waits_for_the_handler(server):
    with ControlClient(server.url) as control:
        handler = control.register_handler("held")
        thread, result = in_background("receive", "--url", server.url, "--address", "held/x", "--capability", "topic")
        notification = handler.receive(timeout=15)
        conn = connect(server.url)
        sender(conn, "held/x", "topic")  # the handler creates the topic ...
        notification.accept()  # ... and proceeds
        control.wait(0.2)
        for _ in range(60):  # publish until rhea (attached once the handler proceeded) has its message
            send_all(sender(conn, "held/x", "topic"), ["for rhea"])
            thread.join(0.25)
            if not thread.is_alive():
                break
        conn.close()
    assert not thread.is_alive(), "rhea never got the message"
    assert [m["body"] for m in messages_of(result["lines"])] == ["for rhea"]


def test_rhea_registers_removal_with_its_session(server):
    conn = connect(server.url)
    for path in ("rw/a", "rw/b/c", "keep/x"):
        send_all(sender(conn, path, "topic"), ["v"])
    conn.close()
    run_rhea("send", "--url", server.url, "--address", "$subgate/remove-with-session/rw", "--count", 0)
    assert until(lambda: topic_paths(server, "?.*//") == ["keep/x"], timeout=15)
