"""Reading proton termini into plain values and writing attach replies back (mapping doc §2.5, Appendix A).

Owns every touch of ``proton.Terminus`` fields; the rest of the gateway sees strings and frozensets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from proton import Condition, Data, Link, Terminus, symbol

from subgate.mapping.bookmarks import BOOKMARK_SYMBOL
from subgate.mapping.filters import NO_LOCAL_CODE, SELECTOR_CODE
from subgate.mapping.names import MAX_CAPABILITIES, MAX_NAME_LENGTH, bounded


@dataclass(frozen=True, slots=True)
class TerminusRequest:
    """What the peer asked for in one terminus of its attach."""

    present: bool
    address: str | None
    dynamic: bool
    durable: int
    expiry_policy: int
    distribution_mode: int
    capabilities: frozenset[str]
    filters: dict[str, tuple[object, object]]  # key -> (descriptor, value)
    coordinator: bool = False


def _symbols(data: Data) -> frozenset[str]:
    return frozenset(_symbol_list(data))


def _symbol_list(data: Data) -> list[str]:
    """A symbol or array of symbols, in the peer's order."""
    data.rewind()
    if not data.next():
        return []
    value = data.get_object()
    if isinstance(value, str):
        return [str(value)]
    elements = getattr(value, "elements", None)
    if elements is None and isinstance(value, (list, tuple)):
        elements = value
    return [str(v) for v in (elements or ())]


def _filters(data: Data) -> dict[str, tuple[object, object]]:
    data.rewind()
    if not data.next():
        return {}
    value = data.get_object()
    if not isinstance(value, dict):
        return {}
    out: dict[str, tuple[object, object]] = {}
    for key, entry in value.items():
        descriptor = getattr(entry, "descriptor", None)
        out[str(key)] = (descriptor, getattr(entry, "value", entry) if descriptor is not None else entry)
    return out


def put_filters(
    terminus: Terminus, selector: str | None, no_local: bool, replay: tuple[str, str] | None = None
) -> None:
    """Write the filters we honour into a reply's source (mapping doc §2.4: echo only what is applied): the JMS
    ones, and ``replay`` — the bookmark filter's (key, value) — when a replay was applied (design.md §3)."""
    data = terminus.filter
    data.clear()
    if selector is None and not no_local and replay is None:
        return
    data.put_map()
    data.enter()
    if selector is not None:
        data.put_symbol(symbol("jms-selector"))
        data.put_described()
        data.enter()
        data.put_ulong(SELECTOR_CODE)
        data.put_string(selector)
        data.exit()
    if no_local:
        data.put_symbol(symbol("no-local"))
        data.put_described()
        data.enter()
        data.put_ulong(NO_LOCAL_CODE)
        data.put_string("NoLocalFilter{}")
        data.exit()
    if replay is not None:
        data.put_symbol(symbol(replay[0]))
        data.put_described()
        data.enter()
        data.put_symbol(symbol(BOOKMARK_SYMBOL))
        data.put_string(replay[1])
        data.exit()
    data.exit()


def read_terminus(terminus: Terminus) -> TerminusRequest:
    kind = terminus.type
    if kind == Terminus.UNSPECIFIED:
        return TerminusRequest(False, None, False, 0, 0, 0, frozenset(), {})
    if kind == Terminus.COORDINATOR:
        return TerminusRequest(True, None, False, 0, 0, 0, _symbols(terminus.capabilities), {}, coordinator=True)
    return TerminusRequest(
        present=True,
        address=terminus.address,
        dynamic=bool(terminus.dynamic),
        durable=terminus.durability,
        expiry_policy=terminus.expiry_policy,
        distribution_mode=terminus.distribution_mode,
        capabilities=_symbols(terminus.capabilities),
        filters=_filters(terminus.filter),
    )


def set_capabilities(terminus: Terminus, capabilities: list[str]) -> None:
    _put_symbols(terminus.capabilities, capabilities)


def _put_symbols(data: Data, values: list[str]) -> None:
    data.clear()
    if not values:
        return
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for value in values:
        data.put_symbol(symbol(value))
    data.exit()


# What a peer's malformed field can raise while it is read back into Python values.
_UNREADABLE = (UnicodeDecodeError, TypeError, ValueError, KeyError, OverflowError, RecursionError, AttributeError)


