"""The authorization matrix's expectations: principal × operation × path, written from docs/permissions.md.

Owns the table the live test (``tests/e2e/test_authz_matrix.py``) checks on the wire and docs/permissions.md
shows ("Who may use what"): which grants each principal holds (all on the branch ``A``), which permissions each
operation needs according to the "What the broker checks" table of docs/permissions.md, and the outcome each cell
should have. Nothing here asks the server or imports the broker's rules: the expectation of a cell is the
documented need of the operation against the principal's grants, by plain set containment.

Outcomes
    ``yes``: the operation works (attached, sent and accepted, answered 2xx).
    ``no``: refused with ``amqp:unauthorized-access`` (a refused attach, or a message settled rejected), naming
    one of the permissions the principal lacks; on the web console, 401 (no credentials) or 403.
    ``empty``: allowed, but nothing the principal may not read reaches it (a fetch or a selector consumer with
    ``SELECT_TOPIC`` and without ``READ_TOPIC``).
"""

from __future__ import annotations

from dataclasses import dataclass

SELECT, READ, UPDATE, MODIFY = "SELECT_TOPIC", "READ_TOPIC", "UPDATE_TOPIC", "MODIFY_TOPIC"
HANDLER, CONTROL = "REGISTER_HANDLER", "CONTROL_SERVER"
GLOBAL = frozenset({HANDLER, CONTROL})
ORDER = (SELECT, READ, UPDATE, MODIFY, HANDLER, CONTROL)  # the order docs/permissions.md lists them in

GRANTED = "A"  # the branch every path-scoped grant of the matrix names
OUTSIDE = "B"  # a sibling branch no principal but the administrator has a grant on
PATHS = (GRANTED, OUTSIDE)

YES, NO, EMPTY = "yes", "no", "empty"


@dataclass(frozen=True)
class Principal:
    """A user of the matrix's store (or ``anonymous``): ``grants`` are allowed on ``A`` (path-scoped ones; when
    ``inverted``, allowed on the root and denied on ``A``) or globally, to the principal or to its ``role``;
    ``admin`` holds the built-in role instead."""

    name: str
    grants: frozenset[str] = frozenset()
    admin: bool = False
    role: str | None = None  # the grants are made to this role, which the principal holds
    inverted: bool = False  # the path-scoped grants allow on the root and deny on ``A`` instead
    note: str = ""

    def holds(self, permission: str, path: str) -> bool:
        if self.admin:
            return True
        if permission in GLOBAL:
            return permission in self.grants
        return (path == GRANTED) != self.inverted and permission in self.grants


@dataclass(frozen=True)
class Operation:
    """What a client does on a path ``P`` (``A`` or ``B``), the permissions docs/permissions.md says it needs
    there, and (``shows``) the ones it needs to be given the topics' messages once allowed."""

    name: str
    wire: str
    needs: frozenset[str]
    shows: frozenset[str] = frozenset()

    def expected(self, principal: Principal, path: str) -> str:
        if not all(principal.holds(p, path) for p in self.needs):
            return NO
        if not all(principal.holds(p, path) for p in self.shows):
            return EMPTY
        return YES

    def missing(self, principal: Principal, path: str) -> frozenset[str]:
        """The needed permissions ``principal`` lacks on ``path``: a refusal must name one of them."""
        return frozenset(p for p in self.needs if not principal.holds(p, path))


def _p(*names: str) -> frozenset[str]:
    return frozenset(names)


PRINCIPALS: tuple[Principal, ...] = (
    Principal("admin", admin=True),
    Principal("selector", _p(SELECT)),
    Principal("reader", _p(READ)),
    Principal("subscriber", _p(SELECT, READ)),
    Principal("publisher", _p(UPDATE)),
    Principal("modifier", _p(MODIFY)),
    Principal("creator", _p(UPDATE, MODIFY)),
    Principal("handler", _p(HANDLER)),
    Principal("operator", _p(CONTROL)),
    Principal("member", _p(SELECT, READ, UPDATE), role="team", note="through the role `team`"),
    Principal("excluded", _p(SELECT, READ, UPDATE, MODIFY), inverted=True),
    Principal("nobody", note="a user without grants"),
    Principal("anonymous", _p(SELECT, READ), note="SASL ANONYMOUS, `--allow-anonymous`"),
)

