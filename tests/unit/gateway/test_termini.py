"""The attach reply's termini (gateway.termini): what is echoed, field by field, over an in-memory transport pair."""

from __future__ import annotations

from proton import Collector, Connection, Data, Endpoint, Link, Terminus, Transport, symbol

from subgate.gateway.termini import accept_attach, accept_consumer, echo_terminus
from subgate.mapping.names import MAX_CAPABILITIES

OUTCOMES = ["amqp:accepted:list", "amqp:rejected:list", "amqp:released:list", "amqp:modified:list"]


class Pair:
    """A client and a server connection joined by two transports in memory."""

    def __init__(self) -> None:
        self.client, self.server = Connection(), Connection()
        self.client_transport, self.server_transport = Transport(), Transport(Transport.SERVER)
        self.client_transport.bind(self.client)
        self.server_transport.bind(self.server)
        self.server.collect(Collector())
        self.client.open()

    def pump(self) -> None:
        for _ in range(20):
            moved = self._move(self.client_transport, self.server_transport)
            moved += self._move(self.server_transport, self.client_transport)
            if not moved:
                return

    @staticmethod
    def _move(source: Transport, sink: Transport) -> int:
        pending = source.pending()
        if pending <= 0:
            return 0
        sink.push(source.peek(pending))
        source.pop(pending)
        return pending

    def server_link(self) -> Link:
        self.pump()
        if self.server.state & Endpoint.LOCAL_UNINIT:
            self.server.open()
        session = self.server.session_head(0)
        if session is not None and session.state & Endpoint.LOCAL_UNINIT:
            session.open()
        self.pump()
        link = self.server.link_head(0)
        assert link is not None
        return link


def _put_symbols(data: Data, values: list[str]) -> None:
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for value in values:
        data.put_symbol(symbol(value))
    data.exit()


def _read(data: Data) -> object:
    data.rewind()
    return data.get_object() if data.next() else None


def _receiver(pair: Pair, *, dynamic: bool = False, capabilities: list[str] | None = None) -> Link:
    session = pair.client.session()
    session.open()
    link = session.receiver("consumer")
    source = link.source
    source.address = None if dynamic else "orders"
    source.dynamic = dynamic
    source.durability = Terminus.DELIVERIES
    source.expiry_policy = Terminus.EXPIRE_NEVER
    source.distribution_mode = Terminus.DIST_MODE_COPY
    source.timeout = 7
    _put_symbols(source.capabilities, capabilities if capabilities is not None else ["topic", "shared"])
    _put_symbols(source.outcomes, OUTCOMES)
    if dynamic:
        source.properties.put_dict({symbol("lifetime-policy"): symbol("delete-on-close")})
    link.target.address = "local"
    link.open()
    return link


def test_a_consumer_reply_echoes_the_source_field_by_field() -> None:
    pair = Pair()
    client = _receiver(pair)
    accept_consumer(pair.server_link(), None, "color = 'red'", no_local=True)
    pair.pump()
    source = client.remote_source
    assert (source.address, source.durability, source.timeout) == ("orders", Terminus.DELIVERIES, 7)
    assert source.expiry_policy == Terminus.EXPIRE_NEVER
    assert source.distribution_mode == Terminus.DIST_MODE_COPY
    assert [str(s) for s in _read(source.capabilities).elements] == ["topic", "shared"]  # the peer's order
    assert [str(s) for s in _read(source.outcomes).elements] == OUTCOMES
    assert set(_read(source.filter)) == {"jms-selector", "no-local"}  # only what is applied
    assert client.remote_target.address == "local"


def test_a_dynamic_node_echoes_its_properties_and_the_assigned_address() -> None:
    pair = Pair()
    client = _receiver(pair, dynamic=True)
    accept_consumer(pair.server_link(), "$temp.queue.1", None, no_local=False)
    pair.pump()
    source = client.remote_source
    assert source.dynamic and source.address == "$temp.queue.1"
    assert _read(source.properties) == {symbol("lifetime-policy"): symbol("delete-on-close")}
    assert _read(source.filter) is None


def test_too_many_capabilities_in_an_unchecked_terminus_are_left_out_not_failed_on() -> None:
    pair = Pair()
    session = pair.client.session()
    session.open()
    client = session.sender("producer")
    client.target.address = "orders"
    _put_symbols(client.source.capabilities, [f"c{i}" for i in range(MAX_CAPABILITIES + 1)])
    client.open()
    accept_attach(pair.server_link())
    pair.pump()
    assert client.remote_target.address == "orders"
    assert _read(client.remote_source.capabilities) is None


def test_an_unspecified_terminus_stays_unspecified() -> None:
    pair = Pair()
    session = pair.client.session()
    session.open()
    client = session.receiver("lookup")
    client.open()
    server = pair.server_link()
    echo_terminus(server.source, server.remote_source)
    assert server.source.type == Terminus.UNSPECIFIED
