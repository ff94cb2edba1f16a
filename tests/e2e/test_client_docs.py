"""docs/client.md's examples run: every ```python block, in order, each in a fresh process, against a live server
(the documented address ``amqp://127.0.0.1:5672`` is replaced by the test server's)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def examples() -> list[str]:
    return BLOCK.findall((ROOT / "docs" / "client.md").read_text())


def test_the_page_has_examples():
    assert len(examples()) >= 5


def test_every_example_of_docs_client_md_runs(server, tmp_path):
    for number, code in enumerate(examples(), 1):
        code = code.replace("amqp://127.0.0.1:5672", server.url)
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=90, check=False
        )
        assert result.returncode == 0, f"example {number} failed:\n{code}\n{result.stderr[-3000:]}"
        if "['order 2', 'order 4']" in code:
            assert "['order 2', 'order 4']" in result.stdout
