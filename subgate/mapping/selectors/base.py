"""The selector package's shared vocabulary: ``SelectorError`` (with the offset of the problem), ``Lookup`` (how
a selector reads a message) and ``Run`` (the type of every evaluator closure). Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Lookup = Callable[[str], object]
Run = Callable[[Lookup], Any]


class SelectorError(ValueError):
    """A selector that is not valid JMS. ``position`` is the 0-based offset of the problem in the text."""

    def __init__(self, problem: str, position: int) -> None:
        super().__init__(f"{problem} at position {position}")
        self.problem = problem
        self.position = position
