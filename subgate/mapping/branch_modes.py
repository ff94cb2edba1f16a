"""Per-branch modes: what the journal keeps for replay, and when a publisher's message is confirmed.

Owns two operator settings of the form ``BRANCH=MODE`` (comma-separated in ``--journal-branches`` and
``--publisher-modes``, the same keys in the TOML file) and the rule that picks a node's mode: the most specific
branch that is the node's name or one of its ancestors (``a`` holds ``a/b/c``) wins; without one, the default.
A queue's name is its branch, so ``--publisher-modes orders=store_send_noconfirm`` covers the queue ``orders``
and the topics under ``orders/``. docs/bookmarks.md says why each mode exists.

Journal modes (topics only; a durable queue journals its persistent messages as ever):

* ``persistent`` (the default): every persistent message (``header.durable = true``) is journaled, whether or
  not a subscription exists, so that a later subscriber can replay it;
* ``all``: non-persistent messages too;
* ``off``: nothing is kept for replay; messages are journaled only while a durable subscription needs them.

Publisher modes (FTL's, queues and topics):

* ``store_confirm_send`` (the default): a journaled message is accepted once its row is committed;
* ``store_send_noconfirm``: it is accepted on receipt and written in the background; a failed write is logged
  and counted as a loss.
"""

from __future__ import annotations

PERSISTENT, ALL, OFF = "persistent", "all", "off"
JOURNAL_MODES = (PERSISTENT, ALL, OFF)
STORE_CONFIRM_SEND, STORE_SEND_NOCONFIRM = "store_confirm_send", "store_send_noconfirm"
PUBLISHER_MODES = (STORE_CONFIRM_SEND, STORE_SEND_NOCONFIRM)


class BranchModeError(ValueError):
    """A ``BRANCH=MODE`` entry without ``=``, with an empty branch, or with an unknown mode."""


def parse_branch_modes(entries: tuple[str, ...], modes: tuple[str, ...], setting: str) -> dict[str, str]:
    """``("prices=off", "audit/trades=all")`` → ``{"prices": "off", "audit/trades": "all"}``.

    Raises:
        BranchModeError: naming ``setting`` and the entry.
    """
    branches: dict[str, str] = {}
    for entry in entries:
        branch, equals, mode = entry.partition("=")
        branch, mode = branch.strip().strip("/"), mode.strip().lower()
        if not equals or not branch:
            raise BranchModeError(f"{setting} entry {entry!r} is not BRANCH=MODE")
        check_mode(mode, modes, f"{setting} entry {entry!r}")
        branches[branch] = mode
    return branches


def check_mode(mode: str, modes: tuple[str, ...], what: str) -> None:
    """Raises BranchModeError unless ``mode`` is one of ``modes``."""
    if mode not in modes:
        raise BranchModeError(f"{what}: the mode must be one of {', '.join(modes)}")


def parse_journal_branches(entries: tuple[str, ...]) -> dict[str, str]:
    return parse_branch_modes(entries, JOURNAL_MODES, "journal-branches")


def parse_publisher_modes(entries: tuple[str, ...]) -> dict[str, str]:
    return parse_branch_modes(entries, PUBLISHER_MODES, "publisher-modes")


def setting_branch(branches: dict[str, str], name: str) -> str | None:
    """The most specific branch of ``branches`` that is ``name`` or one of its ancestors, if any."""
    path = name
    while True:
        if path in branches:
            return path
        cut = path.rfind("/")
        if cut <= 0:
            return None
        path = path[:cut]


def mode_of(branches: dict[str, str], name: str, default: str) -> str:
    """The mode of the node ``name``: that of the most specific branch holding it, else ``default``."""
    branch = setting_branch(branches, name)
    return default if branch is None else branches[branch]


def journal_mode(branches: dict[str, str], topic: str) -> str:
    return mode_of(branches, topic, PERSISTENT)


def publisher_mode(branches: dict[str, str], name: str) -> str:
    return mode_of(branches, name, STORE_CONFIRM_SEND)
