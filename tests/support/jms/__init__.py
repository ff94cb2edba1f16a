"""A synchronous test client that puts on the wire what Apache Qpid JMS 2.x puts there.

``JmsWire`` owns one loopback socket, a proton client ``Transport`` + ``Connection`` + ``Collector``, and nothing
else: no thread, no reactor. Every wait goes through ``JmsWire.pump(until, timeout)``, which moves bytes both ways,
handles the collector's events and raises ``TimeoutError`` (or ``ConnectionLost``) when ``until()`` does not hold
in time. Frame values follow /work/shared/docs/jms-amqp-mapping.md (the "spec"; section numbers below refer to it).

What proton-c cannot produce is fixed on the way out: every frame proton writes passes through a small
rewriter (``Wire._shape``) before it reaches the socket. It sets the consumer source ``default-outcome`` (proton-c
always writes null), link ``desired-capabilities`` (no proton API), begin ``handle-max=65535``, drops the
``initial-delivery-count``/``max-message-size`` that proton-c puts on receiver attaches, and trims trailing
default terminus fields, so ``target{}`` is an empty list as in proton-j. SASL is done by hand, because proton-c
sends the initial response ``"anonymous"`` and no hostname for ANONYMOUS, where Qpid JMS sends an empty response
and the URI host. Every frame in both directions is kept, decoded, in ``JmsWire.frames`` for shape checks.

Known differences that remain (see ``connection.KNOWN_DIFFERENCES``): begin ``next-outgoing-id`` is 0 (proton-j: 1), and
dispositions for ``modified`` carry both flags explicitly. Heartbeats are only sent while a test pumps.

Usage (``server.address`` is ``127.0.0.1:<port>``)::

    with JmsWire.connect(server.address, client_id="app1") as jms:
        s = jms.session()
        sub = s.consumer("prices", DURABLE, name="s", selector="region = 'eu'")    # link "s", durable=2
        s.producer("prices", TOPIC).send("hello", properties={"region": "eu"})
        assert sub.receive().accept().body == "hello"
        sub.detach()                                   # detach(closed=false): the subscription stays
        again = s.consumer("prices", DURABLE, name="s", selector="region = 'eu'")   # resume
        again.detach()
        jms.unsubscribe("s")                           # null-source lookup; raises JmsError (e.g. not-found)

        tx = jms.session(transacted=True)              # coordinator attach + declare
        c = tx.consumer("orders")
        c.receive().accept()                           # transactional-state{txn-id, accepted}, settled
        assert tx.rollback().state == "accepted"       # drain, discharge(fail) + pipelined declare, release, re-flow
        assert c.receive().delivery_count == 1

Other entry points: ``s.consumer(topic, SHARED_DURABLE | SHARED, name=...)`` (link names ``s``, ``s|2``,
``s|global``, ``s|volatile1`` ... per §2.3), ``s.browse(queue)``, ``s.producer(None)`` (anonymous relay; pass
``to=`` to ``send``), ``jms.create_temporary_queue()`` / ``create_temporary_topic()`` (``.address``,
``.delete()``), ``tx.commit()``, ``tx.send_discharge(fail)`` / ``tx.send_declare()`` for hand-made pipelines,
``Consumer.drain()``, ``Received.release/reject/modify``. Local guards of the real client (§2.7) raise
``RefusedLocally`` before any frame is sent.

Layers, each module importing only those above it (a link or session names its session or connection as a type
only): ``frames`` (AMQP codes, encoding and decoding, ``WireFrame``), ``errors``, ``vocabulary`` (JMS kinds,
outcomes, filters), ``messages`` (JMS message sections), ``wire`` (the socket, SASL, pumping with deadlines, the
frame rewriter and log), ``deliveries`` (outcomes, pending transfers, tags), ``subscriptions`` (subscription link
names), ``links`` (consumers, producers, coordinator, temporary destinations), ``session`` (``JmsSession``) and
``connection`` (``JmsWire``). This package re-exports what the tests import; the rest is in its module.
"""

from tests.support.jms.connection import CONNECTION_CAPABILITIES, JmsWire
from tests.support.jms.deliveries import SendFailed
from tests.support.jms.errors import ConnectionRefused, JmsError, LinkRefused, RefusedLocally, RemoteError, SaslFailed
from tests.support.jms.frames import WireFrame, _put_symbols
from tests.support.jms.links import Consumer, Received, _LinkEnd
from tests.support.jms.messages import JmsMessage, encode_message, sections
from tests.support.jms.session import JmsSession
from tests.support.jms.subscriptions import SubscriptionTracker
from tests.support.jms.vocabulary import (
    DURABLE,
    NO_LOCAL_FILTER,
    OUTCOMES,
    QUEUE,
    SELECTOR_FILTER,
    SHARED,
    SHARED_DURABLE,
    TEMP_QUEUE,
    TEMP_TOPIC,
    TOPIC,
)

__all__ = [
    "CONNECTION_CAPABILITIES",
    "ConnectionRefused",
    "Consumer",
    "DURABLE",
    "JmsError",
    "JmsMessage",
    "JmsSession",
    "JmsWire",
    "LinkRefused",
    "NO_LOCAL_FILTER",
    "OUTCOMES",
    "QUEUE",
    "Received",
    "RefusedLocally",
    "RemoteError",
    "SELECTOR_FILTER",
    "SHARED",
    "SHARED_DURABLE",
    "SaslFailed",
    "SendFailed",
    "SubscriptionTracker",
    "TEMP_QUEUE",
    "TEMP_TOPIC",
    "TOPIC",
    "WireFrame",
    "_LinkEnd",
    "_put_symbols",
    "encode_message",
    "sections",
]
