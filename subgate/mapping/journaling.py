"""Which topic branches the journal keeps for replay (issue "bookmarks", docs/bookmarks.md "What the journal
holds").

Owns the per-branch journal setting (``--journal-branches`` / ``journal-branches`` in the TOML file, a
comma-separated list of ``BRANCH=MODE``) and the rule that picks a topic's mode: the most specific branch that
is the topic's path or one of its ancestors wins; without one, ``persistent``.

* ``persistent`` (the default): every persistent message (``header.durable = true``) published to the topic is
  journaled, whether or not a subscription exists, so that a later subscriber can replay it;
* ``all``: non-persistent messages too;
* ``off``: nothing is kept for replay; messages are journaled only while a durable subscription needs them.

Queues are not concerned: a durable queue journals its persistent messages as ever.
"""

from __future__ import annotations

PERSISTENT, ALL, OFF = "persistent", "all", "off"
MODES = (PERSISTENT, ALL, OFF)


class JournalBranchError(ValueError):
    """A ``journal-branches`` entry that is not ``BRANCH=MODE`` with a known mode."""


def parse_journal_branches(entries: tuple[str, ...]) -> dict[str, str]:
    """``("prices=off", "audit/trades=all")`` → ``{"prices": "off", "audit/trades": "all"}``.

    Raises:
        JournalBranchError: an entry without ``=``, with an empty branch, or with an unknown mode.
    """
    branches: dict[str, str] = {}
    for entry in entries:
        branch, equals, mode = entry.partition("=")
        branch, mode = branch.strip().strip("/"), mode.strip().lower()
        if not equals or not branch:
            raise JournalBranchError(f"journal-branches entry {entry!r} is not BRANCH=MODE")
        if mode not in MODES:
            raise JournalBranchError(f"journal-branches entry {entry!r}: the mode must be one of {', '.join(MODES)}")
        branches[branch] = mode
    return branches


def journal_mode(branches: dict[str, str], topic: str) -> str:
    """The mode of ``topic``: that of the most specific branch holding it, else ``persistent``."""
    path = topic
    while True:
        mode = branches.get(path)
        if mode is not None:
            return mode
        cut = path.rfind("/")
        if cut <= 0:
            return PERSISTENT
        path = path[:cut]
