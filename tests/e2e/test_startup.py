"""Start-up under load (issue 33, defect 8): the server logs each start-up step with its duration, and the
fixtures' wait for a server to listen says, when it runs out, how long each step took and where the server
stalled (its threads' stacks, which SIGUSR1 makes it write).

The first test starts a real server; the second runs the fixtures' wait against a fake server that logs two
steps and then never listens.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.polling import eventually
from tests.support.server import wait_for_log_line

STARTUP_STEP = re.compile(r"start-up: (.+?) took (\d+\.\d\d) s")  # subgate.metrics.startup.STEP_FORMAT

STEPS = ("python and imports", "schema check", "store lease", "catalog", "recovery", "listen", "journal writer ready")


def test_the_server_logs_each_start_up_step_with_its_duration(make_server):
    server = make_server()  # a fresh store: --migrate applies every revision
    log = server.log()
    steps = [name for name, _seconds in STARTUP_STEP.findall(log)]
    for step in STEPS:
        assert any(name.startswith(step) for name in steps), (step, log)
    assert any(name.startswith("migration to ") for name in steps), log
    summary = log.index("start-up: listening ")
    assert re.search(r"start-up: listening \d+\.\d\d s after the process started \(python and imports", log), log
    assert summary < log.index("listening on 127.0.0.1:"), log  # the summary, then the line that says it is up
    # kill -USR1 writes every thread's stack to the log (what the fixtures ask a stalled server for), and the
    # server goes on
    assert server.proc is not None
    server.proc.send_signal(signal.SIGUSR1)
    eventually(lambda: "most recent call first" in server.log(), timeout=30, what="the stacks in the log")
    assert server.alive()


# A server that logs its first start-up steps, as subgate does, and then never listens (nor exits).
FAKE_SERVER = """
import faulthandler, signal, sys, time
faulthandler.register(signal.SIGUSR1, all_threads=True)
print("INFO subgate.server: start-up: python and imports took 0.51 s", flush=True)
print("INFO subgate.server: start-up: schema check took 0.01 s", flush=True)
print("INFO subgate.server: start-up: store lease took 12.34 s", flush=True)
def migrate_forever():
    while True:
        time.sleep(0.05)
migrate_forever()
"""


def test_the_start_up_wait_of_a_server_that_never_listens_says_how_long_each_step_took(tmp_path: Path):
    log_path = tmp_path / "fake.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-c", FAKE_SERVER], stdout=log, stderr=subprocess.STDOUT)

    def kill() -> None:
        proc.kill()
        proc.wait(10)

    try:
        with pytest.raises(RuntimeError) as failure:
            wait_for_log_line(proc, lambda: log_path.read_text(errors="replace"), re.compile("listening on"), 3.0, kill)
    finally:
        if proc.poll() is None:
            kill()
    message = str(failure.value)
    first_line = message.splitlines()[0]
    assert "did not log 'listening on' within 3 s" in first_line, message
    assert "python and imports 0.51 s, schema check 0.01 s, store lease 12.34 s" in first_line, message
    assert "it stalled in the step after 'store lease'" in first_line, message
    assert "migrate_forever" in message, message  # the stalled server's stack, written on SIGUSR1
    assert proc.returncode is not None  # and the server was ended
