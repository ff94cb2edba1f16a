"""What the ``--http`` endpoint tells whom once logins are on (issue 33, defect 7), against a real server with
users in its store and a named user connected over AMQP with a temporary queue:

* ``/api/console`` takes what ``$management`` takes: 401 without a login (or with a wrong password), 403 for a user
  without ``CONTROL_SERVER``, 200 with it (and then it does show the user, its address and the temporary queue);
* ``/metrics``, ``/healthz`` and ``/readyz`` stay open and name no user, no client address, no temporary node;
* the first ``/api/console`` after a quiet spell shows figures taken after the request came, not the last ones
  built while someone watched;
* password guessing over HTTP meets the ``--login-*`` rule: past the free failures, 429 without a check.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from subgate.storage.db import upgrade
from tests.e2e.test_metrics import get, http_base
from tests.support.amqp import connect
from tests.support.cli import run_subgate
from tests.support.polling import eventually

USERS = {"admin": ("admin-secret", ["--role", "admin"]), "viewer": ("viewer-secret", []), "alice": ("alice-pw", [])}
QUIET = 5.0  # seconds without a console request: longer than a watch lasts (console_feed.WANTED_FOR, 3 s)


def console(base: str, user: str | None = None, password: str | None = None) -> tuple[int, dict[str, Any]]:
    headers = {}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    request = urllib.request.Request(base + "/api/console", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def watched(make_server, sqlite_url, tmp_path) -> Iterator[tuple[str, str]]:
    """(HTTP base, the temporary queue's address) of a server with users, alice connected with a reply queue; a
    failed login past the third holds further ones from its address and user for 60 s."""
    upgrade(sqlite_url)
    for user, (password, extra) in USERS.items():
        added = run_subgate("users", "add", user, "--password", password, *extra, "--store", sqlite_url, cwd=tmp_path)
        assert added.returncode == 0, added.stderr
    throttle = ["--login-free-failures", "3", "--login-delay", "60", "--login-delay-max", "60"]
    server = make_server(sqlite_url, "--http", "127.0.0.1:0", *throttle)
    alice = connect(server.url, container_id="alices-app", user="alice", password="alice-pw")
    replies = alice.create_receiver(None, dynamic=True, credit=10)
    address = replies.link.remote_source.address
    assert address.startswith("$temp.queue.")
    yield http_base(server), address
    alice.close()


def test_reading_the_console_takes_a_login_with_control_server(watched):
    base, address = watched
    status, body = console(base)
    assert status == 401 and "CONTROL_SERVER" in body["error"] and "connections" not in body
    assert console(base, "admin", "wrong")[0] == 401
    status, body = console(base, "viewer", "viewer-secret")
    assert status == 403 and "CONTROL_SERVER" in body["error"] and "connections" not in body
    status, view = eventually(
        lambda: (found := console(base, "admin", "admin-secret"))[1].get("connections") is not None and found,
        timeout=30,
        what="the console's view for admin",
    )
    assert status == 200
    alice = next(row for row in view["connections"] if row["container_id"] == "alices-app")
    assert alice["principal"] == "alice" and alice["remote"].startswith("127.0.0.1:")
    assert address in [queue["name"] for queue in view["queues"]]


def test_metrics_and_probes_stay_open_and_name_no_user_address_or_temporary_queue(watched):
    base, address = watched
    assert get(base + "/readyz") == (200, "ready\n")
    assert get(base + "/healthz")[0] == 200
    texts: list[str] = []

    def consumer_counted() -> bool:
        status, text = get(base + "/metrics")
        assert status == 200
        texts.append(text)
        return 'subgate_links{role="consumer"} 1.0' in text and "subgate_queue_depth{" in text

    eventually(consumer_counted, timeout=30, what="alice's reply queue in /metrics")
    for text in texts:
        for secret in ("alice", "127.0.0.1", address, "$temp.queue."):
            assert secret not in text, f"/metrics names {secret!r}"
    assert 'subgate_queue_depth{queue="$temp"} 0.0' in texts[-1]  # the temporary queues, summed


def test_the_first_request_after_a_quiet_spell_gets_fresh_figures(watched):
    base, _ = watched
    eventually(
        lambda: console(base, "admin", "admin-secret")[1].get("taken"), timeout=30, what="a first view"
    )  # someone watched once
    time.sleep(QUIET)  # then nobody did
    asked = time.time()
    status, view = console(base, "admin", "admin-secret")
    assert status == 200 and not view.get("pending"), view
    assert view["taken"] >= asked, f"the view was taken {asked - view['taken']:.1f} s before the request"


def test_guessing_passwords_over_http_is_answered_429_past_the_free_failures(watched):
    base, _ = watched
    status, view = eventually(
        lambda: (found := console(base, "admin", "admin-secret"))[1].get("taken") and found, timeout=30, what="a view"
    )
    assert status == 200
    assert [console(base, "admin", f"guess-{n}")[0] for n in range(4)] == [401, 401, 401, 401]
    status, body = console(base, "admin", "guess-4")
    assert status == 429 and "too many failed logins" in body["error"]
    assert console(base, "viewer", "viewer-secret")[0] == 429  # the same address, another user: held too
    assert console(base, "admin", "admin-secret")[0] == 200  # the page already signed in reads on
