"""The pytest plugin ``subgate.testing`` (installed through the ``pytest11`` entry point), run by pytester in
sessions of its own: a test gets a live server's URL (a fresh one per test, one per module), and a failing
test's report holds that server's log."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.timeout(180)

# The inner tests talk AMQP to the server with python-qpid-proton, as a user's own tests would.
INNER = """
import pytest
from proton import Message
from proton.utils import BlockingConnection

SEEN = []

def round_trip(url, body):
    conn = BlockingConnection(url, timeout=20)
    try:
        conn.create_sender("plugin-q").send(Message(body=body))
        rcv = conn.create_receiver("plugin-q")
        message = rcv.receive(timeout=20)
        rcv.accept()
        return message.body
    finally:
        conn.close()

def test_round_trip(subgate_url):
    assert subgate_url.startswith("amqp://127.0.0.1:")
    assert round_trip(subgate_url, "hello") == "hello"
    SEEN.append(subgate_url)

def test_each_test_has_its_own_server(subgate_url):
    assert SEEN and subgate_url != SEEN[0]
    SEEN.append(subgate_url)

def test_module_server_is_shared_a(subgate_module_url):
    SEEN.append(subgate_module_url)
    assert round_trip(subgate_module_url, "a") == "a"

def test_module_server_is_shared_b(subgate_module_url):
    assert subgate_module_url == SEEN[-1]

def test_factory_passes_arguments(subgate_start):
    server = subgate_start("--http", "127.0.0.1:0")
    assert server.info["http"].startswith("http://127.0.0.1:")
    assert server.info["pid"] == server.pid
"""

FAILING = """
from proton import Message
from proton.utils import BlockingConnection

def test_fails_after_talking_to_the_server(subgate_url):
    conn = BlockingConnection(subgate_url, timeout=20, container_id="the-failing-test")
    conn.create_sender("q").send(Message(body="x"))
    conn.close()
    assert False, "this test fails on purpose"

def test_passes(subgate_url):
    pass
"""


def test_fixtures_give_live_servers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0")
    result.assert_outcomes(passed=5)


def test_a_failing_test_report_holds_the_server_log(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_inner=FAILING)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0")
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    section = re.search(r"Captured subgate log \(amqp://127\.0\.0\.1:(\d+)\)", text)
    assert section, text
    # The server's own log lines, from the failing test's server (its port), follow the section's title.
    after = text[section.end() :]
    assert f"listening on 127.0.0.1:{section.group(1)}" in after
    assert "connection opened: container-id 'the-failing-test'" in after
    assert "this test fails on purpose" in text
    # Only the failing test carries a section.
    assert text.count("Captured subgate log") == 1
