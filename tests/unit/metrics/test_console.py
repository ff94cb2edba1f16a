"""metrics.console without a server: the static files ship in the package and reference nothing outside it, the
JSON view, and the actions' rules (credentials, read-only without them, the request each route means)."""

from __future__ import annotations

import base64
import json
import re
from importlib import resources
from typing import Any

import pytest

from subgate.metrics.buckets import Buckets
from subgate.metrics.collector import WriterFigures
from subgate.metrics.console import Console, credentials, management_request


def basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


def test_the_static_files_are_in_the_package_and_load_nothing_from_elsewhere():
    folder = resources.files("subgate.metrics").joinpath("console")
    for name in ("index.html", "console.js", "console.css"):
        text = folder.joinpath(name).read_text()
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", text), name
        assert "import " not in text or name != "console.js"
    console = Console()
    for route in ("/", "/console.js", "/console.css"):
        answer = console.get(route, None)
        assert answer is not None and answer[0] == 200


@pytest.mark.parametrize(
    ("header", "found"),
    [
        (basic("admin:s3cret:with:colons"), ("admin", "s3cret:with:colons")),
        (basic("admin:"), ("admin", "")),
        (basic(":nobody"), None),
        (basic("no-colon"), None),
        ("Basic !!!", None),
        ("Bearer abc", None),
        (None, None),
    ],
)
def test_credentials(header, found):
    assert credentials(header) == found


@pytest.mark.parametrize(
    ("route", "body", "request_"),
    [
        (
            "/api/unsubscribe",
            {"name": "s", "client_id": "c"},
            ("DELETE", "subscription", {"name": "s", "client-id": "c"}),
        ),
        (
            "/api/unsubscribe",
            {"name": "g", "client_id": None},
            ("DELETE", "subscription", {"name": "g", "global": True}),
        ),
        ("/api/unsubscribe", {"name": ""}, "give 'name' and 'client_id' (null for a global subscription)"),
        ("/api/topics/remove", {"selector": "a/b//"}, ("DELETE", "topic", {"selector": "a/b//"})),
        ("/api/topics/remove", {}, "give 'selector'"),
        ("/api/connections/close", {"id": 3}, ("DELETE", "connection", {"id": 3})),
        ("/api/connections/close", {"id": True}, "give 'id' (a connection number)"),
    ],
)
def test_each_action_is_one_management_request(route, body, request_):
    assert management_request(route, body) == request_


def test_the_view_is_pending_then_carries_the_commit_figures():
    console = Console()
    asked: list[bool] = []
    console.view = lambda: asked.append(True)  # type: ignore[func-returns-value]
    status, _, body = console.get("/api/console", None) or (0, {}, b"")
    assert (status, json.loads(body)) == (200, {"pending": True, "actions": False})
    commits = Buckets([0.001, 0.01])
    commits.observe(0.004)
    console.view = lambda: {"taken": 1.0}
    writer = WriterFigures(commits.view(), Buckets([1]).view())
    _, _, body = console.get("/api/console", writer) or (0, {}, b"")
    assert json.loads(body) == {"taken": 1.0, "commit": {"count": 1, "sum": 0.004}, "actions": False}
    assert asked == [True]
    assert console.get("/elsewhere", None) is None


def test_reading_the_view_asks_read_access_with_the_credentials():
    console = Console()
    console.view = lambda: {"taken": 1.0}
    seen: list[Any] = []

    def read_access(found: Any, address: str) -> int:
        seen.append(found)
        assert address == "10.0.0.7"
        return {None: 401, ("bob", "pw"): 403, ("eve", "guess"): 429}.get(found, 200)

    console.read_access = read_access
    status, headers, body = console.get("/api/console", None, None, False, "10.0.0.7") or (0, {}, b"")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic") and "CONTROL_SERVER" in str(body)
    status, headers, _ = console.get("/api/console", None, None, True, "10.0.0.7") or (0, {}, b"")
    assert status == 401 and "WWW-Authenticate" not in headers  # the page's own sign-in form
    status, _, body = console.get("/api/console", None, basic("bob:pw"), False, "10.0.0.7") or (0, {}, b"")
    assert status == 403 and "subgate grants add CONTROL_SERVER --user bob" in json.loads(body)["error"]
    status, headers, _ = console.get("/api/console", None, basic("eve:guess"), False, "10.0.0.7") or (0, {}, b"")
    assert status == 429 and headers["Retry-After"]
    status, _, body = console.get("/api/console", None, basic("admin:pw"), False, "10.0.0.7") or (0, {}, b"")
    assert (status, json.loads(body)["taken"]) == (200, 1.0)
    assert seen == [None, None, ("bob", "pw"), ("eve", "guess"), ("admin", "pw")]
    assert console.get("/", None)[0] == 200  # type: ignore[index]  # the page itself holds no figures


def test_actions_are_off_without_act_and_need_credentials_with_it():
    console = Console()
    assert console.post("/api/connections/close", None, True, b'{"id": 1}')[0] == 404  # type: ignore[index]
    done: list[Any] = []

    def act(user, password, operation, type_, arguments):
        done.append((user, password, operation, type_, arguments))
        return (204, "closed") if user == "admin" else (403, "not allowed")

    console.act = act
    status, headers, _ = console.post("/api/connections/close", None, False, b'{"id": 1}')  # type: ignore[misc]
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    status, headers, _ = console.post("/api/connections/close", None, True, b'{"id": 1}')  # type: ignore[misc]
    assert status == 401 and "WWW-Authenticate" not in headers  # the page's own sign-in form, no browser dialog
    assert console.post("/api/connections/close", basic("admin:pw"), True, b"not json")[0] == 400  # type: ignore[index]
    status, _, body = console.post("/api/connections/close", basic("admin:pw"), True, b'{"id": 1}')  # type: ignore[misc]
    assert (status, json.loads(body)) == (200, {"status": 204, "message": "closed"})
    status, _, body = console.post("/api/connections/close", basic("bob:pw"), True, b'{"id": 1}')  # type: ignore[misc]
    assert (status, json.loads(body)["message"]) == (403, "not allowed")
    assert done[0] == ("admin", "pw", "DELETE", "connection", {"id": 1})
    assert console.post("/api/elsewhere", None, True, b"") is None
