"""Installing subgate adds one import namespace, ``subgate``, and nothing else at the top of site-packages.

The wheel is built from this checkout and installed (without dependencies) into a fresh virtual environment;
what appears in its site-packages is compared with what was there before.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run(*args: str | Path) -> str:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def site_packages(python: Path) -> Path:
    return Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())


@pytest.mark.slow
def test_the_wheel_installs_only_the_subgate_package(tmp_path):
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp_path / "dist", REPO)
    (wheel,) = (tmp_path / "dist").glob("subgate-*.whl")
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    before = {p.name for p in site_packages(python).iterdir()}
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", wheel)
    added = {p.name for p in site_packages(python).iterdir()} - before
    assert {name for name in added if not name.endswith(".dist-info")} == {"subgate"}
    packages = {p.name for p in (site_packages(python) / "subgate").iterdir() if p.is_dir()} - {"__pycache__"}
    assert {"gateway", "mapping", "storage", "topics", "cli", "migrations"} <= packages
    assert (site_packages(python) / "subgate" / "migrations" / "script.py.mako").exists()
    console = site_packages(python) / "subgate" / "metrics" / "console"
    assert {path.name for path in console.iterdir()} == {"index.html", "console.js", "console.css"}
    assert (venv / "bin" / "subgate").exists()
