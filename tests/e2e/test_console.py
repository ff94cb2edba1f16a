"""The web console at ``/`` of ``--http``, in headless Chromium driven by Selenium (Debian's ``chromium`` and
``chromium-driver``, installed by ``scripts/install-test-deps``).

A real server (users in its store, so nothing anonymous) holds what the page must show: connections, a queue with
messages, a durable subscription with a backlog, topics with current values, a remove-with-session registration
and a missing-topic handler, and a producer sending all along. The page must show each of them and its rate chart
must move. Reading it takes a sign-in as a user holding ``CONTROL_SERVER`` (users exist): nothing is shown before,
nor to a user without it. Then the actions: refused over HTTP without credentials or ``CONTROL_SERVER``, done
for an admin (unsubscribe, remove a topic, close a connection). Screenshots are kept as test artifacts in
``$SUBGATE_TEST_ARTIFACTS/console`` (default ``build/test-artifacts/console``); ``docs/console.png`` is one.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proton import Message
from proton.utils import BlockingConnection, ConnectionClosed

from subgate.storage.db import upgrade
from tests.e2e.test_cli_subscriptions import detach, durable_subscriber, publish
from tests.e2e.test_metrics import http_base
from tests.support.amqp import connect, receiver, sender
from tests.support.cli import run_subgate
from tests.support.control import ControlClient
from tests.support.polling import eventually

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("SUBGATE_TEST_ARTIFACTS", REPO / "build" / "test-artifacts")) / "console"
ADMIN = {"user": "admin", "password": "admin-secret"}


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver_path, "install Debian's chromium and chromium-driver (scripts/install-test-deps)"
    options = Options()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1400,2000")
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_script_timeout(20)
    yield driver
    driver.quit()


def screenshot(driver: Any, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def cells(driver: Any, table: str) -> list[list[str]]:
    rows = driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(r => [...r.cells].map(c => c.textContent))",
        f"#{table} tbody tr",
    )
    return [list(row) for row in rows]


def row_of(driver: Any, table: str, column: int, value: str) -> list[str] | None:
    return next((row for row in cells(driver, table) if row[column] == value), None)


def chart(driver: Any) -> dict[str, float]:
    data = driver.execute_script("return {...document.getElementById('rate-chart').dataset}")
    return {key: float(value) for key, value in data.items()}


@pytest.fixture
def busy_server(make_server, sqlite_url, tmp_path) -> Iterator[tuple[Any, dict[str, Any]]]:
    """A server with everything the console shows, and a producer sending until the test ends."""
    upgrade(sqlite_url)
    for user, extra in (("admin", ["--role", "admin"]), ("viewer", [])):
        password = ADMIN["password"] if user == "admin" else "viewer-secret"
        added = run_subgate("users", "add", user, "--password", password, *extra, "--store", sqlite_url, cwd=tmp_path)
        assert added.returncode == 0, added.stderr
    server = make_server(sqlite_url, "--http", "127.0.0.1:0")
    app1 = connect(server.url, container_id="app1", **ADMIN)
    durable_subscriber(app1, "sub1", "prices")  # no credit: its backlog grows
    idle = durable_subscriber(app1, "idle", "news")
    detach(app1, idle)  # a durable subscription without consumers: the console may unsubscribe it
    publish(app1, "prices", "red", "blue", "red", "green", "red")
    publish(app1, "prices/fx/EURUSD", "1.0842")
    publish(app1, "news", "hello")
    jobs = sender(app1, "jobs", "queue")
    for number in range(3):
        jobs.send(Message(body=f"job-{number}", durable=True))
    control = ControlClient(server.url, "control-1", **ADMIN)
    assert control.register_removal("sessions/app1").refusal is None
    assert control.register_handler("orders").refusal is None
    victim = connect(server.url, container_id="victim", **ADMIN)
    receiver(victim, "jobs", "queue", credit=0)
    stop = threading.Event()
    load = connect(server.url, container_id="load", **ADMIN)

    def produce() -> None:
        link = sender(load, "load", "queue")
        while not stop.is_set():
            link.send(Message(body="tick", durable=False))
            stop.wait(0.01)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    yield server, {"app1": app1, "victim": victim}
    stop.set()
    producer.join(30)
    for conn in (app1, load):
        conn.close()
    control.close()


def sign_in(driver: Any, user: str, password: str) -> None:
    for field, text in (("user", user), ("password", password)):
        box = driver.find_element("id", field)
        box.clear()
        box.send_keys(text)
    driver.find_element("id", "signin-button").click()


def test_the_console_shows_the_server_and_its_rate_chart_moves(busy_server, browser):
    server, _ = busy_server
    browser.get(http_base(server) + "/")
    sign_in(browser, "admin", ADMIN["password"])  # users exist: reading takes CONTROL_SERVER (docs/security.md)
    eventually(lambda: row_of(browser, "connections", 1, "app1"), timeout=20, what="app1 in the connections")
    app1 = row_of(browser, "connections", 1, "app1")
    assert app1 is not None and app1[2] == "admin" and app1[3].startswith("127.0.0.1:")
    assert row_of(browser, "connections", 1, "victim") is not None
    jobs = eventually(lambda: row_of(browser, "queues", 0, "jobs"), what="the queue jobs")
    assert jobs[1] == "3"  # depth
    sub1 = eventually(
        lambda: (row := row_of(browser, "subscriptions", 2, "sub1")) and row[5] == "5" and row,
        timeout=20,
        what="sub1 with its backlog of 5 (the store figures, read every 5 s)",
    )
    assert sub1[:4] == ["durable", "app1", "sub1", "prices"] and sub1[6] != "-"  # oldest unaccepted age
    registrations = eventually(lambda: cells(browser, "registrations"), what="registrations")
    assert ["remove-with-session", "sessions/app1", "1"] in registrations
    assert ["missing-topic handler", "orders", "1"] in registrations

    tree = browser.find_element("id", "topic-tree")
    prices = tree.find_element("css selector", "details[data-path='prices'] > summary")
    assert "subscriptions 1" in prices.text and "value" in prices.text
    prices.click()
    fx = tree.find_element("css selector", "details[data-path='prices/fx'] > summary")
    fx.click()
    leaf = eventually(
        lambda: tree.find_elements("css selector", "div.leaf[data-path='prices/fx/EURUSD']"), what="EURUSD"
    )
    assert "value" in leaf[0].text and "B" in leaf[0].text
    assert tree.find_element("css selector", "div.leaf[data-path='news']").is_displayed()

    first = eventually(lambda: (c := chart(browser)) and c["samples"] >= 2 and c["max"] > 0 and c, what="rates")
    later = eventually(lambda: (c := chart(browser))["samples"] > first["samples"] + 2 and c, what="more samples")
    assert later["max"] > 0 and later["samples"] > first["samples"]
    commits = browser.execute_script("return Number(document.getElementById('commit-chart').dataset.samples)")
    assert commits >= 2
    shot = screenshot(browser, "console-overview")
    assert shot.stat().st_size > 10_000


def post(base: str, route: str, body: dict[str, Any], auth: str | None = None) -> tuple[int, dict[str, Any]]:
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        import base64

        headers["Authorization"] = "Basic " + base64.b64encode(auth.encode()).decode()
    request = urllib.request.Request(base + route, json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_actions_need_a_user_with_control_server(busy_server, browser):
    server, conns = busy_server
    base = http_base(server)
    assert post(base, "/api/unsubscribe", {"name": "idle", "client_id": "app1"})[0] == 401
    refused = post(base, "/api/unsubscribe", {"name": "idle", "client_id": "app1"}, "viewer:viewer-secret")
    assert refused[0] == 403
    assert post(base, "/api/unsubscribe", {"name": "idle", "client_id": "app1"}, "admin:wrong")[0] == 403

    browser.get(base + "/")
    browser.execute_script("window.confirm = () => true")
    notice = lambda: browser.find_element("id", "notice").text  # noqa: E731
    eventually(lambda: "sign in" in notice(), timeout=20, what="the page asking for a login")
    assert not cells(browser, "subscriptions")  # nothing shown to a stranger
    sign_in(browser, "viewer", "viewer-secret")
    eventually(lambda: "needs the CONTROL_SERVER grant" in notice(), timeout=20, what="the viewer refused")
    assert not cells(browser, "subscriptions")
    sign_in(browser, "admin", ADMIN["password"])
    eventually(lambda: row_of(browser, "subscriptions", 2, "idle"), timeout=20, what="the idle subscription")

    def click(table: str, column: int, value: str) -> None:
        for tr in browser.find_elements("css selector", f"#{table} tbody tr"):
            if tr.find_elements("css selector", "td")[column].text == value:
                tr.find_element("css selector", "button.act").click()
                return
        raise AssertionError(f"no row {value!r} in {table}")

    click("subscriptions", 2, "idle")
    eventually(lambda: "removed" in browser.find_element("id", "notice").text, what="the unsubscribe answered")
    eventually(lambda: row_of(browser, "subscriptions", 2, "idle") is None, what="idle gone from the page")

    browser.find_element("css selector", "div.leaf[data-path='news'] button.act").click()
    eventually(lambda: "removed 1 topic" in browser.find_element("id", "notice").text, what="news removed")
    eventually(lambda: not browser.find_elements("css selector", "[data-path='news']"), what="news gone")

    click("connections", 1, "victim")
    eventually(lambda: "closed" in browser.find_element("id", "notice").text, what="victim closed")
    victim: BlockingConnection = conns["victim"]
    with pytest.raises(ConnectionClosed):
        victim.wait(lambda: False, timeout=10)
    eventually(lambda: row_of(browser, "connections", 1, "victim") is None, what="victim gone from the page")
    screenshot(browser, "console-after-actions")
