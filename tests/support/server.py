"""Running a real ``subgate serve`` process for end-to-end tests.

``SubgateProcess`` starts the installed ``subgate`` console script (next to the test interpreter) on
127.0.0.1 with port 0, reads the port from its "listening on" log line, and stops it with SIGTERM (``stop``)
or SIGKILL (``kill``), always by its own PID. The server's log goes to a file the test can read.
"""

from __future__ import annotations

import os
import re
import resource
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LISTENING = re.compile(r"listening on (\S+):(\d+)")
# The server's start-up steps (subgate.metrics.startup): "start-up: <step> took <seconds> s".
STARTUP_STEP = re.compile(r"start-up: (.+?) took (\d+(?:\.\d+)?) s")
# How long a fixture waits for a server to listen: a loaded CI machine (load average 10 on 2 cores) stretched a
# 1 s start-up past 30 s; a real hang still ends here, and the error then says how far the start-up got.
START_SECONDS = 120.0
STACKS_SECONDS = 3.0  # how long to wait for the thread stacks that SIGUSR1 makes a stalled server write

# Every SubgateProcess started in this test process, for ``stop_servers_using``.
_STARTED: weakref.WeakSet[SubgateProcess] = weakref.WeakSet()


def wait_for_log_line(
    proc: subprocess.Popen[bytes],
    read_log: Callable[[], str],
    pattern: re.Pattern[str],
    timeout: float,
    kill: Callable[[], None],
) -> re.Match[str]:
    """Poll a child's log until ``pattern`` appears; raise if the child exits first or the time runs out (then
    ``kill`` it). The error says how long each start-up step took (``startup_report``); a server that timed out
    is first asked for its threads' stacks (SIGUSR1), which the report includes."""
    began = time.monotonic()
    deadline = began + timeout
    while time.monotonic() < deadline:
        text = read_log()
        match = pattern.search(text)
        if match:
            return match
        if proc.poll() is not None:
            raise RuntimeError(
                f"subgate exited with {proc.returncode} after {time.monotonic() - began:.1f} s; "
                f"{startup_report(text)}\n{text}"
            )
        time.sleep(0.05)
    if proc.poll() is None:  # subgate dumps its stacks (faulthandler); before its handler is in, it just ends
        proc.send_signal(signal.SIGUSR1)
        stacks_by = time.monotonic() + STACKS_SECONDS
        while time.monotonic() < stacks_by and "most recent call first" not in read_log():
            time.sleep(0.05)
    kill()
    text = read_log()
    raise RuntimeError(
        f"subgate did not log {pattern.pattern!r} within {timeout:.0f} s; {startup_report(text)}\n{text[-20000:]}"
    )


def startup_report(log_text: str) -> str:
    """The start-up steps the server logged, with their durations, for a fixture's error message."""
    steps = STARTUP_STEP.findall(log_text)
    if not steps:
        return "it logged no start-up step (it stalled in the interpreter's start, the imports or the schema check)"
    done = ", ".join(f"{name} {float(seconds):.2f} s" for name, seconds in steps)
    return f"start-up steps that ended: {done}; it stalled in the step after {steps[-1][0]!r}"


def rss_kib(pid: int) -> int:
    """VmRSS of process ``pid`` in KiB (Linux /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def subgate_command() -> list[str]:
    script = Path(sys.executable).with_name("subgate")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "subgate.cli"]


class SubgateProcess:
    def __init__(
        self,
        store_url: str,
        workdir: Path,
        *extra: str,
        env: dict[str, str] | None = None,
        open_files: int | None = None,
    ) -> None:
        self.open_files = open_files  # RLIMIT_NOFILE (soft and hard) of the server process, when set
        self.store_url = store_url
        self.workdir = workdir
        self.extra = list(extra)
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.starts = 0
        self.log_path = workdir / "server-0.log"

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *extra: str, timeout: float = START_SECONDS) -> SubgateProcess:
        """Start (or restart) the server; a restart reuses the previous port when it was known."""
        listen = f"127.0.0.1:{self.port}" if self.port else "127.0.0.1:0"
        self.log_path = self.workdir / f"server-{self.starts}.log"
        self.starts += 1
        command = [
            *subgate_command(),
            "serve",
            "--listen",
            listen,
            "--store",
            self.store_url,
            "--migrate",
            *self.extra,
            *extra,
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir, env=env, preexec_fn=self._limits
            )
        _STARTED.add(self)
        match = wait_for_log_line(self.proc, self.log, LISTENING, timeout, self.kill)
        self.port = int(match.group(2))
        return self

    def _limits(self) -> None:
        """In the child, before exec: the open-file limit, when one was asked for."""
        if self.open_files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.open_files, self.open_files))

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise

    def kill(self) -> None:
        """SIGKILL: the crash case."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def stop_servers_using(store_url: str) -> None:
    """Stop (SIGTERM, else SIGKILL) every server of this test process still running on ``store_url``.

    The ``postgres_url`` fixture calls it before it drops the test's database: pytest tears fixtures down in the
    reverse order of their set-up, so a ``make_server`` set up before the database (or a database asked for in
    the test body) would otherwise still be running at the ``DROP DATABASE ... WITH (FORCE)``, and its shutdown
    would then spend seconds flushing to a store that is gone."""
    for server in list(_STARTED):
        if server.store_url == store_url and server.alive():
            try:
                server.stop(timeout=10)
            except Exception:
                server.kill()


@contextmanager
def module_server(
    request: Any, tmp_path_factory: Any, label: str, store: str = "sqlite", extra: tuple[str, ...] = ()
) -> Iterator[SubgateProcess]:
    """A server shared by a test module, on a fresh SQLite file or a fresh database of the session's throwaway
    PostgreSQL cluster; stopped (and the database dropped) at the end."""
    workdir = tmp_path_factory.mktemp(f"{label}-{store}")
    cluster, database = None, None
    if store == "sqlite":
        url = f"sqlite:///{workdir / 'subgate.db'}"
    else:
        from tests.support.pytest_postgres import unique_database_name

        cluster = request.getfixturevalue("postgres_cluster")
        database = unique_database_name(label.replace("-", "_"))
        url = cluster.create_database(database)
    server = SubgateProcess(url, workdir, *extra).start()
    try:
        yield server
    finally:
        try:
            if server.alive():
                server.stop(timeout=10)
        finally:
            server.kill()
            if cluster is not None and database is not None:
                cluster.drop_database(database)
