"""The authorization matrix's operations on the wire: each one done as a principal on a path, read as an outcome.

Owns the store set-up of the matrix's principals and grants (``tests.support.authz_matrix``), the nodes and
subscriptions the operations act on (made by the administrator first), and one probe per operation. A probe
returns ``Seen(outcome, detail)``: ``yes``, ``no`` (``amqp:unauthorized-access``; ``detail`` is the description),
``empty`` (allowed, nothing readable arrived), or ``error`` for anything else (another condition, a timeout).
Each principal uses one connection (without a ClientID: its subscriptions are global) for all its links,
``$management``'s too.
"""

from __future__ import annotations

import base64
import itertools
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from subgate.cli.management import MANAGEMENT_ADDRESS
from subgate.mapping.permissions import PRINCIPAL, ROLE
from subgate.storage.db import make_engine, session_factory, upgrade
from subgate.storage.passwords import hash_password
from subgate.storage.permissions import add_role, assign_role, grant
from subgate.storage.principals import add_principal
from tests.support.authz_matrix import EMPTY, GLOBAL, GRANTED, NO, PATHS, PRINCIPALS, YES, Principal
from tests.support.control import ControlClient
from tests.support.jms import QUEUE, SHARED_DURABLE, TOPIC, Consumer, JmsError, JmsMessage, JmsSession, RemoteError

UNAUTHORIZED = "amqp:unauthorized-access"
PASSWORD = "pw-authz"
ERROR = "error"
_serial = itertools.count(1)


@dataclass(frozen=True)
class Seen:
    outcome: str
    detail: str = ""


def make_store(url: str) -> None:
    """The matrix's principals (``anonymous`` is not a row) and their grants, on a fresh store at ``url``."""
    upgrade(url)
    engine = make_engine(url)
    hashed = hash_password(PASSWORD)  # one salted hash for all: the same password, and each hash costs 40 ms+
    with session_factory(engine).begin() as session:
        for principal in PRINCIPALS:
            if principal.name != "anonymous":
                add_principal(session, principal.name, hashed)
            if principal.admin:
                assign_role(session, "admin", principal.name)
            subject = (PRINCIPAL, principal.name)
            if principal.role is not None:
                add_role(session, principal.role)
                assign_role(session, principal.role, principal.name)
                subject = (ROLE, principal.role)
            for permission in sorted(principal.grants):
                if permission in GLOBAL:
                    grant(session, *subject, permission, None)
                elif principal.inverted:
                    grant(session, *subject, permission, "")
                    grant(session, *subject, permission, GRANTED, allow=False)
                else:
                    grant(session, *subject, permission, GRANTED)
    engine.dispose()


def credentials(principal: Principal) -> dict[str, Any]:
    if principal.name == "anonymous":
        return {}
    return {"user": principal.name, "password": PASSWORD}


def prepare_nodes(address: str, admin: Principal) -> None:
    """As the administrator: topics ``P/t`` with a current value and queues ``P/q`` with a message on both
    branches; a global shared durable subscription ``keep-P`` on each ``P/t`` with a message in its queue; and,
    for each principal, global shared durable subscriptions ``u-<name>-P`` for it to unsubscribe and topics
    ``P/gone-<name>`` for it to remove."""
    with ControlClient(address, **credentials(admin)) as owner:
        session = owner.wire.session()
        for path in PATHS:
            session.consumer(f"{path}/t", SHARED_DURABLE, name=f"keep-{path}", prefetch=0).detach()
            session.producer(f"{path}/t", TOPIC).send(f"{path}/t-v0")
            session.producer(f"{path}/q", QUEUE).send(f"{path}/q-m0")
            for principal in PRINCIPALS:
                session.consumer(f"{path}/t", SHARED_DURABLE, name=f"u-{principal.name}-{path}", prefetch=0).detach()
                session.producer(f"{path}/gone-{principal.name}", TOPIC).send("to be removed")


def _refused(error: RemoteError | None) -> Seen:
    if error is not None and error.condition == UNAUTHORIZED:
        return Seen(NO, error.description or "")
    return Seen(ERROR, f"refused with {error}")


def _sent(outcome: Any) -> Seen:
    if outcome.accepted:
        return Seen(YES)
    if outcome.state == "rejected":
        return _refused(RemoteError(outcome.condition, outcome.description))
    return Seen(ERROR, f"settled {outcome}")


