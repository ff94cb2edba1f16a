"""Every ``amqp:*`` error condition is declared once, in ``subgate/mapping/errors.py``, and imported from there
(the topic engine's included).

The test greps the package's source for quoted ``amqp:`` literals. Two shapes are not conditions and may stay
where they are used: descriptor names (``amqp:header:list``, ``amqp:value:*``: the codecs' symbolic
descriptors, which end in their encoding) and ``amqp://`` URLs.
"""

from __future__ import annotations

import re
from pathlib import Path

import subgate
from subgate.mapping import errors

PACKAGE = Path(subgate.__path__[0])
CONDITIONS_MODULE = PACKAGE / "mapping" / "errors.py"
_LITERAL = re.compile(r"""[rbfuRBFU]*(["'])(amqp:[^"'\n]*)\1""")
_DESCRIPTOR = re.compile(r"amqp:[a-z{}-]+:(list|map|binary|\*)")


def stray_conditions(source: str) -> list[str]:
    """The quoted ``amqp:`` literals in ``source`` that are neither descriptor names nor URLs."""
    found = (match.group(2) for match in _LITERAL.finditer(source))
    return [text for text in found if not text.startswith("amqp://") and not _DESCRIPTOR.fullmatch(text)]


def test_the_check_finds_a_condition_and_passes_descriptors_and_urls():
    assert stray_conditions('X = "amqp:not-found"\nraise Refused(\'amqp:link:detach-forced\', "")') == [
        "amqp:not-found",
        "amqp:link:detach-forced",
    ]
    assert stray_conditions('f"amqp:{name}:list", "amqp:value:*", "amqp:data:binary", f"amqp://{host}"') == []


def test_no_amqp_condition_is_declared_outside_mapping_errors():
    strays = {
        str(path.relative_to(PACKAGE.parent)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != CONDITIONS_MODULE and (found := stray_conditions(path.read_text(encoding="utf-8")))
    }
    assert strays == {}, "declare AMQP conditions in subgate/mapping/errors.py and import them from there"


def test_mapping_errors_declares_each_condition_once():
    declared = [value for name, value in vars(errors).items() if name.isupper() and isinstance(value, str)]
    assert all(value.startswith("amqp:") for value in declared)
    assert len(declared) == len(set(declared))
    assert stray_conditions(CONDITIONS_MODULE.read_text(encoding="utf-8"))  # the grep does see them there


def test_the_topic_engine_answers_with_mappings_conditions():
    from subgate.topics import errors as topic_errors

    assert topic_errors.TopicsError.condition is errors.INVALID_FIELD
    assert topic_errors.UnknownTopicError.condition is errors.NOT_FOUND
    assert topic_errors.RegistrationConflict.condition is errors.PRECONDITION_FAILED
