"""The pure packages stay pure: ``subgate.engine``, ``subgate.mapping`` and ``subgate.topics`` load no proton, no
SQLAlchemy and no adapter package, and each imports only what its place in the house allows (docs/architecture.md):
engine may import mapping and topics; mapping and topics only themselves (and the standard library), but for the
topic engine's use of the AMQP condition names, which are declared once, in ``mapping.errors``.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import subgate

ROOT = Path(subgate.__file__).resolve().parent
ALLOWED = {
    "subgate.engine": ("subgate.engine", "subgate.mapping", "subgate.topics"),
    "subgate.mapping": ("subgate.mapping",),
    "subgate.topics": ("subgate.topics", "subgate.mapping.errors"),
}
# Pure libraries a package may use besides the standard library: RE2, the topic selectors' regex engine (topics.regex).
LIBRARIES = {"subgate.topics": ("re2",)}
FORBIDDEN_ROOTS = {"proton", "cproton", "_cproton", "sqlalchemy", "alembic", "psycopg", "click", "rich"}
ADAPTERS = ("subgate.gateway", "subgate.storage", "subgate.cli", "subgate.migrations")

IMPORT_EVERYTHING = """
import importlib, json, pkgutil, sys
package = importlib.import_module(sys.argv[1])
for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
    importlib.import_module(info.name)
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_importing_every_module_loads_no_proton_no_sqlalchemy_and_no_adapter(package):
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERYTHING, package],
        cwd=ROOT.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert len([m for m in loaded if m.startswith(package + ".")]) > 1  # the walk did import the modules
    assert [m for m in loaded if m.split(".")[0] in FORBIDDEN_ROOTS or m.startswith(ADAPTERS)] == []


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_module_imports_only_the_standard_library_and_what_its_package_may(package):
    folder = ROOT.joinpath(*package.split(".")[1:])
    stdlib = set(sys.stdlib_module_names) | {"__future__", *LIBRARIES.get(package, ())}
    for module in sorted(folder.rglob("*.py")):
        foreign = {
            name
            for name in _imports(module)
            if name.split(".")[0] not in stdlib and not name.startswith(ALLOWED[package])
        }
        assert not foreign, f"{module.relative_to(ROOT)} imports {sorted(foreign)}"
