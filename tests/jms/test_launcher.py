"""The JUnit 5 recipe of docs/jms.md, shown working: ``LauncherDemo.main`` (tests/jms/java) starts
``subgate serve --ephemeral`` with the recipe's ``SubgateLauncher``, sends and receives through the real Qpid JMS
client on the URL it read, and stops the server; the server is gone afterwards."""

from __future__ import annotations

import json
import sys

from tests.jms.probe import run_java


def test_launcher_starts_serves_and_stops(tmp_path):
    done = run_java("LauncherDemo", env={"SUBGATE_COMMAND": f"{sys.executable} -m subgate.cli"})
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["body"] == "hello from JUnit"
    assert seen["url"].startswith("amqp://127.0.0.1:") and int(seen["url"].rsplit(":", 1)[1]) > 0
    assert seen["stopped"] is True
    assert "listening on 127.0.0.1" in done.stderr  # the server's log went to the JVM's stderr
