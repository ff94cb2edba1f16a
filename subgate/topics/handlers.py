"""Missing-topic handlers: which handlers hear of a subscribe or fetch whose selector selected no topic.

Owns the handler registrations and the choice; knows nothing of links, messages or answers. ``H`` is whatever
identifies a handler to the caller (its link). Deciding *whether* a notification is due (no topic selected,
fan-out conditions) is the caller's; this module only says *who* is notified.

Rules (seed 000, design §3 "Missing-topic handler"):
1. A handler registers against a branch: a topic path, or the root (``""``), covering it and everything below
   it. Several handlers may register on one path; one handler may register on several paths.
2. For a selector with path prefix ``P`` the notified paths are:
   a. the *covering* path: the most specific registered path that is ``P`` or an ancestor of ``P`` (the root
      when nothing more specific is registered). Every topic the selector can select lies in its branch;
      registered paths above it are less specific and are not notified ("the handler for the most specific
      topic path is notified");
   b. each registered path strictly below ``P`` whose branch the selector may reach
      (``Selector.may_select_within``: exact for path and split-path selectors, prefix-only for full-path ones,
      seed 000). A topic there would belong to that more specific branch, so its handler must hear of it.
   For a single-path subscription (``>a/b/c``) only (a) applies: exactly one path is notified. A selector set
   notifies the union of what each member would (each member has its own prefix, so the set's common prefix
   would make a less specific path win).
3. Exactly one handler per notified path, round robin over the handlers registered on it, in registration
   order ("if there is more than one handler for a path, the server notifies a single handler"). Only
   ``choose`` moves the rotation; ``candidates`` looks without choosing.
4. The caller waits for every notified handler; any cancel refuses (design §3). That is not decided here.

Cost: (a) walks the depth of ``P``; (b) walks only the handler paths below ``P``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from subgate.topics.paths import split_path
from subgate.topics.selectors import Selector, SelectorSet, as_selector
from subgate.topics.tree import TopicTree

H = TypeVar("H", bound=Hashable)
ROOT = ""


@dataclass(frozen=True)
class Notification(Generic[H]):
    """Notify ``handler``, registered on the branch ``path``."""

    path: str
    handler: H


class MissingTopicHandlers(Generic[H]):
    """Missing-topic handlers by branch, with a fair choice among handlers on the same branch."""

    def __init__(self) -> None:
        # Per path, the handlers in rotation order: a dict used as an ordered set (first = next to notify).
        self._tree: TopicTree[dict[H, None]] = TopicTree()
        self._root: dict[H, None] = {}  # handlers on the root ("")
        self._paths_of: dict[H, set[str]] = {}

    def register(self, path: str, handler: H) -> bool:
        """Register ``handler`` on the branch ``path``. Returns False if it was already registered there.

        Raises:
            TopicPathError: the path is not a valid topic path.
        """
        if path != ROOT:
            split_path(path)
            self._tree.add(path, {})
        ring = self._ring(path)
        if handler in ring:
            return False
        ring[handler] = None
        self._paths_of.setdefault(handler, set()).add(path)
        return True

    def deregister(self, path: str, handler: H) -> bool:
        """Remove ``handler`` from ``path``. Returns False if it was not registered there."""
        paths = self._paths_of.get(handler)
        if paths is None or path not in paths:
            return False
        paths.discard(path)
        if not paths:
            del self._paths_of[handler]
        ring = self._ring(path)
        del ring[handler]
        if not ring and path != ROOT:
            self._tree.remove(path)
        return True

    def deregister_all(self, handler: H) -> list[str]:
        """Remove ``handler`` from every path (its connection went away). Returns those paths, sorted."""
        paths = sorted(self._paths_of.get(handler, ()))
        for path in paths:
            self.deregister(path, handler)
        return paths

    def handlers(self, path: str) -> tuple[H, ...]:
        """The handlers on exactly ``path``, next to be notified first."""
        return tuple(self._ring(path)) if path == ROOT or path in self._tree else ()

    def paths(self) -> list[str]:
        """Every path with at least one handler (the root as ``""``, first)."""
        return ([ROOT] if self._root else []) + list(self._tree.paths())

    def candidates(self, selector: Selector | str) -> list[str]:
        """The paths a notification for ``selector`` goes to (rule 2): covering path first, then those below."""
        parsed = as_selector(selector)
        if isinstance(parsed, SelectorSet):
            return list(dict.fromkeys(path for member in parsed.members for path in self.candidates(member)))
        prefix = parsed.prefix
        covering = self._tree.closest(prefix) if prefix != ROOT else None
        if covering is None and self._root:
            covering = ROOT
        below = (path for path in self._tree.paths(prefix) if path != prefix and parsed.may_select_within(path))
        return ([] if covering is None else [covering]) + list(below)

    def choose(self, selector: Selector | str) -> list[Notification[H]]:
        """One handler per notified path (rules 2 and 3), advancing each path's rotation."""
        return [Notification(path, self._rotate(path)) for path in self.candidates(selector)]

    def _rotate(self, path: str) -> H:
        ring = self._ring(path)
        handler = next(iter(ring))
        del ring[handler]
        ring[handler] = None  # to the back of the queue
        return handler

    def _ring(self, path: str) -> dict[H, None]:
        if path == ROOT:
            return self._root
        ring = self._tree.get(path)
        assert ring is not None  # every handler path is stored with a ring
        return ring
