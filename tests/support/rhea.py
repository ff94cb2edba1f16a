"""Python wrapper around the Node.js rhea interop client (``tests/interop/rhea_client.js``).

    from tests.support.rhea import run_rhea, rhea_available, messages_of, summary_of

    lines = run_rhea("send", "--url", url, "--address", "q1", "--count", 3)
    assert summary_of(lines)["accepted"] == 3
    got = messages_of(run_rhea("receive", "--url", url, "--address", "q1", "--count", 3))

``run_rhea`` returns the JSON lines the script printed, as dicts. When the script fails (exit status
not 0) it raises :class:`RheaError`, whose ``error`` holds the script's ``{"condition", "description",
"stage"}`` object and ``lines`` everything printed before; pass ``check=False`` to get the lines
(ending with ``{"error": ...}``) instead.

Node is taken from ``$SUBGATE_NODE`` or ``PATH``; the npm dependencies must be installed in
``tests/interop/node_modules`` (``scripts/install-test-deps`` does it).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

__all__ = [
    "INTEROP_DIR",
    "RHEA_CLIENT",
    "RheaError",
    "RheaUnavailableError",
    "messages_of",
    "node_executable",
    "outcomes_of",
    "rhea_available",
    "run_rhea",
    "summary_of",
]

INTEROP_DIR = Path(__file__).resolve().parent.parent / "interop"
RHEA_CLIENT = INTEROP_DIR / "rhea_client.js"
_JS_DEFAULT_TIMEOUT = 20.0


class RheaError(RuntimeError):
    """The rhea client exited with a failure (or had to be killed)."""

    def __init__(
        self,
        message: str,
        *,
        argv: list[str],
        returncode: int | None,
        lines: list[dict[str, Any]],
        stderr: str,
    ) -> None:
        super().__init__(message)
        self.argv = argv
        self.returncode = returncode
        self.lines = lines
        self.stderr = stderr
        errors = [line["error"] for line in lines if isinstance(line.get("error"), dict)]
        self.error: dict[str, Any] | None = errors[-1] if errors else None

    @property
    def condition(self) -> str | None:
        """The AMQP error condition (e.g. ``amqp:unauthorized-access``), ``timeout``, ``ECONNREFUSED``..."""
        return None if self.error is None else self.error.get("condition")

    @property
    def stage(self) -> str | None:
        """Where it failed: usage, connect, open, attach, link, session, connection, protocol, timeout."""
        return None if self.error is None else self.error.get("stage")


class RheaUnavailableError(RheaError):
    """node or the npm dependencies are missing."""


def node_executable() -> str | None:
    """Path of the ``node`` binary (``$SUBGATE_NODE`` overrides PATH), or None."""
    override = os.environ.get("SUBGATE_NODE")
    if override:
        return override if os.access(override, os.X_OK) else None
    return shutil.which("node")


@functools.lru_cache(maxsize=1)
def _node_works(node: str) -> bool:
    try:
        proc = subprocess.run(
            [node, "--version"],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    version = proc.stdout.strip().lstrip("v").split(".")[0]
    return proc.returncode == 0 and version.isdigit() and int(version) >= 18


def _unavailable_reason() -> str | None:
    node = node_executable()
    if node is None:
        return "node is not installed (run scripts/install-test-deps)"
    if not _node_works(node):
        return f"{node} does not run or is older than Node.js 18"
    if not RHEA_CLIENT.is_file():
        return f"{RHEA_CLIENT} is missing"
    if not (INTEROP_DIR / "node_modules" / "rhea" / "package.json").is_file():
        return f"rhea is not installed in {INTEROP_DIR}/node_modules (run scripts/install-test-deps)"
    return None


def rhea_available() -> bool:
    """True if node (>= 18) and the rhea npm package are installed, so ``run_rhea`` can work."""
    return _unavailable_reason() is None


def _parse_lines(stdout: str) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = []
    for raw in stdout.splitlines():
        raw = raw.strip()
        if not raw:
            continue
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = {"raw": raw}
        lines.append(value if isinstance(value, dict) else {"value": value})
    return lines


def run_rhea(
    *args: str | int | float | os.PathLike[str], timeout: float = 30, check: bool = True
) -> list[dict[str, Any]]:
    """Run ``node tests/interop/rhea_client.js *args`` and return its JSON output lines.

    :param args: sub-command and flags, e.g. ``"send", "--url", url, "--address", "q", "--count", 5``
        (non-string values are converted with ``str``).
    :param timeout: hard limit in seconds for the node process. Unless ``--timeout`` is among
        ``args``, the script is given ``--timeout min(20, timeout - 2)`` so that it reports a JSON
        timeout error before being killed.
    :param check: raise :class:`RheaError` if the script fails; otherwise return the lines anyway.
    """
    argv_tail = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
    reason = _unavailable_reason()
    node = node_executable()
    if reason is not None or node is None:
        raise RheaUnavailableError(
            f"cannot run the rhea client: {reason}", argv=argv_tail, returncode=None, lines=[], stderr=""
        )
    if "--timeout" not in argv_tail and not any(a.startswith("--timeout=") for a in argv_tail):
        js_timeout = min(_JS_DEFAULT_TIMEOUT, max(0.5, timeout - 2))
        argv_tail += ["--timeout", f"{js_timeout:g}"]
    argv = [node, str(RHEA_CLIENT), *argv_tail]
    try:
        proc = subprocess.run(
            argv,
            cwd=INTEROP_DIR,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
        stderr = err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else (err.stderr or "")
        lines = _parse_lines(out)
        raise RheaError(
            f"rhea client killed after {timeout}s: {' '.join(argv_tail)}\nstderr:\n{stderr[-4000:]}",
            argv=argv_tail,
            returncode=None,
            lines=lines,
            stderr=stderr,
        ) from err
    lines = _parse_lines(proc.stdout)
    if check and proc.returncode != 0:
        errors = [line["error"] for line in lines if isinstance(line.get("error"), dict)]
        detail = json.dumps(errors[-1]) if errors else proc.stdout[-2000:]
        raise RheaError(
            f"rhea client failed (exit {proc.returncode}): {' '.join(argv_tail)}\n"
            f"error: {detail}\nstderr:\n{proc.stderr[-4000:]}",
            argv=argv_tail,
            returncode=proc.returncode,
            lines=lines,
            stderr=proc.stderr,
        )
    return lines


def messages_of(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``message`` objects of a ``receive`` run, in arrival order."""
    return [line["message"] for line in lines if line.get("event") == "message"]


def outcomes_of(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-message outcome lines of a ``send`` run (``{"index", "outcome", ["error"]}``)."""
    return [line for line in lines if line.get("event") == "outcome"]


def summary_of(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``summary`` object of a run (``{}`` if there is none)."""
    for line in reversed(lines):
        if isinstance(line.get("summary"), dict):
            return dict(line["summary"])
    return {}
