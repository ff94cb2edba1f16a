"""Running the ``subgate`` command line as a child process, with exactly the arguments a test gives.

``run_subgate`` runs a short command (``db``, ``users``, a ``serve`` that should refuse to start) to completion.
``ServeProcess`` starts ``subgate serve`` with no implied flags (unlike ``SubgateProcess``, which always passes
``--listen``, ``--store`` and ``--migrate``), so tests can set options through a TOML file or ``SUBGATE_*``
variables; it reads the name and address from the "listening on" log line and stops only its own PID.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from tests.support.server import START_SECONDS, subgate_command, wait_for_log_line

LISTENING = re.compile(r"subgate '([^']*)' listening on (\S+):(\d+)")


def subgate_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment without any SUBGATE_* setting inherited from the shell, plus ``env``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SUBGATE_")}
    return {**base, "PYTHONUNBUFFERED": "1", **(env or {})}


def run_subgate(
    *args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*subgate_command(), *args],
        cwd=cwd,
        env=subgate_env(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


class ServeProcess:
    """One ``subgate serve`` child process (see the module docstring)."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.cwd = cwd
        self.env = env
        self.log_path = cwd / f"serve-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.name = ""
        self.host = ""
        self.port = 0

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    def start(self, timeout: float = START_SECONDS) -> ServeProcess:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [*subgate_command(), "serve", *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env=subgate_env(self.env),
            )
        match = wait_for_log_line(self.proc, self.log, LISTENING, timeout, self.kill)
        self.name, self.host, self.port = match.group(1), match.group(2), int(match.group(3))
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def signal(self, signum: int, timeout: float = 20.0) -> int:
        """Send ``signum`` to this process and wait for it to exit; returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def stop(self) -> int:
        return self.signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        if self.alive():
            try:
                self.stop()
            except subprocess.TimeoutExpired:
                pass
