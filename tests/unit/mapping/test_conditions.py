"""Every AMQP error condition the server sends is declared once, in subgate.mapping.errors.

The one exception is subgate.topics.errors: the topic engine is standard-library only, so its exceptions carry
their condition strings themselves; they must be the same strings as mapping's. Section descriptors
(``amqp:properties:list`` and the like) are names of types, not conditions, and are not counted.
"""

from __future__ import annotations

import re
from pathlib import Path

from subgate.mapping import errors
from subgate.topics import errors as topic_errors

PACKAGE = Path(errors.__file__).resolve().parents[1]
CONDITION = re.compile(r"[\"']amqp:[a-z-]+(?::[a-z-]+)?[\"']")
DESCRIPTOR = re.compile(r"[\"']amqp:[a-z-]+:(?:list|map|binary|\*)[\"']")


def test_no_condition_string_is_declared_outside_mapping_errors():
    found = []
    for module in sorted(PACKAGE.rglob("*.py")):
        if module in (Path(errors.__file__).resolve(), Path(topic_errors.__file__).resolve()):
            continue
        for number, line in enumerate(module.read_text().splitlines(), 1):
            literals = [m for m in CONDITION.findall(line) if not DESCRIPTOR.fullmatch(m)]
            if literals:
                found.append(f"{module.relative_to(PACKAGE)}:{number}: {literals}")
    assert found == []


def test_the_topic_engine_uses_the_same_condition_strings():
    for name in ("INVALID_FIELD", "NOT_FOUND", "PRECONDITION_FAILED"):
        assert getattr(topic_errors, name) == getattr(errors, name)
