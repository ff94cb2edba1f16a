"""mapping.addresses: node-type resolution (mapping doc §5.1, §5.2), one row per rule."""

from __future__ import annotations

import pytest

from subgate.mapping.addresses import (
    QUEUE,
    TOPIC,
    NodeDecision,
    kind_from_capabilities,
    kind_from_jms_dest,
    resolve_node,
    split_fqqn,
)
from subgate.mapping.errors import INVALID_FIELD, NOT_FOUND, PRECONDITION_FAILED, Refused


@pytest.mark.parametrize(
    ("capabilities", "kind"),
    [
        ([], None),
        (["queue"], QUEUE),
        (["temporary-queue"], QUEUE),
        (["topic"], TOPIC),
        (["temporary-topic"], TOPIC),
        (["queue", "temporary-queue"], QUEUE),  # two names for one kind are fine
        (["topic", "temporary-topic", "shared", "global"], TOPIC),
        (["shared", "global"], None),  # unrelated capabilities say nothing
        (["Queue", "TOPIC"], None),  # symbols are case-sensitive
        (iter(["topic"]), TOPIC),  # any iterable
    ],
)
def test_kind_from_capabilities(capabilities, kind):
    assert kind_from_capabilities(capabilities) == kind


@pytest.mark.parametrize(
    "capabilities",
    [["queue", "topic"], ["temporary-queue", "temporary-topic"], ["queue", "temporary-topic", "shared"]],
)
def test_both_kinds_at_once_are_refused(capabilities):
    with pytest.raises(Refused) as caught:
        kind_from_capabilities(capabilities)
    assert caught.value.condition == INVALID_FIELD


@pytest.mark.parametrize(
    ("annotation", "kind"),
    [
        (0, QUEUE),
        (1, TOPIC),
        (2, QUEUE),  # temporary queue
        (3, TOPIC),  # temporary topic
        (4, None),
        (-1, None),
        (None, None),
        (True, None),  # a boolean is not the byte the client sends
        (False, None),
        ("0", None),
        (1.0, None),
        (b"\x00", None),
    ],
)
def test_kind_from_jms_dest(annotation, kind):
    assert kind_from_jms_dest(annotation) == kind


def test_kind_from_jms_dest_takes_int_subclasses():
    class Byte(int):  # what AMQP decoders hand back for a typed byte
        pass

    assert kind_from_jms_dest(Byte(1)) == TOPIC


@pytest.mark.parametrize(
    ("requested", "existing", "default", "auto_create", "expected"),
    [
        # an existing node wins when nothing (or the same kind) is requested
        (None, QUEUE, TOPIC, True, NodeDecision("a", QUEUE, create=False)),
        (None, TOPIC, QUEUE, False, NodeDecision("a", TOPIC, create=False)),
        (QUEUE, QUEUE, TOPIC, False, NodeDecision("a", QUEUE, create=False)),
        (TOPIC, TOPIC, QUEUE, True, NodeDecision("a", TOPIC, create=False)),
        # a new node: the requested kind, else the server default
        (TOPIC, None, QUEUE, True, NodeDecision("a", TOPIC, create=True)),
        (QUEUE, None, TOPIC, True, NodeDecision("a", QUEUE, create=True)),
        (None, None, QUEUE, True, NodeDecision("a", QUEUE, create=True)),
        (None, None, TOPIC, True, NodeDecision("a", TOPIC, create=True)),
    ],
)
def test_resolve_node(requested, existing, default, auto_create, expected):
    assert resolve_node("a", requested, existing, default_kind=default, auto_create=auto_create) == expected


@pytest.mark.parametrize(
    ("address", "requested", "existing", "auto_create", "condition"),
    [
        ("", None, None, True, INVALID_FIELD),
        ("", QUEUE, QUEUE, True, INVALID_FIELD),
        ("a", TOPIC, QUEUE, True, PRECONDITION_FAILED),
        ("a", QUEUE, TOPIC, False, PRECONDITION_FAILED),
        ("a", None, None, False, NOT_FOUND),
        ("a", QUEUE, None, False, NOT_FOUND),
    ],
)
def test_resolve_node_refusals(address, requested, existing, auto_create, condition):
    with pytest.raises(Refused) as caught:
        resolve_node(address, requested, existing, default_kind=QUEUE, auto_create=auto_create)
    assert caught.value.condition == condition
    assert caught.value.description
    assert repr(caught.value) == f"Refused({condition!r}, {caught.value.description!r})"


def test_pure_modules_import_neither_proton_nor_sqlalchemy():
    import subprocess
    import sys

    code = (
        "import sys, subgate.mapping.addresses, subgate.mapping.outcomes, subgate.mapping.errors, "
        "subgate.mapping.subscriptions, subgate.mapping.filters, subgate.engine.nodes; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('proton', 'sqlalchemy') "
        "or m.startswith('subgate.storage')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("address", "parts"),
    [
        ("orders", None),
        ("orders:eu", None),  # one colon is part of a name
        ("orders::app.s", ("orders", "app.s")),
        ("orders::s:global", ("orders", "s:global")),
        ("a/b::c::d", ("a/b", "c::d")),  # the first separator splits
    ],
)
def test_fully_qualified_queue_names(address, parts):
    assert split_fqqn(address) == parts


@pytest.mark.parametrize("address", ["::app.s", "orders::", "::"])
def test_a_fully_qualified_name_needs_both_parts(address):
    with pytest.raises(Refused) as refused:
        split_fqqn(address)
    assert refused.value.condition == INVALID_FIELD