@dataclass
class Actor:
    """One principal's connections and the links the probes reuse."""

    principal: Principal
    address: str
    http: str  # the web console's base URL
    control: ControlClient
    session: JmsSession
    relay: Any = None
    transacted: JmsSession | None = None
    management: tuple[Any, Consumer, str] | Seen | None = None  # (request sender, replies, reply-to) or refusal
    selectors: list[tuple[str, Consumer]] = field(default_factory=list)

    @classmethod
    def open(cls, principal: Principal, address: str, http: str) -> Actor:
        control = ControlClient(address, **credentials(principal))
        return cls(principal, address, http, control, control.wire.session())

    def close(self) -> None:
        self.control.close()

    @property
    def name(self) -> str:
        return self.principal.name

    def fresh(self, path: str, stem: str) -> str:
        return f"{path}/{stem}-{self.name}-{next(_serial)}"


# -- publishing ------------------------------------------------------------------------------------------------------
def _send(actor: Actor, address: str, kind: str) -> Seen:
    producer = actor.session.producer(address, kind, check=False)
    if producer.refusal is not None:
        return _refused(producer.refusal)
    seen = _sent(producer.send("m", sync=False).wait())
    producer.close()
    return seen


def _relay(actor: Actor, address: str, kind: str) -> Seen:
    if actor.relay is None:
        actor.relay = actor.session.producer(None)
    return _sent(actor.relay.send("m", to=address, to_kind=kind, sync=False).wait())


def _transacted(actor: Actor) -> JmsSession:
    if actor.transacted is None:
        actor.transacted = actor.control.wire.session(transacted=True)
    return actor.transacted


def transactional_send(actor: Actor, path: str) -> Seen:
    tx = _transacted(actor)
    producer = tx.producer(f"{path}/t", TOPIC, check=False)
    if producer.refusal is not None:
        return _refused(producer.refusal)
    seen = _sent(producer.send("m", sync=False).wait())
    committed = tx.commit()
    producer.close()
    return seen if committed.accepted else Seen(ERROR, f"commit: {committed}")


def transactional_relay(actor: Actor, path: str) -> Seen:
    tx = _transacted(actor)
    relay = tx.producer(None)
    seen = _sent(relay.send("m", to=f"{path}/t", to_kind=TOPIC, sync=False).wait())
    committed = tx.commit()
    relay.close()
    if seen.outcome == YES and not committed.accepted:
        return Seen(ERROR, f"commit: {committed}")
    return seen


def coordinator(actor: Actor, path: str) -> Seen:
    try:
        tx = actor.control.wire.session(transacted=True)
    except JmsError as exc:
        return _refused(exc.error)
    committed = tx.commit(redeclare=False)
    tx.close()
    return Seen(YES) if committed.accepted else Seen(ERROR, f"discharge: {committed}")


# -- consuming -------------------------------------------------------------------------------------------------------
def _attach(actor: Actor, address: str, kind: str, **options: Any) -> Seen:
    consumer = actor.session.consumer(address, kind, check=False, prefetch=0, **options)
    if consumer.refusal is not None:
        return _refused(consumer.refusal)
    consumer.close() if kind != SHARED_DURABLE else consumer.detach()
    return Seen(YES)


def _browse(actor: Actor, address: str) -> Seen:
    browser = actor.session.consumer(address, QUEUE, browse=True, check=False, prefetch=10)
    if browser.refusal is not None:
        return _refused(browser.refusal)
    first = browser.poll(5)
    browser.close()
    return Seen(YES) if first is not None else Seen(ERROR, "attached, but the browser saw no message")


def selector_consumer(actor: Actor, path: str) -> Seen:
    """Attach now; whether a topic's message reaches it is told by ``settle_selectors`` at the end."""
    consumer = actor.control.attach(f"?{path}/.*", ("topic",))
    refusal = actor.control.await_attach(consumer, timeout=10)
    if refusal is not None:
        return _refused(refusal)
    actor.selectors.append((path, consumer))
    return Seen(YES)


def settle_selectors(actors: list[Actor], admin: Actor) -> dict[tuple[str, str], Seen]:
    """Publish one message to each ``P/t`` as the administrator; each attached selector consumer then either
    receives it (``yes``) or nothing (``empty``)."""
    for path in PATHS:
        _send(admin, f"{path}/t", TOPIC)
    seen: dict[tuple[str, str], Seen] = {}
    for actor in actors:
        for path, consumer in actor.selectors:
            consumer.drain()  # the sends above were confirmed, so routed: the drain's answer comes after them
            seen[(actor.name, path)] = Seen(YES if consumer.take_buffered() else EMPTY)
            consumer.close()
    return seen


def fetch(actor: Actor, path: str) -> Seen:
    consumer = actor.control.attach(f"?{path}/.*", ("topic", "fetch"), credit=1000)  # credit for every value
    refusal = actor.control.await_attach(consumer, timeout=10)
    if refusal is not None:
        return _refused(refusal)
    actor.control.wire.pump(lambda: consumer.remote_closed is not None, 10, "the end of the fetch")
    return Seen(YES if consumer.take_buffered() else EMPTY)


