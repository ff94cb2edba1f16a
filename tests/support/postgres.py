"""Throwaway PostgreSQL clusters for tests.

``PostgresCluster`` runs ``initdb`` into a fresh temporary directory, starts a
postmaster listening on a free TCP port on 127.0.0.1 only (plus a unix socket
inside the temporary directory), and throws everything away on ``stop()``.

PostgreSQL refuses to run as root. When the test process is root, the
temporary directory is handed to the ``postgres`` system user and ``initdb`` /
``pg_ctl`` run as that user via ``runuser`` (or ``setpriv``). Otherwise they
run as the current user.

The binaries are looked up in ``$SUBGATE_PG_BINDIR``, then in
``/usr/lib/postgresql/<version>/bin`` (newest version first), then on ``PATH``.

Only the standard library and SQLAlchemy (with the psycopg 3 driver) are used.
"""

from __future__ import annotations

import atexit
import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import TracebackType

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

__all__ = [
    "PostgresCluster",
    "PostgresError",
    "PostgresNotInstalledError",
    "find_postgres_bindir",
]

ENV_BINDIR = "SUBGATE_PG_BINDIR"
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"
REQUIRED_BINARIES = ("initdb", "pg_ctl", "postgres")
HOST = "127.0.0.1"

_DB_NAME_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# Keep well below the 107-byte sun_path limit: "<dir>/.s.PGSQL.65535".
_MAX_SOCKET_DIR_LEN = 80
# Upper bound on the life of the watchdog (and so of an abandoned cluster), in seconds.
_WATCHDOG_MAX_SECONDS = 12 * 3600

# Run by a separate interpreter next to every cluster: if the test process dies without calling stop()
# (SIGKILL, a killed CI step...), stop the server and delete the directory instead of leaking them.
_WATCHDOG = r"""
import json, os, shutil, signal, subprocess, sys, time
parent, max_seconds, cfg = int(sys.argv[1]), float(sys.argv[2]), json.loads(sys.argv[3])
deadline = time.monotonic() + max_seconds
while os.getppid() == parent and time.monotonic() < deadline and os.path.isdir(cfg["root"]):
    time.sleep(1)
if not os.path.isdir(cfg["root"]):
    sys.exit(0)
try:
    subprocess.run(cfg["prefix"] + [cfg["pg_ctl"], "stop", "-D", cfg["data"], "-m", "immediate", "-w", "-t", "20"],
                   cwd=cfg["root"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=30, check=False)
except Exception:
    pass
try:
    with open(os.path.join(cfg["data"], "postmaster.pid")) as fh:
        pid = int(fh.readline())
    with open("/proc/%d/cmdline" % pid, "rb") as fh:
        if cfg["data"].encode() in fh.read():
            os.kill(pid, signal.SIGKILL)
except Exception:
    pass
shutil.rmtree(cfg["root"], ignore_errors=True)
"""


class PostgresError(RuntimeError):
    """The throwaway cluster could not be created, started or stopped."""


class PostgresNotInstalledError(PostgresError):
    """No PostgreSQL server binaries were found on this machine."""


def _has_binaries(bindir: Path) -> bool:
    return all(os.access(bindir / name, os.X_OK) for name in REQUIRED_BINARIES)


def _version_key(path: str) -> tuple[int, ...]:
    version = Path(path).parent.name  # /usr/lib/postgresql/<version>/bin
    return tuple(int(part) for part in re.findall(r"\d+", version)) or (0,)


