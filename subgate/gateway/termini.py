"""Reading proton termini into plain values and writing attach replies back (mapping doc §2.5, Appendix A).

Owns every touch of ``proton.Terminus`` fields; the rest of the gateway sees strings and frozensets.
"""

from __future__ import annotations

from dataclasses import dataclass

from proton import Condition, Data, Link, Terminus, symbol

from subgate.mapping.filters import NO_LOCAL_CODE, SELECTOR_CODE
from subgate.mapping.names import MAX_NAME_LENGTH, bounded


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
    data.rewind()
    if not data.next():
        return frozenset()
    value = data.get_object()
    if isinstance(value, str):
        return frozenset([str(value)])
    elements = getattr(value, "elements", None)
    if elements is None and isinstance(value, (list, tuple)):
        elements = value
    return frozenset(str(v) for v in (elements or ()))


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


def put_filters(terminus: Terminus, selector: str | None, no_local: bool) -> None:
    """Write the JMS filters we honour into a reply's source (mapping doc §2.4: echo only what is applied)."""
    data = terminus.filter
    data.clear()
    if selector is None and not no_local:
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
    data = terminus.capabilities
    data.clear()
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for capability in capabilities:
        data.put_symbol(symbol(capability))
    data.exit()


def mirror_settle_modes(link: Link) -> None:
    link.snd_settle_mode = link.remote_snd_settle_mode
    link.rcv_settle_mode = Link.RCV_FIRST


def accept_attach(link: Link, address: str | None = None) -> None:
    """Answer an attach by echoing the peer's termini (with the resolved address when given)."""
    link.source.copy(link.remote_source)
    link.target.copy(link.remote_target)
    if address is not None:
        (link.source if link.is_sender else link.target).address = address
    mirror_settle_modes(link)
    link.open()


def accept_consumer(link: Link, address: str | None, selector: str | None, no_local: bool) -> None:
    """Answer a consumer attach: echo the source with the filters we apply (and the assigned address)."""
    link.source.copy(link.remote_source)
    link.target.copy(link.remote_target)
    if address is not None:
        link.source.address = address
    put_filters(link.source, selector, no_local)
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
    link.target.copy(link.remote_target)
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
