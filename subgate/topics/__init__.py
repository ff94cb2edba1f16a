"""The topic-tree engine: paths, Diffusion selectors, the tree, remove-with-session and missing-topic handlers.

Pure: standard library only (no proton, no SQLAlchemy), no I/O, no clock (time is passed in as numbers).

    paths          validate, split and relate topic paths
    selectors      parse ``>path``, ``?split/path``, ``*regex``, ``#set``; prefixes; seed 000's intersection
    tree           TopicTree[V]: topics, current values, selection by walking from a prefix
    index          SelectorIndex[K]: which subscribed selectors a path reaches, indexed by prefix
    registrations  remove-with-session rules (seed 001)
    handlers       missing-topic handler choice (seed 000)
    errors         the exceptions, each with its AMQP condition
"""

from __future__ import annotations

from subgate.topics.errors import (
    RegistrationConflict,
    SelectorError,
    TopicPathError,
    TopicsError,
    UnknownTopicError,
)
from subgate.topics.handlers import MissingTopicHandlers, Notification
from subgate.topics.index import SelectorIndex
from subgate.topics.paths import (
    are_related,
    common_prefix,
    is_ancestor_or_self,
    is_descendant,
    is_valid_path,
    join_path,
    parent,
    path_problem,
    split_branch,
    split_path,
    validate_path,
)
from subgate.topics.registrations import Closure, PendingRemoval, Registration, RemovalRegistry
from subgate.topics.selectors import (
    FullPathSelector,
    PathSelector,
    Qualifier,
    Selector,
    SelectorSet,
    SplitPathSelector,
    any_of,
    as_selector,
    intersects,
    parse_selector,
)
from subgate.topics.tree import TopicTree

__all__ = [
    "path_problem",
    "Closure",
    "FullPathSelector",
    "MissingTopicHandlers",
    "Notification",
    "PathSelector",
    "PendingRemoval",
    "Qualifier",
    "Registration",
    "RegistrationConflict",
    "RemovalRegistry",
    "Selector",
    "SelectorError",
    "SelectorIndex",
    "SelectorSet",
    "SplitPathSelector",
    "TopicPathError",
    "TopicTree",
    "TopicsError",
    "UnknownTopicError",
    "any_of",
    "are_related",
    "as_selector",
    "common_prefix",
    "intersects",
    "is_ancestor_or_self",
    "is_descendant",
    "is_valid_path",
    "join_path",
    "parent",
    "parse_selector",
    "split_branch",
    "split_path",
    "validate_path",
]