def find_postgres_bindir() -> Path:
    """Return the directory holding ``initdb``, ``pg_ctl`` and ``postgres``.

    Raises ``PostgresNotInstalledError`` with installation hints if none is found.
    """
    override = os.environ.get(ENV_BINDIR)
    if override:
        path = Path(override)
        if _has_binaries(path):
            return path
        raise PostgresNotInstalledError(
            f"${ENV_BINDIR}={override!r} does not contain executable {', '.join(REQUIRED_BINARIES)}"
        )
    for candidate in sorted(glob.glob(DEBIAN_BIN_GLOB), key=_version_key, reverse=True):
        if _has_binaries(Path(candidate)):
            return Path(candidate)
    on_path = shutil.which("pg_ctl")
    if on_path and _has_binaries(Path(on_path).resolve().parent):
        return Path(on_path).resolve().parent
    raise PostgresNotInstalledError(
        "PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found in "
        f"${ENV_BINDIR}, {DEBIAN_BIN_GLOB} or on PATH. Install them with "
        "`scripts/install-test-deps` (or `apt-get install postgresql`), or point "
        f"${ENV_BINDIR} at the bin directory of an existing installation."
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _port_open(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _world_traversable(path: Path) -> bool:
    """True if any user may traverse every directory from / down to ``path``."""
    for part in [path, *path.parents]:
        try:
            if not os.stat(part).st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _children_of(pid: int) -> list[int]:
    children: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(pid):
            children.append(int(entry))
    return children


class PostgresCluster:
    """A throwaway PostgreSQL cluster on 127.0.0.1; use as a context manager.

    >>> with PostgresCluster() as pg:
    ...     url = pg.create_database("example")
    """

    def __init__(
        self,
        *,
        bindir: Path | str | None = None,
        run_as: str = "postgres",
        fsync: bool = True,
        start_timeout: float = 60.0,
        stop_timeout: float = 30.0,
        base_dir: Path | str | None = None,
        extra_config: dict[str, str] | None = None,
    ) -> None:
        """
        :param bindir: directory with ``initdb``/``pg_ctl``/``postgres`` (default: auto-detected).
        :param run_as: system user that owns and runs the cluster when the caller is root.
        :param fsync: server ``fsync`` setting (on by default: tests rely on durability).
        :param start_timeout: bound, in seconds, on initdb + start-up.
        :param stop_timeout: bound, in seconds, on a clean ``pg_ctl stop`` before SIGKILL.
        :param base_dir: where the temporary directory is created (default: system temp dir).
        :param extra_config: additional ``postgresql.conf`` settings, e.g. ``{"max_connections": "200"}``.
        """
        self._bindir_arg = Path(bindir) if bindir is not None else None
        self._run_as = run_as
        self._fsync = fsync
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self._base_dir = Path(base_dir) if base_dir is not None else None
        self._extra_config = dict(extra_config or {})
        self._bindir: Path | None = None
        self._root: Path | None = None
        self._port: int | None = None
        self._uid_gid: tuple[int, int] | None = None
        self._atexit_registered = False
        self._watchdog: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ info
    @property
    def port(self) -> int:
        if self._port is None:
            raise PostgresError("cluster is not started")
        return self._port

    @property
    def host(self) -> str:
        return HOST

    @property
    def root(self) -> Path:
        if self._root is None:
            raise PostgresError("cluster is not started")
        return self._root

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "run"

    @property
    def log_path(self) -> Path:
        return self.root / "postgres.log"

    @property
    def bindir(self) -> Path:
        if self._bindir is None:
            self._bindir = self._bindir_arg if self._bindir_arg is not None else find_postgres_bindir()
            if not _has_binaries(self._bindir):
                raise PostgresNotInstalledError(f"{self._bindir} lacks {', '.join(REQUIRED_BINARIES)}")
        return self._bindir

    @property
    def started(self) -> bool:
        return self._root is not None

    def url(self, dbname: str = "postgres") -> str:
        """SQLAlchemy URL of database ``dbname`` on this cluster."""
        return f"postgresql+psycopg://postgres@{HOST}:{self.port}/{dbname}"

    def read_log(self, max_chars: int = 20_000) -> str:
        """The tail of the server log (empty if there is none yet)."""
        try:
            return self.log_path.read_text(errors="replace")[-max_chars:]
        except (OSError, PostgresError):
            return ""

    def postmaster_pid(self) -> int | None:
        """PID from ``postmaster.pid``, or None if there is no such file."""
        try:
            first = (self.data_dir / "postmaster.pid").read_text().splitlines()[0]
            return int(first.strip())
        except (OSError, IndexError, ValueError):
            return None

    def is_running(self) -> bool:
        pid = self.postmaster_pid()
        return pid is not None and _pid_alive(pid) and self._pid_is_ours(pid)

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> PostgresCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> PostgresCluster:
        """Create the cluster (initdb) and start the server; returns self."""
        if self._root is not None:
            raise PostgresError("cluster already started")
        bindir = self.bindir  # fail early with a clear message
        deadline = time.monotonic() + self._start_timeout
        self._root = self._make_root()
        self._register_atexit()
        self._start_watchdog()
        try:
            self._run(
                [
                    str(bindir / "initdb"),
                    "-D",
                    str(self.data_dir),
                    "-A",
                    "trust",
                    "-U",
                    "postgres",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    # initdb's own final flush only; the server runs with fsync on.
                    "--no-sync",
                ],
                timeout=max(1.0, deadline - time.monotonic()),
                what="initdb",
            )
            self._write_config()
            last_error: PostgresError | None = None
            for _attempt in range(5):
                self._port = _free_port()
                log_offset = len(self.read_log(max_chars=10**9))
                try:
                    self._start_server(deadline)
                    return self
                except PostgresError as err:
                    last_error = err
                    if not self._port_conflict(log_offset):
                        raise
            raise PostgresError(f"could not find a free port for PostgreSQL: {last_error}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the server (fast shutdown, SIGKILL fallback) and delete the cluster."""
        root = self._root
        if root is None:
            return
        self._stop_watchdog()
        try:
            if self.data_dir.exists():
                self._stop_server("fast")
        finally:
            self._root = None
            shutil.rmtree(root, ignore_errors=True)
            if self._atexit_registered:
                atexit.unregister(self.stop)
                self._atexit_registered = False

    def restart(self, mode: str = "fast") -> None:
        """Stop the server (``pg_ctl stop -m <mode>``) and start it again on the same port and data."""
        self._stop_server(mode)
        self._start_server(time.monotonic() + self._start_timeout)

    def crash(self) -> None:
        """SIGKILL the postmaster and its children (simulated crash); data stays for ``restart``-like use.

        Call ``start_server()`` afterwards to run crash recovery on the same data and port.
        """
        self._kill_server()

    def start_server(self) -> None:
        """Start the server of an existing (stopped or crashed) cluster on its previous port."""
        self._start_server(time.monotonic() + self._start_timeout)

    # ----------------------------------------------------------- databases
    def admin_engine(self) -> sa.Engine:
        """An AUTOCOMMIT engine on the ``postgres`` database (caller disposes it)."""
        return sa.create_engine(
            self.url("postgres"),
            isolation_level="AUTOCOMMIT",
            poolclass=NullPool,
            connect_args={"connect_timeout": 10},
        )

    def create_database(self, name: str | None = None) -> str:
        """Create a fresh, empty database and return its SQLAlchemy URL.

        ``name`` must be a lower-case identifier (``[a-z_][a-z0-9_]*``, at most 63 chars);
        a unique name is generated when it is omitted.
        """
        if name is None:
            name = f"t_{uuid.uuid4().hex[:16]}"
        self._check_db_name(name)
        engine = self.admin_engine()
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8'")
        finally:
            engine.dispose()
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, terminating any sessions still connected to it."""
        self._check_db_name(name)
        engine = self.admin_engine()
        try:
            with engine.connect() as conn:
                version = int(conn.exec_driver_sql("SHOW server_version_num").scalar_one())
                force = " WITH (FORCE)" if version >= 130000 else ""
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}"{force}')
        finally:
            engine.dispose()

    # ------------------------------------------------------------ internals
    @staticmethod
    def _check_db_name(name: str) -> None:
        if not _DB_NAME_RE.match(name):
            raise ValueError(f"invalid database name {name!r}: use [a-z_][a-z0-9_]*, at most 63 characters")

    def _as_root(self) -> bool:
        return os.geteuid() == 0

    def _owner(self) -> tuple[int, int]:
        if self._uid_gid is None:
            try:
                entry = pwd.getpwnam(self._run_as)
            except KeyError:
                raise PostgresError(
                    f"running as root, but there is no {self._run_as!r} system user to run PostgreSQL as "
                    "(PostgreSQL refuses to run as root); install the postgresql package or create the user"
                ) from None
            self._uid_gid = (entry.pw_uid, entry.pw_gid)
        return self._uid_gid

    def _make_root(self) -> Path:
        base = self._base_dir or Path(tempfile.gettempdir())
        if self._as_root() and not _world_traversable(base):
            base = Path("/tmp")  # the postgres user must be able to reach the data dir
        root = Path(tempfile.mkdtemp(prefix="subgate-pg-", dir=base))
        if len(str(root / "run")) > _MAX_SOCKET_DIR_LEN:
            os.rmdir(root)
            root = Path(tempfile.mkdtemp(prefix="subgate-pg-", dir="/tmp"))
        (root / "run").mkdir(mode=0o700)
        if self._as_root():
            uid, gid = self._owner()
            for path in (root, root / "run"):
                os.chown(path, uid, gid)
        return root

    def _prefix(self) -> list[str]:
        if not self._as_root():
            return []
        uid, gid = self._owner()
        runuser = shutil.which("runuser")
        if runuser:
            return [runuser, "-u", self._run_as, "--"]
        setpriv = shutil.which("setpriv")
        if setpriv:
            return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--init-groups", "--"]
        raise PostgresError("running as root but neither runuser nor setpriv is available to drop privileges")

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update({"LC_ALL": "C", "LANG": "C", "TZ": "UTC"})
        if self._as_root():
            env["HOME"] = str(self.root)
        return env

    def _run(self, argv: list[str], *, timeout: float, what: str) -> subprocess.CompletedProcess[str]:
        try:
            proc = subprocess.run(
                self._prefix() + argv,
                cwd=self.root,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as err:
            raise PostgresError(f"{what} timed out after {timeout:.0f}s\n{self.read_log()}") from err
        if proc.returncode != 0:
            raise PostgresError(
                f"{what} failed (exit {proc.returncode})\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
                f"\nserver log:\n{self.read_log()}"
            )
        return proc

    def _write_config(self) -> None:
        settings: dict[str, str] = {
            "listen_addresses": f"'{HOST}'",
            "unix_socket_directories": f"'{self.socket_dir}'",
            "fsync": "on" if self._fsync else "off",
            "synchronous_commit": "on",
            "full_page_writes": "on",
            "max_connections": "100",
            "shared_buffers": "32MB",
            "logging_collector": "off",
            "log_min_messages": "warning",
            "log_timezone": "'UTC'",
            "timezone": "'UTC'",
        }
        settings.update(self._extra_config)
        lines = ["", "# --- added by tests/support/postgres.py ---"]
        lines += [f"{key} = {value}" for key, value in settings.items()]
        conf = self.data_dir / "postgresql.conf"
        with open(conf, "a", encoding="utf-8") as fh:  # root may write; ownership is unchanged
            fh.write("\n".join(lines) + "\n")

    def _start_server(self, deadline: float) -> None:
        timeout = max(5.0, deadline - time.monotonic())
        self._run(
            [
                str(self.bindir / "pg_ctl"),
                "start",
                "-D",
                str(self.data_dir),
                "-l",
                str(self.log_path),
                "-o",
                f"-p {self.port}",
                "-w",
                "-t",
                str(int(timeout)),
            ],
            timeout=timeout + 10,
            what="pg_ctl start",
        )
        self._wait_ready(deadline)

    def _wait_ready(self, deadline: float) -> None:
        engine = sa.create_engine(self.url("postgres"), poolclass=NullPool, connect_args={"connect_timeout": 5})
        last: Exception | None = None
        try:
            while True:
                try:
                    with engine.connect() as conn:
                        conn.exec_driver_sql("SELECT 1").scalar_one()
                    return
                except Exception as err:  # noqa: BLE001 - retry until the deadline
                    last = err
                if time.monotonic() >= deadline:
                    raise PostgresError(
                        f"PostgreSQL on port {self.port} did not accept connections: {last}\n{self.read_log()}"
                    )
                time.sleep(0.2)
        finally:
            engine.dispose()

    def _port_conflict(self, log_offset: int) -> bool:
        log = self.read_log(max_chars=10**9)[log_offset:]
        return "could not bind" in log or "Address already in use" in log

    def _stop_server(self, mode: str) -> None:
        if mode not in ("smart", "fast", "immediate"):
            raise ValueError(f"invalid shutdown mode {mode!r}")
        pid = self.postmaster_pid()
        if pid is None or not _pid_alive(pid):
            return
        try:
            self._run(
                [
                    str(self.bindir / "pg_ctl"),
                    "stop",
                    "-D",
                    str(self.data_dir),
                    "-m",
                    mode,
                    "-w",
                    "-t",
                    str(int(self._stop_timeout)),
                ],
                timeout=self._stop_timeout + 10,
                what="pg_ctl stop",
            )
        except PostgresError:
            pass
        if _pid_alive(pid):
            self._kill_server()
        self._wait_port_closed()

    def _pid_is_ours(self, pid: int) -> bool:
        """Guard against a stale postmaster.pid whose PID was reused by another process."""
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            owner_uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            return not Path("/proc/self").exists()  # no /proc at all: trust the pid file
        if str(self.data_dir).encode() in cmdline:
            return True
        expected_uid = self._owner()[0] if self._as_root() else os.geteuid()
        return owner_uid == expected_uid and b"postgres" in cmdline

    def _kill_server(self) -> None:
        pid = self.postmaster_pid()
        if pid is None or not _pid_alive(pid) or not self._pid_is_ours(pid):
            return
        children = _children_of(pid)
        for target in [pid, *children]:
            try:
                os.kill(target, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_pid_alive(p) for p in [pid, *children]):
            time.sleep(0.05)
        # Give init a moment to reap the dead processes: a zombie postmaster makes PostgreSQL take
        # postmaster.pid and the socket lock file for a live server and refuse to start.
        reap_deadline = time.monotonic() + 1
        while time.monotonic() < reap_deadline and any(Path(f"/proc/{p}").exists() for p in [pid, *children]):
            time.sleep(0.05)
        if not any(_pid_alive(p) for p in [pid, *children]):
            (self.data_dir / "postmaster.pid").unlink(missing_ok=True)
            for lock in self.socket_dir.glob(".s.PGSQL.*.lock"):
                lock.unlink(missing_ok=True)
        self._wait_port_closed()

    def _wait_port_closed(self, timeout: float = 10.0) -> None:
        if self._port is None:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _port_open(self._port, timeout=0.2):
            time.sleep(0.05)

    def _start_watchdog(self) -> None:
        config = {
            "root": str(self.root),
            "data": str(self.data_dir),
            "pg_ctl": str(self.bindir / "pg_ctl"),
            "prefix": self._prefix(),
        }
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(_WATCHDOG_MAX_SECONDS), json.dumps(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # survive a signal sent to the test's whole process group
        )

    def _stop_watchdog(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is None or watchdog.poll() is not None:
            return
        watchdog.terminate()
        try:
            watchdog.wait(timeout=5)
        except subprocess.TimeoutExpired:
            watchdog.kill()
            watchdog.wait(timeout=5)

    def _register_atexit(self) -> None:
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True

    def __repr__(self) -> str:
        state = f"port={self._port} root={self._root}" if self._root else "stopped"
        return f"<PostgresCluster {state}>"
