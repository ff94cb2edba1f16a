"""``subgate.client`` is the SDK applications import: proton and the standard library only, never the broker's own
packages (docs/architecture.md). Importing every module of it loads none of them, and no module names one."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import subgate

ROOT = Path(subgate.__file__).resolve().parent
BROKER = (
    "subgate.gateway",
    "subgate.storage",
    "subgate.engine",
    "subgate.mapping",
    "subgate.topics",
    "subgate.cli",
    "subgate.migrations",
)
FORBIDDEN_ROOTS = {"sqlalchemy", "alembic", "psycopg", "click", "rich"}

IMPORT_EVERYTHING = """
import importlib, json, pkgutil, sys
package = importlib.import_module("subgate.client")
for info in pkgutil.walk_packages(package.__path__, "subgate.client."):
    importlib.import_module(info.name)
print(json.dumps(sorted(sys.modules)))
"""


def test_importing_every_client_module_loads_nothing_of_the_broker():
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERYTHING], cwd=ROOT.parent, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert len([m for m in loaded if m.startswith("subgate.client.")]) > 5
    broker = [m for m in loaded if any(m == p or m.startswith(p + ".") for p in BROKER)]
    assert broker == []
    assert [m for m in loaded if m.split(".")[0] in FORBIDDEN_ROOTS] == []


def test_each_client_module_imports_only_proton_the_standard_library_and_itself():
    # cproton is python-qpid-proton's own C binding module (the container loop's fast path uses it)
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for module in sorted((ROOT / "client").rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
        foreign = {
            n
            for n in names
            if n.split(".")[0] not in stdlib | {"proton", "cproton"} and not n.startswith("subgate.client")
        }
        assert not foreign, f"{module.relative_to(ROOT)} imports {sorted(foreign)}"
