"""The publish pipeline, with one owner: from a publisher's transfer to its confirmation.

Owns the straight chain every published message goes through, on the reactor thread (docs/architecture.md,
"The publish pipeline"):

1. **receive**: read a complete transfer on a publisher link (size limit, aborted transfers), find its node
   (the link's, or the anonymous relay's ``to``), decode its envelope;
2. **prepare**: ``Router.prepare`` numbers it and, for a journaled destination, makes its row;
3. **admit**: a queue's memory limit for messages held outside the journal (``engine.memory``), and a durable
   queue's or topic subscription's backlog limit (``engine.backlog``);
4. **submit**: hand its row to the journal with a ``Publication`` (the one token type of this pipeline), or
   hand the message to its transaction (``gateway.transacting``, which journals and routes at the discharge);
5. **on_committed**: the journal's answer comes back on the reactor (``gateway.completions``): the commit is
   recorded (low-water marks may pass it), then
6. **route**: to the queue or the topic's subscriptions (``engine.nodes``), then
7. **confirm**: the publisher's transfer is accepted (or rejected if its row could not be written) and its
   credit comes back.

A message with no row goes from 3 straight to 6 and 7. Requests to ``$management`` come in on a publisher link
too (``manage``); a reply to a journaled node goes through 4 to 6 with no transfer to confirm. A request answered
from the store (``gateway.store_reports``) is replied to when the journal writer's answer comes back.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from proton import Condition, Delivery, Link

from subgate.engine import backlog, codec
from subgate.engine.duplicates import DUPLICATE, PublisherMarks, publisher_identity
from subgate.engine.fanout import check_local_change
from subgate.engine.memory import Answer, Sender, describe
from subgate.engine.nodes import Message, Queue, Topic
from subgate.gateway import address_admin, management, publisher_admin
from subgate.gateway.authority import Authority
from subgate.gateway.consumers import Closer
from subgate.gateway.dead_letters import DeadLetters
from subgate.gateway.housekeeping import Housekeeping
from subgate.gateway.links import ConnectionState, CoordinatorLink, Inbound, accept, reject
from subgate.gateway.router import Ingest, Router
from subgate.gateway.server_admin import ADMIN_TYPES, ServerAdmin
from subgate.gateway.settings import Settings
from subgate.gateway.store_reports import STORE_TYPES, StoreReports
from subgate.gateway.subscriptions import Subscriptions
from subgate.gateway.topic_admin import FANOUT_TYPE, PERMISSIONS_TYPE, TOPIC_TYPE, TopicAdmin
from subgate.gateway.transacting import Transacting
from subgate.mapping.addresses import kind_from_jms_dest
from subgate.mapping.errors import (
    DECODE_ERROR,
    INTERNAL_ERROR,
    MESSAGE_SIZE_EXCEEDED,
    NOT_FOUND,
    RESOURCE_LIMIT,
    TRANSFER_LIMIT_EXCEEDED,
    Refused,
)
from subgate.mapping.names import split_prefix
from subgate.mapping.permissions import Permission

log = logging.getLogger("subgate.broker")

Node = Queue | Topic


class Publication(NamedTuple):
    """The token of a message on its way through the journal (frozen: a tuple, made once per message).

    ``delivery`` is the transfer to confirm at the commit (None: confirmed already, or a management reply);
    ``publisher`` the link whose credit waits for it (None for a management reply)."""

    delivery: Delivery | None
    message: Message
    node: Node
    publisher: Inbound | None


class Publishing:
    """The publish pipeline (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        router: Router,
        authority: Authority,
        housekeeping: Housekeeping,
        closer: Closer,
        subscriptions: Subscriptions,
        topic_admin: TopicAdmin,
        store_reports: StoreReports,
        server_admin: ServerAdmin,
    ) -> None:
        self.settings = settings
        self.router = router
        self.authority = authority
        self.housekeeping = housekeeping
        self.closer = closer
        self.subscriptions = subscriptions
        self.topic_admin = topic_admin
        self.store_reports = store_reports
        self.server_admin = server_admin
        self.transacting = Transacting(router, self.route)
        self.dead_letters = DeadLetters(router, self.route, housekeeping.watch_node)
        router.rules.mover = self.dead_letters.move
        self.marks = PublisherMarks(router.publisher_marks)
        self.gauge = router.memory_limit.gauge  # the memory mark: a message in the journal's hands is held too
        self.published = 0
        self.lost = 0  # store_send_noconfirm messages confirmed and then not persisted

    # -- links -----------------------------------------------------------------------------------------------
    def open_publisher(
        self, link: Link, state: ConnectionState, node: Node | None, *, service: bool = False
    ) -> Inbound:
        """A publisher link's state (``service``: to ``$management``), with its credit window granted once the
        attach is answered (as much of it as the server's memory mark allows: engine.memory_mark)."""
        gauge = self.router.memory_limit.gauge
        return Inbound(link, state, node, self.settings.credit_window, self, gauge, service=service)

    def open_coordinator(self, link: Link, state: ConnectionState) -> CoordinatorLink:
        """A transaction coordinator link's state (mapping doc §6.1); ``start_coordinator`` grants its credit."""
        return CoordinatorLink(link, state, self.transacting)

    def start_coordinator(self, coordinator: CoordinatorLink) -> None:
        self.transacting.open_coordinator(coordinator)

    # -- 1. receive ------------------------------------------------------------------------------------------
    def _read(self, inbound: Inbound, delivery: Delivery) -> bytes | None:
        """The bytes of a complete transfer, or None (not complete yet, aborted, or too large: answered here)."""
        if not delivery.readable:
            return None
        link = inbound.link
        limit = self.settings.max_message_size
        if delivery.partial:
            if delivery.pending > limit:
                self._oversize(inbound, delivery)
            return None
        raw = link.recv(delivery.pending)
        link.advance()
        inbound.credit -= 1
        inbound.active = True
        if inbound.credit < 0 and link.credit < 0:  # ours may drift (Inbound.resync); proton's is exact
            if inbound.revoked > 0:  # sent before the client saw its credit taken back (Inbound.reclaim)
                inbound.revoked -= 1
            else:
                self._over_credit(inbound, delivery)
                return None
        if delivery.aborted or raw is None:
            delivery.settle()
            inbound.top_up()
            return None
        if len(raw) > limit:
            self._oversize(inbound, delivery)
            return None
        return raw

    def receive(self, inbound: Inbound, delivery: Delivery) -> None:
        """A transfer on a publisher link: stages 1 to 4, or 6 and 7 at once for a message with no row."""
        raw = self._read(inbound, delivery)
        if raw is None:
            return
        try:
            txn = self.transacting.transaction_of(delivery)
            memo, hits = inbound.annotations, inbound.annotations.hits
            env = codec.scan(raw, memo)
            node = inbound.node or self._relay_node(env, inbound.conn)
            # A transaction's sends are numbered by the server: a rollback must not leave a mark behind.
            identity = self.marks.check(memo, hits, env.annotations) if env.annotations and txn is None else None
        except codec.CodecError as exc:
            reject(delivery, DECODE_ERROR, f"malformed message: {exc}")
            inbound.top_up()
            return
        except Refused as refusal:
            reject(delivery, refusal.condition, refusal.description)
            inbound.top_up()
            return
        if identity is DUPLICATE:
            accept(delivery)  # a duplicate: confirmed, neither journaled nor delivered again
            inbound.top_up()
            return
        ingest = self.router.prepare(
            raw, env, node, inbound.conn.container_id, inbound.publisher_id, inbound.pending, identity
        )
        if ingest.record is None and type(node) is Queue and not self._admits(node, inbound):
            self._refuse(delivery, describe(node.memory, node.name), identity)
        elif node.backlog_full and (full := backlog.refusal(node, self._sender(node, inbound))) is not None:
            self._refuse(delivery, full, identity)
        elif txn is not None:
            # Held until the discharge: journaled (with the acks) and routed only at commit (mapping §6.3).
            self.transacting.enlist_send(txn, ingest, node, delivery, inbound.publisher_id)
        elif ingest.record is not None:
            self.submit(ingest, delivery, node, inbound)
        else:
            self.route(node, ingest.message)
            accept(delivery)
        inbound.top_up()

    def _refuse(self, delivery: Delivery, description: str, identity: tuple[str, int] | None) -> None:
        """A full queue or backlog: rejected, and nothing stored, so a numbered message's re-send is new."""
        if identity is not None:
            self.marks.refused(identity)
        reject(delivery, RESOURCE_LIMIT, description)

    def _admits(self, queue: Queue, inbound: Inbound) -> bool:
        """May ``queue`` take one more message that is not in the journal from this publisher (engine.memory)?
        Below the limit: two compares. A transaction's send is judged when it is sent (enlisted), not at the
        discharge, so the transfer itself is rejected."""
        return queue.admits(self._sender(queue, inbound)) is Answer.TAKE

    @staticmethod
    def _sender(node: Node, inbound: Inbound) -> Sender:
        return Sender.LINK if inbound.node is node else Sender.RELAY

    def _relay_node(self, env: codec.Envelope, state: ConnectionState) -> Node:
        if not env.to:
            raise Refused(NOT_FOUND, "anonymous relay: the message has no 'to' address")
        settings = self.settings
        to, kind = split_prefix(env.to, settings.anycast_prefixes, settings.multicast_prefixes)
        if kind is None and env.annotations:
            kind = kind_from_jms_dest(env.annotations.get("x-opt-jms-dest"))
        decision = self.router.decide(to, kind)
        self.authority.check_node(state, Permission.UPDATE_TOPIC, decision)
        node = self.router.node_for(decision, state.topics)
        check_local_change(node, "published to")
        self.housekeeping.watch_node(node)
        return node

    def _over_credit(self, inbound: Inbound, delivery: Delivery) -> None:
        """A transfer the link had no credit for (proton does not refuse it): the publisher's unsettled transfers
        are bounded by the credit the server grants (``--credit-window``), so the link is closed with the reason."""
        description = f"transfer without link credit (the server grants {inbound.window}: credit-window)"
        reject(delivery, TRANSFER_LIMIT_EXCEEDED, description)
        if not inbound.closed:  # the transfers already on their way meet a closed link: rejected, not logged
            log.info("closing link %r: %s", inbound.link.name, description)
            self.closer.close_link(inbound, Condition(TRANSFER_LIMIT_EXCEEDED, description))

    def _oversize(self, inbound: Inbound, delivery: Delivery) -> None:
        description = f"message larger than the maximum of {self.settings.max_message_size} bytes"
        log.info("closing link %r: %s", inbound.link.name, description)
        reject(delivery, MESSAGE_SIZE_EXCEEDED, description)
        self.closer.close_link(inbound, Condition(MESSAGE_SIZE_EXCEEDED, description))

    # -- 4. submit -------------------------------------------------------------------------------------------
    def submit(self, ingest: Ingest, delivery: Delivery | None, node: Node, publisher: Inbound | None) -> None:
        """Hand a message's row to the journal; it is routed and confirmed at its commit (``on_committed``)."""
        record = ingest.record
        assert record is not None
        if publisher is not None:
            publisher.pending += 1  # its credit comes back at the commit: the writer's queue stays bounded
        self.gauge.add(len(ingest.message.raw))  # held until routed at the commit (engine.memory_mark)
        if delivery is not None and (
            node.confirm_on_receipt or (not record.durable and not self.settings.journal_non_persistent)
        ):
            # Publisher mode store_send_noconfirm: accepted on receipt, written in the background. Or
            # non-persistent, journaled only to keep its place behind journaled messages (Router.prepare):
            # accepted at once as ever. Either way routed at its commit, in journal order.
            accept(delivery)
            delivery = None
        self.router.journal_message(record, Publication(delivery, ingest.message, node, publisher))
        if type(node) is Topic and node.live:
            node.publish_live(ingest.message)  # subscriptions with capability live: before the commit

    # -- 5 to 7. on_committed, route, confirm ----------------------------------------------------------------
    def on_committed(self, publication: Publication) -> Inbound | None:
        """Its row is in the journal: route it, confirm its transfer. Returns the publisher to top up."""
        delivery, message, node, publisher = publication
        self.router.committed(message.seq)
        self.route(node, message, committed=True)
        self.gauge.drop(len(message.raw))  # after the route: the queues count it now, if they keep it
        if publisher is None:
            return None
        publisher.pending -= 1
        if delivery is not None and not publisher.closed:
            accept(delivery)
        return publisher

    def on_failed(self, publication: Publication, error: BaseException | None) -> Inbound | None:
        """Its row could not be written: its transfer is rejected; one confirmed already (non-persistent, or a
        management reply) is delivered anyway, from memory only. Returns the publisher to top up."""
        delivery, message, node, publisher = publication
        self.router.committed(message.seq)
        identity = publisher_identity(codec.scan(message.raw).annotations)
        if identity is not None:
            self.marks.not_written(*identity)  # a re-send must be taken
        if publisher is not None:
            publisher.pending -= 1
        if delivery is None:
            if publisher is not None and message.durable and node.confirm_on_receipt:
                self.lost += 1  # store_send_noconfirm: confirmed already, and now not persisted
                log.warning("store_send_noconfirm: message %d to %r not persisted: %s", message.seq, node.name, error)
            self.route(node, message.as_journaled(False), committed=True)
        elif publisher is not None and not publisher.closed:
            reject(delivery, INTERNAL_ERROR, f"journal write failed: {error}")
        self.gauge.drop(len(message.raw))
        return publisher

    def inject(self, node: Topic, raw: bytes, publisher_id: str) -> None:
        """A message that came in over a fan-out link (``gateway.fanout_mirror``): journaled when the topic needs
        it (a durable subscription), routed like a publisher's, with no transfer to confirm.

        Raises:
            engine.codec.CodecError: the bytes are not an AMQP message.
        """
        ingest = self.router.prepare(raw, codec.scan(raw), node, None, publisher_id)
        if ingest.record is None:
            self.route(node, ingest.message)
        else:
            self.submit(ingest, None, node, None)

    def route(self, node: Node, message: Message, *, committed: bool = False) -> None:
        """To the queue, or to the topic's subscriptions (at its commit: not again to the live ones)."""
        self.published += 1
        node.messages_in += 1
        if isinstance(node, Topic):
            node.publish(message, committed=committed)
        else:
            node.push(message)

    # -- $management -----------------------------------------------------------------------------------------
    def manage(self, inbound: Inbound, delivery: Delivery) -> None:
        """A transfer on a link to $management: answer the request on its reply-to address."""
        raw = self._read(inbound, delivery)
        if raw is None:
            return
        self._manage(inbound, delivery, raw)
        inbound.top_up()

    def _manage(self, inbound: Inbound, delivery: Delivery, raw: bytes) -> None:
        try:
            request = management.read_request(raw)
        except codec.CodecError as exc:
            reject(delivery, DECODE_ERROR, f"malformed management request: {exc}")
            return
        owns = self.authority.owned_by(inbound.conn)
        response: management.Response | None
        if request.type in (TOPIC_TYPE, PERMISSIONS_TYPE, FANOUT_TYPE):
            response = self.topic_admin.handle(request, inbound.conn.topics)
        elif request.type == address_admin.ADDRESS_SETTINGS_TYPE:
            response = address_admin.handle(request, self.router)
        elif request.type in publisher_admin.TYPES:
            response = publisher_admin.handle(request, self.router, self.marks)
        elif request.type in ADMIN_TYPES:
            response = self.server_admin.handle(request, inbound.conn, owns)
        elif request.type in STORE_TYPES:
            # Answered from the store: the reply goes out when the journal writer's answer comes back.
            response = self.store_reports.handle(request, owns, lambda answer: self._reply(request, answer))
        else:
            response = management.handle(request, self.subscriptions, owns)
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()
        if response is not None:
            self._reply(request, response)

    def _reply(self, request: management.Request, response: management.Response) -> None:
        """Send ``response`` to the request's reply-to node."""
        log.info("management %s %s: %d %s", request.operation, request.type, response.status, response.description)
        node = self.router.node(request.reply_to or "")
        if node is None:
            log.info("management response dropped: no node at reply-to %r", request.reply_to)
            return
        reply = management.encode_response(request, response)
        ingest = self.router.prepare(reply, codec.scan(reply), node, None, management.ADDRESS)
        if ingest.record is None:
            self.route(node, ingest.message)
        else:
            self.submit(ingest, None, node, None)  # journaled (a paging node): routed in journal order
