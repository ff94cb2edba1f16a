"""Who may do what on which topic path: the permission model and the rules that decide (design.md §3).

Owns the permission names, the ``Grant`` record, the resolution rule and the default policy. Knows nothing of
proton or the store: the store hands its rows over as ``Grant``s (``storage.permissions.load_policy``) and the
broker asks ``Policy.check(principal, permission, path)``, which raises ``Refused(amqp:unauthorized-access)``.
Paths are not validated here (``topics.paths`` does that where they come in); they are compared by whole
``/``-separated segments, and the root of the tree is ``""``.

Permissions
    Path-scoped: ``SELECT_TOPIC``, ``READ_TOPIC``, ``UPDATE_TOPIC``, ``MODIFY_TOPIC``. A grant on a path covers
    that path and every path below it. Global: ``REGISTER_HANDLER``, ``CONTROL_SERVER``; their grants have no path.

Subjects
    A grant names a principal (``subject_kind="principal"``) or a role (``"role"``). A principal holds the grants
    made to its name plus those made to each of its roles. An anonymous connection is the principal named
    ``anonymous`` (``ANONYMOUS``) with no roles.

Resolution (``resolve``)
    1. Only grants for the permission asked about, to the principal or to one of its roles, count.
    2. Path-scoped: of those, only grants whose path is the topic path or an ancestor of it count, by whole
       segments (``a/b`` covers ``a/b/c`` but not ``a/bc``; the root covers everything). The most specific one
       decides: the grant with the most segments. Grants may deny (``allow=False``), so an operator can take a
       right away below a granted branch and give it back further down. At equal specificity a denial beats an
       allow, whether it was made to the principal or to a role. No applicable grant: denied.
    3. Global: there is no path, so every grant is equally specific: allowed when some grant allows and none
       denies. A global permission is only ever granted explicitly; no path-scoped grant implies it.

Default policy (``Policy``)
    - No principal in the store: everybody, anonymous included, has every permission. This is what makes
      ``make run`` work out of the box (the gateway also allows SASL ANONYMOUS while no principal exists).
    - Once a principal exists, only grants count: an anonymous connection (if anonymous access is still allowed)
      has what the grants to ``anonymous`` give, and an authenticated principal what its own and its roles'
      grants give; nothing else.
    - The built-in role ``admin`` (``ADMIN_ROLE``) holds an allow on the root for every path-scoped permission
      and both global permissions, as if those grants were stored. They are ordinary grants to the rule above,
      so a stored denial to ``admin`` or to the principal can still narrow an administrator down.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from subgate.mapping.errors import UNAUTHORIZED, Refused

SEPARATOR = "/"
ANONYMOUS = "anonymous"
ADMIN_ROLE = "admin"

SubjectKind = Literal["principal", "role"]
PRINCIPAL: SubjectKind = "principal"
ROLE: SubjectKind = "role"
SUBJECT_KINDS: frozenset[str] = frozenset({PRINCIPAL, ROLE})


class Permission(StrEnum):
    """The six permissions of design.md §3; the value is the name operators type and the store keeps."""

    SELECT_TOPIC = "SELECT_TOPIC"  # subscribe to / fetch the topics a selector matches
    READ_TOPIC = "READ_TOPIC"  # receive a topic's messages and state
    UPDATE_TOPIC = "UPDATE_TOPIC"  # publish to a topic
    MODIFY_TOPIC = "MODIFY_TOPIC"  # create and remove topics, register remove-with-session on a branch
    REGISTER_HANDLER = "REGISTER_HANDLER"  # register a missing-topic handler (global)
    CONTROL_SERVER = "CONTROL_SERVER"  # management operations on the server (global)

    @property
    def scoped(self) -> bool:
        """True for the path-scoped permissions, False for the global ones."""
        return self not in GLOBAL_PERMISSIONS


GLOBAL_PERMISSIONS: frozenset[Permission] = frozenset({Permission.REGISTER_HANDLER, Permission.CONTROL_SERVER})
PATH_PERMISSIONS: frozenset[Permission] = frozenset(set(Permission) - GLOBAL_PERMISSIONS)


def parse_permission(name: str) -> Permission:
    """The permission called ``name`` (case-insensitive; ``-`` may stand for ``_``).

    Raises:
        ValueError: naming the valid permissions.
    """
    try:
        return Permission(name.strip().upper().replace("-", "_"))
    except ValueError:
        valid = ", ".join(p.value for p in Permission)
        raise ValueError(f"unknown permission {name!r}; expected one of {valid}") from None


@dataclass(frozen=True, slots=True)
class Grant:
    """One allow (or, with ``allow=False``, one denial) of a permission to a principal or a role.

    ``path`` is normalised: ``""`` (the root) for a path-scoped permission given ``None``, and ``None`` for a
    global permission. A global permission given a non-root path, or an unknown subject kind, raises ValueError.
    """

    subject_kind: SubjectKind
    subject: str
    permission: Permission
    path: str | None = None
    allow: bool = True

    def __post_init__(self) -> None:
        if self.subject_kind not in SUBJECT_KINDS:
            raise ValueError(f"subject kind must be 'principal' or 'role', not {self.subject_kind!r}")
        permission = parse_permission(self.permission)
        object.__setattr__(self, "permission", permission)
        if permission.scoped:
            object.__setattr__(self, "path", self.path or "")
        elif self.path:
            raise ValueError(f"{permission} is a global permission: it takes no path (got {self.path!r})")
        else:
            object.__setattr__(self, "path", None)


def depth(path: str) -> int:
    """How specific a grant path is: its number of segments; the root ``""`` has none."""
    return 0 if path == "" else path.count(SEPARATOR) + 1


def covers(grant_path: str, path: str) -> bool:
    """True when ``grant_path`` is ``path`` or an ancestor of it, by whole segments (the root covers all)."""
    return grant_path == "" or path == grant_path or path.startswith(grant_path + SEPARATOR)


def resolve(
    principal: str | None,
    roles: frozenset[str],
    grants: Iterable[Grant],
    permission: Permission,
    path: str | None = None,
) -> bool:
    """Whether ``principal`` (None = anonymous) holding ``roles`` has ``permission`` on ``path``.

    Applies the resolution rule of the module docstring to ``grants`` (any grants; those for other subjects or
    permissions are skipped). ``path`` is a topic path or branch (None or ``""`` = the root); it is ignored for
    a global permission.
    """
    name = ANONYMOUS if principal is None else principal
    target = path or ""
    best = -1  # depth of the most specific applicable grant so far
    verdict = False
    for grant in grants:
        if grant.permission != permission or not _holds(grant, name, roles):
            continue
        if grant.path is None:  # global: every grant is equally specific
            if not grant.allow:
                return False
            verdict = True
            continue
        if not covers(grant.path, target):
            continue
        specificity = depth(grant.path)
        if specificity > best:
            best, verdict = specificity, grant.allow
        elif specificity == best:
            verdict = verdict and grant.allow  # at equal specificity a denial wins
    return verdict


def _holds(grant: Grant, principal: str, roles: frozenset[str]) -> bool:
    if grant.subject_kind == PRINCIPAL:
        return grant.subject == principal
    return grant.subject in roles


ADMIN_GRANTS: tuple[Grant, ...] = tuple(Grant(ROLE, ADMIN_ROLE, p) for p in Permission)


def refusal(
    principal: str | None, permission: Permission, path: str | None = None, node_kind: str | None = None
) -> Refused:
    """The ``amqp:unauthorized-access`` refusal naming who was denied which permission where, and how to grant
    it. ``node_kind`` (``queue`` or ``topic``) names the node by what it is: permissions are path-scoped for
    queues and topics alike, but "topic path 'q1'" for a queue would mislead."""
    who = "anonymous" if principal is None else f"principal {principal!r}"
    subject = "--user anonymous" if principal is None else f"--user {principal}"
    if not permission.scoped:  # anonymous holds no roles; a user may get the permission through the admin role
        role = (
            ""
            if principal is None
            else f", or the role that holds every permission: subgate roles assign admin {principal}"
        )
        return Refused(
            UNAUTHORIZED, f"{permission} denied to {who} (grant: subgate grants add {permission} {subject}{role})"
        )
    where = (f"{node_kind} {path!r}" if node_kind else f"topic path {path!r}") if path else "the root"
    hint = f"subgate grants add {permission} {subject}" + (f" --path {path}" if path else "")
    if permission is Permission.MODIFY_TOPIC and node_kind:
        return Refused(UNAUTHORIZED, f"may not create {where}: {permission} denied to {who} (grant: {hint})")
    return Refused(UNAUTHORIZED, f"{permission} on {where} denied to {who} (grant: {hint})")


@dataclass(frozen=True)
class Policy:
    """The default policy over what the store holds (module docstring), ready to ask from the broker.

    Build it from ``storage.permissions.load_policy(session)``: ``Policy(*load_policy(session))``. It is
    immutable, so the broker can swap in a freshly loaded one whenever grants change. Grants are indexed by
    subject and permission, so a check looks only at the grants of the principal and its roles.
    """

    principal_count: int
    grants: tuple[Grant, ...] = ()
    roles_by_principal: Mapping[str, frozenset[str]] = field(default_factory=dict)
    _index: dict[tuple[str, str, Permission], tuple[Grant, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[tuple[str, str, Permission], list[Grant]] = {}
        for grant in (*ADMIN_GRANTS, *self.grants):
            index.setdefault((grant.subject_kind, grant.subject, grant.permission), []).append(grant)
        object.__setattr__(self, "_index", {key: tuple(value) for key, value in index.items()})

    @property
    def open(self) -> bool:
        """True while no principal exists: everybody may do everything."""
        return self.principal_count == 0

    def roles_of(self, principal: str | None) -> frozenset[str]:
        """The roles ``principal`` holds; an anonymous connection holds none."""
        if principal is None:
            return frozenset()
        return self.roles_by_principal.get(principal, frozenset())

    def allows(self, principal: str | None, permission: Permission, path: str | None = None) -> bool:
        """Whether ``principal`` (None = anonymous connection) has ``permission`` on ``path`` (None = root)."""
        if self.open:
            return True
        roles = self.roles_of(principal)
        name = ANONYMOUS if principal is None else principal
        relevant = list(self._index.get((PRINCIPAL, name, permission), ()))
        for role in roles:
            relevant.extend(self._index.get((ROLE, role, permission), ()))
        return resolve(principal, roles, relevant, permission, path)

    def check(
        self, principal: str | None, permission: Permission, path: str | None = None, node_kind: str | None = None
    ) -> None:
        """Return quietly when allowed, else raise ``Refused(amqp:unauthorized-access, ...)`` (``refusal``)."""
        if not self.allows(principal, permission, path):
            raise refusal(principal, permission, path, node_kind)


OPEN_POLICY = Policy(principal_count=0)
"""The policy of a store without principals: everything is allowed."""