def unsubscribe(actor: Actor, path: str) -> Seen:
    try:
        actor.control.wire.unsubscribe(f"u-{actor.name}-{path}")
    except JmsError as exc:
        return _refused(exc.error)
    return Seen(YES)


# -- management and control links ------------------------------------------------------------------------------------
def _managed(actor: Actor, operation: str, type_: str, name: str) -> Seen:
    """One ``$management`` request on the actor's connection, as ``subgate.cli.management`` makes it: a sender to
    ``$management`` (refused without CONTROL_SERVER), the answer on a temporary queue named in ``reply-to``."""
    if actor.management is None:
        producer = actor.session.producer(MANAGEMENT_ADDRESS, QUEUE, check=False)
        if producer.refusal is not None:
            actor.management = _refused(producer.refusal)
        else:
            temporary = actor.control.wire.create_temporary_queue()
            actor.management = (producer, actor.session.consumer(temporary, prefetch=10), temporary.address or "")
    if isinstance(actor.management, Seen):
        return actor.management
    sender, replies, reply_to = actor.management
    request = JmsMessage.of(None, reply_to=reply_to, properties={"operation": operation, "type": type_, "name": name})
    sender.send(request, sync=False).wait()
    answer = replies.receive(10).accept()
    status = int(answer.properties.get("statusCode", 0))
    if 200 <= status < 300:
        return Seen(YES)
    return Seen(ERROR, f"status {status}: {answer.properties.get('statusDescription')}")


def console_action(actor: Actor, path: str) -> Seen:
    """``POST /api/topics/remove`` on the web console (``--http``) with the principal's basic credentials (none for
    ``anonymous``): the console carries it out as a ``$management`` request in the principal's name."""
    headers = {"Content-Type": "application/json"}
    if actor.principal.name != "anonymous":
        token = base64.b64encode(f"{actor.name}:{PASSWORD}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    body = json.dumps({"selector": f"{path}/gone-{actor.name}"}).encode()
    request = urllib.request.Request(f"{actor.http}/api/topics/remove", body, headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            status, answer = response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        status, answer = error.code, json.loads(error.read())
    if status == 200 and answer.get("status", 0) < 300:
        return Seen(YES)
    if status in (401, 403):
        return Seen(NO, f"{status} {answer}")
    return Seen(ERROR, f"{status} {answer}")


def handler(actor: Actor, path: str) -> Seen:
    consumer = actor.control.register_handler(path)
    if consumer.refusal is not None:
        return _refused(consumer.refusal)
    consumer.close()
    return Seen(YES)


def removal(actor: Actor, path: str) -> Seen:
    link = actor.control.register_removal(f"{path}/rws-{actor.name}")
    if link.refusal is not None:
        return _refused(link.refusal)
    link.close()
    return Seen(YES)


PROBES: dict[str, Callable[[Actor, str], Seen]] = {
    "send to topic": lambda a, p: _send(a, f"{p}/t", TOPIC),
    "send to queue": lambda a, p: _send(a, f"{p}/q", QUEUE),
    "send creating a topic": lambda a, p: _send(a, a.fresh(p, "new"), TOPIC),
    "relay to topic": lambda a, p: _relay(a, f"{p}/t", TOPIC),
    "relay to queue": lambda a, p: _relay(a, f"{p}/q", QUEUE),
    "relay creating a topic": lambda a, p: _relay(a, a.fresh(p, "relayed"), TOPIC),
    "transactional send": transactional_send,
    "transactional relay": transactional_relay,
    "transaction coordinator": coordinator,
    "receive from topic": lambda a, p: _attach(a, f"{p}/t", TOPIC),
    "durable subscription": lambda a, p: _attach(a, f"{p}/t", SHARED_DURABLE, name=f"d-{a.name}-{p}"),
    "receive from queue": lambda a, p: _attach(a, f"{p}/q", QUEUE),
    "browse queue": lambda a, p: _browse(a, f"{p}/q"),
    "browse subscription": lambda a, p: _browse(a, f"{p}/t::keep-{p}:global"),
    "selector consumer": selector_consumer,
    "fetch": fetch,
    "unsubscribe": unsubscribe,
    "management read": lambda a, p: _managed(a, "READ", "queue", f"{p}/q"),
    "management write": lambda a, p: _managed(a, "CREATE", "topic", a.fresh(p, "m")),
    "console action": console_action,
    "missing-topic handler": handler,
    "remove-with-session": removal,
}
