"""pytest plugin ``subgate.testing``: throwaway subgate servers for a test suite (``subgate serve --ephemeral``).

Registered through the ``pytest11`` entry point, so installing subgate is enough. It owns:

- ``EphemeralServer``: starts ``python -m subgate.cli serve --ephemeral [ARGS]``, reads its JSON line from stdout
  (docs/jms.md, "A broker for test suites"), keeps its log (stderr) in a file, stops it with SIGTERM (SIGKILL
  if it does not end in time). The server also ends by itself when the test process dies.
- Fixtures: ``subgate_url`` (a fresh server per test), ``subgate_module_url`` (one per test module),
  ``subgate_server`` / ``subgate_module_server`` (the ``EphemeralServer`` behind them: ``.url``, ``.info``,
  ``.log()``), and ``subgate_start`` (a factory: ``subgate_start("--http", "127.0.0.1:0")``, stopped after the
  test).
- When a test fails, the log of every server it used is attached to its report (a "Captured subgate log"
  section, shown with the failure).

Option: ``--subgate-start-timeout`` (seconds, default 30): how long to wait for the JSON line.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

LOG_TAIL_CHARS = 64_000  # the end of a server's log attached to a failing test's report


class EphemeralServer:
    """One ``subgate serve --ephemeral`` process (see the module docstring)."""

    def __init__(self, *args: str, log_dir: Path | None = None, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.env = env
        folder = log_dir or Path(tempfile.mkdtemp(prefix="subgate-log-"))
        self.log_path = Path(tempfile.mkstemp(prefix="subgate-", suffix=".log", dir=folder)[1])
        self.proc: subprocess.Popen[bytes] | None = None
        self.info: dict[str, Any] = {}

    @property
    def url(self) -> str:
        return str(self.info["url"])

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 30.0) -> EphemeralServer:
        """Start the process and wait (at most ``timeout`` s) for its JSON line; raise with its log if none."""
        command = [sys.executable, "-m", "subgate.cli", "serve", "--ephemeral", *self.args]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(self.env or {})}
        env.pop("SUBGATE_STORE", None)  # --ephemeral refuses a store of its own
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, env=env)
        assert self.proc.stdout is not None
        line = _read_line(self.proc.stdout, timeout)
        if not line:
            self.stop()
            raise RuntimeError(
                f"subgate serve --ephemeral gave no URL line within {timeout} s "
                f"(exit code {self.proc.poll()}); its log:\n{self.log()}"
            )
        self.info = json.loads(line)
        return self

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout`` s; returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode


def _read_line(stream: IO[bytes], timeout: float) -> str:
    """The first line of ``stream`` within ``timeout`` s ('' when the time runs out or the stream ends)."""
    fd = stream.fileno()
    data = b""
    deadline = time.monotonic() + timeout
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return ""
        chunk = os.read(fd, 4096)
        if not chunk:
            return ""
        data += chunk
    return data.split(b"\n", 1)[0].decode()


class ServerFactory:
    """``subgate_start(*args, env=None)``: started servers, stopped by ``stop_all``."""

    def __init__(self, log_dir: Path, timeout: float) -> None:
        self.log_dir = log_dir
        self.timeout = timeout
        self.servers: list[EphemeralServer] = []

    def __call__(self, *args: str, env: dict[str, str] | None = None) -> EphemeralServer:
        server = EphemeralServer(*args, log_dir=self.log_dir, env=env)
        self.servers.append(server)
        return server.start(self.timeout)

    def stop_all(self) -> None:
        for server in self.servers:
            server.stop()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("subgate_start_timeout", "Seconds to wait for subgate serve --ephemeral's URL line.", default="30")
    parser.getgroup("subgate").addoption(
        "--subgate-start-timeout",
        type=float,
        default=None,
        help="Seconds to wait for a subgate serve --ephemeral's URL line (default 30).",
    )


def _timeout(config: pytest.Config) -> float:
    option = config.getoption("subgate_start_timeout")
    return float(option if option is not None else config.getini("subgate_start_timeout"))


@pytest.fixture
def subgate_start(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[ServerFactory]:
    """A factory of ephemeral servers with extra ``serve`` arguments; each is stopped after the test."""
    factory = ServerFactory(tmp_path_factory.mktemp("subgate"), _timeout(request.config))
    yield factory
    factory.stop_all()


@pytest.fixture
def subgate_server(subgate_start: ServerFactory) -> EphemeralServer:
    """A fresh ephemeral server for this test."""
    return subgate_start()


@pytest.fixture
def subgate_url(subgate_server: EphemeralServer) -> str:
    """The AMQP URL (``amqp://127.0.0.1:PORT``) of a fresh ephemeral server for this test."""
    return subgate_server.url


@pytest.fixture(scope="module")
def subgate_module_server(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[EphemeralServer]:
    """One ephemeral server shared by the tests of a module."""
    factory = ServerFactory(tmp_path_factory.mktemp("subgate"), _timeout(request.config))
    try:
        yield factory()
    finally:
        factory.stop_all()


@pytest.fixture(scope="module")
def subgate_module_url(subgate_module_server: EphemeralServer) -> str:
    """The AMQP URL of the module's ephemeral server."""
    return subgate_module_server.url


def _servers_of(item: pytest.Item) -> list[EphemeralServer]:
    """The ephemeral servers a test used, through any of this plugin's fixtures (``funcargs`` holds every fixture
    of the test's closure: ``subgate_server`` too when the test asked for ``subgate_url``)."""
    found: list[EphemeralServer] = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, EphemeralServer):
            found.append(value)
        elif isinstance(value, ServerFactory):
            found.extend(value.servers)
    return list({id(server): server for server in found}.values())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.failed:
        return
    for server in _servers_of(item):
        text = server.log()
        if len(text) > LOG_TAIL_CHARS:
            text = f"[... the first {len(text) - LOG_TAIL_CHARS} characters left out ...]\n{text[-LOG_TAIL_CHARS:]}"
        report.sections.append((f"Captured subgate log ({server.info.get('url', 'not started')})", text))


__all__: list[str] = [
    "EphemeralServer",
    "ServerFactory",
    "subgate_module_server",
    "subgate_module_url",
    "subgate_server",
    "subgate_start",
    "subgate_url",
]