def echo_terminus(local: Terminus, remote: Terminus) -> None:
    """Write the peer's terminus back field by field (mapping doc §2.5): type, address, durable, expiry-policy,
    timeout, dynamic, distribution-mode, capabilities, outcomes and, for a dynamic node, its properties.

    Every value is read into Python and written fresh; nothing is copied between proton's buffers
    (``Terminus.copy`` of a peer's terminus let proton-c write freed bytes under load: a SIGSEGV found by the
    deep fuzz run). A terminus the broker did not check (the target of a consumer, say) is echoed within the
    same bounds as a checked one: what is unreadable or over-long is left out, never failed on. Filters are
    not echoed here: a consumer's reply carries only the filters applied (``put_filters``). default-outcome
    cannot be echoed: proton-c always writes it as null."""
    local.type = remote.type
    if remote.type == Terminus.UNSPECIFIED:
        return
    _put_symbols(local.capabilities, _bounded_symbols(remote.capabilities, MAX_CAPABILITIES))
    if remote.type == Terminus.COORDINATOR:
        return
    address = _readable(lambda: remote.address)
    if isinstance(address, str) and len(address) <= MAX_NAME_LENGTH:
        local.address = address
    local.durability = remote.durability
    local.expiry_policy = remote.expiry_policy
    local.timeout = remote.timeout
    local.dynamic = remote.dynamic
    local.distribution_mode = remote.distribution_mode
    _put_symbols(local.outcomes, _bounded_symbols(remote.outcomes, MAX_CAPABILITIES))
    if remote.dynamic:
        _echo_properties(local.properties, remote.properties)


def _readable(read: Callable[[], object]) -> object:
    try:
        return read()
    except _UNREADABLE:
        return None


def _bounded_symbols(data: Data, limit: int) -> list[str]:
    values = _readable(lambda: _symbol_list(data))
    if not isinstance(values, list) or len(values) > limit:
        return []
    return list(dict.fromkeys(values))  # the peer's order, each once


def _echo_properties(local: Data, remote: Data) -> None:
    local.clear()

    def read() -> object:
        remote.rewind()
        return remote.get_object() if remote.next() else None

    value = _readable(read)
    if isinstance(value, dict) and len(value) <= MAX_CAPABILITIES:
        try:
            local.put_object(value)
        except _UNREADABLE:
            local.clear()  # a property map that cannot be written back is left out of the echo


def mirror_settle_modes(link: Link) -> None:
    link.snd_settle_mode = link.remote_snd_settle_mode
    link.rcv_settle_mode = Link.RCV_FIRST


def accept_attach(link: Link, address: str | None = None) -> None:
    """Answer an attach by echoing the peer's termini (with the resolved address when given)."""
    echo_terminus(link.source, link.remote_source)
    echo_terminus(link.target, link.remote_target)
    if address is not None:
        (link.source if link.is_sender else link.target).address = address
    mirror_settle_modes(link)
    link.open()


def accept_consumer(
    link: Link, address: str | None, selector: str | None, no_local: bool, replay: tuple[str, str] | None = None
) -> None:
    """Answer a consumer attach: echo the source with the filters we apply (and the assigned address)."""
    echo_terminus(link.source, link.remote_source)
    echo_terminus(link.target, link.remote_target)
    if address is not None:
        link.source.address = address
    put_filters(link.source, selector, no_local, replay)
    mirror_settle_modes(link)
    link.open()


def answer_lookup(link: Link, topic: str, capabilities: list[str], selector: str | None, no_local: bool) -> None:
    """Answer an unsubscribe lookup (null source, mapping doc §3.2) with the subscription's source."""
    source = link.source
    source.type = Terminus.SOURCE
    source.address = topic
    source.durability = Terminus.DELIVERIES
    source.expiry_policy = Terminus.EXPIRE_NEVER
    source.distribution_mode = Terminus.DIST_MODE_COPY
    set_capabilities(source, capabilities)
    put_filters(source, selector, no_local)
    echo_terminus(link.target, link.remote_target)
    mirror_settle_modes(link)
    link.open()


def refuse_attach(link: Link, condition: str, description: str) -> None:
    """Refuse an attach: null terminus on our side, then detach(closed=true) with the error (Appendix A.2). The
    other terminus is echoed only when it is small and readable (``_echo_if_small``), and the description is
    bounded: a refusal must fit in what the client takes in one frame."""
    if link.is_sender:
        link.source.type = Terminus.UNSPECIFIED
        _echo_if_small(link.target, link.remote_target)
    else:
        link.target.type = Terminus.UNSPECIFIED
        _echo_if_small(link.source, link.remote_source)
    link.condition = Condition(condition, bounded(description))
    link.open()
    link.close()


def _holds_value(data: Data) -> bool:
    data.rewind()
    return data.next() is not None


def _echo_if_small(local: Terminus, remote: Terminus) -> None:
    """Echo the peer's other terminus as its type and address only, and only a readable address within the name
    limit: the rest of a refused attach's terminus (capabilities, filters, properties) is never copied, so nothing
    the peer sent is re-encoded on the way out."""
    local.type = remote.type
    try:
        address = remote.address
    except UnicodeDecodeError:
        return
    if address is not None and len(address) <= MAX_NAME_LENGTH:
        local.address = address
