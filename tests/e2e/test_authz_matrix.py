"""The authorization matrix on a live server: principal × operation × path (docs/permissions.md, "Who may use what").

One server (SQLite, ``--allow-anonymous``, the web console on ``--http``) for the module, on a store holding the
principals of ``tests.support.authz_matrix``: each has one to four permissions on the branch ``A`` (to itself or
through a role; or on the root except ``A``), or a global one, or the ``admin`` role, or nothing. Every operation of
the matrix is done once by every principal on ``A`` (inside its grants) and on ``B`` (outside), over one
connection per principal (``tests.support.authz_probes``). The whole matrix runs once; each cell is then a named
test comparing what the wire said with what the docs say, and a refusal must be ``amqp:unauthorized-access`` (or
the console's 401/403) naming a permission the principal lacks. Anonymous access without ``--allow-anonymous`` is
tests/e2e/test_auth.py's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.authz_matrix import NO, OPERATIONS, PRINCIPALS, cell_id, cells, markdown
from tests.support.authz_probes import PROBES, Actor, Seen, make_store, prepare_nodes, settle_selectors
from tests.support.server import SubgateProcess

HTTP = re.compile(r"HTTP endpoint on http://(\S+):(\d+)")

DOC = Path(__file__).resolve().parents[2] / "docs" / "permissions.md"
ADMIN = next(p for p in PRINCIPALS if p.admin)


@dataclass(frozen=True)
class Run:
    seen: dict[str, Seen]  # by cell_id
    log: str  # what the server logged meanwhile


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    workdir = tmp_path_factory.mktemp("authz-matrix")
    url = f"sqlite:///{workdir / 'subgate.db'}"
    make_store(url)
    server = SubgateProcess(url, workdir, "--allow-anonymous", "--http", "127.0.0.1:0").start()
    actors: list[Actor] = []
    try:
        prepare_nodes(server.address, ADMIN)
        http = HTTP.search(server.log())
        assert http, server.log()
        actors = [Actor.open(p, server.address, f"http://{http.group(1)}:{http.group(2)}") for p in PRINCIPALS]
        by_name = {a.name: a for a in actors}
        seen: dict[str, Seen] = {}
        for principal, operation, path in cells():
            try:
                seen[cell_id(principal, operation, path)] = PROBES[operation.name](by_name[principal.name], path)
            except Exception as exc:  # a timeout or a lost connection is this cell's answer, not the module's
                seen[cell_id(principal, operation, path)] = Seen("error", f"{type(exc).__name__}: {exc}")
        selector = next(op for op in OPERATIONS if op.name == "selector consumer")
        for (name, path), late in settle_selectors(actors, by_name[ADMIN.name]).items():
            seen[cell_id(next(p for p in PRINCIPALS if p.name == name), selector, path)] = late
        yield Run(seen, server.log())
    finally:
        for actor in actors:
            actor.close()
        server.stop(timeout=10)


@pytest.mark.parametrize(
    ("principal", "operation", "path"), [pytest.param(*cell, id=cell_id(*cell)) for cell in cells()]
)
def test_cell(observed, principal, operation, path):
    expected = operation.expected(principal, path)
    seen = observed.seen[cell_id(principal, operation, path)]
    assert seen.outcome == expected, f"{operation.wire} as {principal.name} on {path}: expected {expected}, saw {seen}"
    if expected == NO:
        missing = operation.missing(principal, path)
        assert any(name in seen.detail for name in missing), f"the refusal names none of {sorted(missing)}: {seen}"


def test_the_permissions_doc_shows_this_matrix():
    text = DOC.read_text()
    assert markdown() in text, "docs/permissions.md's matrix is stale: python -m tests.support.authz_matrix"


def test_the_server_logged_no_error_while_refusing(observed):
    """Refusals are ``info`` lines: none of the 572 cells may cost a traceback, an error or a warning."""
    bad = [line for line in observed.log.splitlines() if any(w in line for w in ("Traceback", " ERROR ", " WARNING "))]
    assert not bad, "\n".join(bad[:20])
