"""``subgate topics tree|add|remove`` against a running server (through ``$management``) and offline (store)."""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner, Result

from subgate.cli.main import main
from subgate.storage.db import upgrade
from tests.e2e.conftest import STORES
from tests.support.amqp import connect, receiver, send_all, sender
from tests.support.control import ControlClient


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_tree_add_and_remove_on_a_running_server(server):
    target = ("--server", server.address)
    conn = connect(server.url)
    send_all(sender(conn, "fx/EURUSD", "topic"), ["1.0850"])
    receiver(conn, "fx/EURUSD", "topic", credit=5)
    with ControlClient(server.url) as control:
        assert control.register_removal("fx").refusal is None
        control.register_handler("eq")
        added = invoke("topics", "add", "eq/ACME", *target)
        assert added.exit_code == 0 and "created topic 'eq/ACME'" in added.output
        assert "exists" in invoke("topics", "add", "eq/ACME", *target).output

        listed = json.loads(invoke("topics", "tree", "--json", *target).output)
        by_path = {t["path"]: t for t in listed["topics"]}
        assert by_path["fx/EURUSD"]["subscriptions"] == 1
        assert by_path["fx/EURUSD"]["value_size"] > len("1.0850")
        assert by_path["eq/ACME"]["value_size"] is None
        assert listed["removals"] == {"fx": 1} and listed["handlers"] == {"eq": 1}

        drawn = invoke("topics", "tree", *target).output
        assert "EURUSD" in drawn and "remove-with-session: 1" in drawn and "missing-topic handlers: 1" in drawn
        only_eq = json.loads(invoke("topics", "tree", ">eq//", "--json", *target).output)
        assert [t["path"] for t in only_eq["topics"]] == ["eq/ACME"]

        removed = invoke("topics", "remove", "eq//", *target)
        assert removed.exit_code == 0 and "removed topic 'eq/ACME'" in removed.output
        missing = CliRunner().invoke(main, ["topics", "remove", "eq//", *target])
        assert missing.exit_code != 0 and "no topic matches" in missing.output
    conn.close()


@pytest.mark.parametrize("store_url", STORES, indirect=True)
def test_offline_commands_work_on_the_store(store_url):
    upgrade(store_url)
    target = ("--server", f"127.0.0.1:{free_port()}", "--store", store_url)
    for path in ("a/b", "a/c/d", "z"):
        assert invoke("topics", "add", path, *target).exit_code == 0
    tree = json.loads(invoke("topics", "tree", "--json", *target).stdout)
    assert [t["path"] for t in tree["topics"]] == ["a/b", "a/c/d", "z"]
    assert "removed topic 'a/c/d'" in invoke("topics", "remove", "a/c//", *target).output
    tree = json.loads(invoke("topics", "tree", "?a/.*", "--json", *target).stdout)
    assert [t["path"] for t in tree["topics"]] == ["a/b"]


def test_bad_arguments_are_refused():
    assert "not a topic path" in CliRunner().invoke(main, ["topics", "add", "a//b"]).output
    assert "invalid topic selector" in CliRunner().invoke(main, ["topics", "tree", "?a/("]).output
