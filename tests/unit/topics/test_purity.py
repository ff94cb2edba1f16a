"""topics is pure: it imports only the standard library, itself and RE2 (``topics.regex``: a regex engine, no I/O);
no proton, no SQLAlchemy."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from subgate import topics

PACKAGE = Path(topics.__file__).parent


def _imported_roots(source: str) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_only_stdlib_and_topics_are_imported():
    allowed = set(sys.stdlib_module_names) | {"subgate", "__future__", "re2"}
    for module in sorted(PACKAGE.glob("*.py")):
        foreign = _imported_roots(module.read_text()) - allowed
        assert not foreign, f"{module.name} imports {sorted(foreign)}"