OPERATIONS: tuple[Operation, ...] = (
    Operation("send to topic", "sender, target `P/t` (capability `topic`), one message", _p(UPDATE)),
    Operation("send to queue", "sender, target `P/q` (capability `queue`), one message", _p(UPDATE)),
    Operation("send creating a topic", "sender, target `P/new-…` (auto-create), one message", _p(UPDATE, MODIFY)),
    Operation("relay to topic", "anonymous relay (null target), a message with `to` `P/t`", _p(UPDATE)),
    Operation("relay to queue", "anonymous relay, a message with `to` `P/q`", _p(UPDATE)),
    Operation("relay creating a topic", "anonymous relay, `to` a new topic `P/new-…`", _p(UPDATE, MODIFY)),
    Operation("transactional send", "declare, sender on `P/t`, send in it, commit", _p(UPDATE)),
    Operation("transactional relay", "declare, relay `to` `P/t` in it, commit", _p(UPDATE)),
    Operation("transaction coordinator", "coordinator attach, declare, discharge (no path)", _p()),
    Operation("receive from topic", "receiver, source `P/t` (capability `topic`)", _p(SELECT, READ)),
    Operation("durable subscription", "JMS shared durable subscriber (global) on `P/t`", _p(SELECT, READ)),
    Operation("receive from queue", "receiver, source `P/q` (capability `queue`)", _p(READ)),
    Operation("browse queue", "receiver, source `P/q`, distribution-mode `copy`", _p(READ)),
    Operation("browse subscription", "distribution-mode `copy`, source `P/t::keep-P:global`", _p(SELECT, READ)),
    Operation("selector consumer", "receiver, source `?P/.*`", _p(SELECT), _p(READ)),
    Operation("fetch", "receiver, source `?P/.*`, capability `fetch`", _p(SELECT), _p(READ)),
    Operation("unsubscribe", "null-source lookup of a global subscription on `P/t`, closed", _p(SELECT, READ)),
    Operation("management read", "`$management` `READ` of queue `P/q`", _p(CONTROL)),
    Operation("management write", "`$management` `CREATE` of topic `P/m-…`", _p(CONTROL)),
    Operation("console action", "web console `POST /api/topics/remove` of `P/gone-…`, basic credentials", _p(CONTROL)),
    Operation("missing-topic handler", "receiver, source `$subgate/missing-topic/P`", _p(HANDLER)),
    Operation("remove-with-session", "sender, target `$subgate/remove-with-session/P`", _p(MODIFY)),
)  # fmt: skip


def cells() -> list[tuple[Principal, Operation, str]]:
    return [(p, op, path) for op in OPERATIONS for p in PRINCIPALS for path in PATHS]


def cell_id(principal: Principal, operation: Operation, path: str) -> str:
    return f"{principal.name}-{operation.name.replace(' ', '_')}-{'inside' if path == GRANTED else 'outside'}"


def expectations() -> dict[str, str]:
    return {cell_id(p, op, path): op.expected(p, path) for p, op, path in cells()}


BEGIN = "<!-- authz-matrix:begin (generated by tests/support/authz_matrix.py; do not edit by hand) -->"
END = "<!-- authz-matrix:end -->"


def markdown() -> str:
    """The matrix as docs/permissions.md shows it: the principals, then an operation per row and a principal per
    column, each cell ``inside / outside`` the granted branch, then how each operation is done on the wire."""
    lines = [
        BEGIN,
        "",
        "| principal | grants |",
        "|---|---|",
        *(f"| `{p.name}` | {_grants(p)} |" for p in PRINCIPALS),
        "",
        f"Each cell: the outcome on `P` = `{GRANTED}` (inside the grants) / on `P` = `{OUTSIDE}` (outside). "
        "`yes`: it works; `no`: refused with `amqp:unauthorized-access` (the web console: HTTP 401 without "
        "credentials, else 403) naming a permission the principal lacks; `empty`: allowed, but no topic's message "
        "or value is sent (no `READ_TOPIC`).",
        "",
        "| operation on `P` | needs | " + " | ".join(f"`{p.name}`" for p in PRINCIPALS) + " |",
        "|---|---|" + "---|" * len(PRINCIPALS),
    ]
    for op in OPERATIONS:
        needs = _names(op.needs) or "nothing"
        if op.shows:
            needs += "; " + _names(op.shows) + " to be sent a topic"
        row = " | ".join(f"{op.expected(p, GRANTED)} / {op.expected(p, OUTSIDE)}" for p in PRINCIPALS)
        lines.append(f"| {op.name} | {needs} | {row} |")
    lines += ["", "On the wire:", ""]
    lines += [f"- {op.name}: {op.wire}" for op in OPERATIONS]
    lines += ["", END]
    return "\n".join(lines)


def _names(permissions: frozenset[str]) -> str:
    return " and ".join(f"`{p}`" for p in ORDER if p in permissions)


def _grants(principal: Principal) -> str:
    if principal.admin:
        return "the role `admin` (everything)"
    scoped = principal.grants - GLOBAL
    where = f"on the root, denied on `{GRANTED}`" if principal.inverted else f"on `{GRANTED}`"
    parts = ([f"{_names(scoped)} {where}"] if scoped else []) + (
        [_names(principal.grants & GLOBAL)] if principal.grants & GLOBAL else []
    )
    text = ", ".join(parts) or "none"
    return f"{text} ({principal.note})" if principal.note else text


if __name__ == "__main__":
    print(markdown())
