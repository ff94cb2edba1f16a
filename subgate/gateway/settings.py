"""Server settings: one frozen record, and the one table of what ``subgate serve`` lets an operator set.

Each field that an operator sets carries its command-line face in its metadata (``setting(...)``): the help
text, the flag when it is not the field's name, bounds and choices. ``cli.serve_options`` turns that table into
``serve``'s click options, so a setting is declared once and gets its flag, its ``SUBGATE_*`` variable and its key
in the ``--config`` TOML file together (flag, environment, file, default: in that order). Fields without metadata
(the listen address and the store, which ``serve`` parses itself, and internal tunables) are not options.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from subgate.engine.endpoint_limits import EndpointLimits
from subgate.engine.fanout import FanoutConfig

QUEUE, TOPIC = "queue", "topic"


def setting(
    default: Any,
    help: str,  # noqa: A002 - the word click uses
    *,
    flag: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] | None = None,
) -> Any:
    """A field of ``Settings`` that ``subgate serve`` offers as an option (see the module docstring)."""
    metadata = {"help": help, "flag": flag, "minimum": minimum, "maximum": maximum, "choices": choices}
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Settings:
    listen_host: str = "127.0.0.1"
    listen_port: int = 5672
    store_url: str = "sqlite:///subgate.db"
    name: str = setting("subgate", "Server name (the container-id it opens connections with).")
    allow_anonymous: bool | None = setting(None, "SASL ANONYMOUS (default: allowed only while no user exists).")
    auto_create: bool = setting(True, "Create queues and topics on first use.")
    default_node_type: str = setting(
        QUEUE, "Node type for a new address whose attach names none.", choices=(QUEUE, TOPIC)
    )
    credit_window: int = setting(1000, "Credit granted to each publisher link.", minimum=1, maximum=1_000_000)
    max_message_size: int = setting(10 * 1024 * 1024, "Largest message accepted, in bytes.", minimum=1024)
    max_frame_size: int = setting(1024 * 1024, "Largest AMQP frame accepted, in bytes.", minimum=512)
    idle_timeout: float = setting(60.0, "Seconds; half of it is advertised to peers.", minimum=0)
    journal_non_persistent: bool = setting(False, "Also journal messages sent without header.durable.")
    journal_process: bool = setting(
        True,
        "Run the journal writer in a process of its own, off the reactor's GIL (docs/threading.md); "
        "--no-journal-process keeps it a thread of the server (always so for an in-memory SQLite store).",
    )
    journal_branches: tuple[str, ...] = setting(
        (),
        "Comma-separated BRANCH=MODE: what the journal keeps for replay of the topics under BRANCH: persistent "
        "(the default: every persistent message), all (non-persistent ones too) or off (only what durable "
        "subscriptions need).",
    )
    retention: str = setting(
        "7d",
        "How long the journal keeps messages for replay (7d, 12h, 30m, 45s; 0: only what a queue or durable "
        "subscription has not accepted yet). Older rows that every queue and durable subscription has accepted "
        "are deleted in the background.",
    )
    retention_interval: float = setting(60.0, "Seconds between two retention passes over the journal.", minimum=0.05)
    publisher_modes: tuple[str, ...] = setting(
        (),
        "Comma-separated BRANCH=MODE: when a journaled message to a queue or topic under BRANCH is confirmed: "
        "store_confirm_send (the default: after its commit) or store_send_noconfirm (on receipt; written in the "
        "background).",
    )
    reconnect_timeout: float = setting(
        60.0,
        "Seconds a connection lost without a close frame keeps its remove-with-session registrations.",
        minimum=0,
    )
    missing_topic_timeout: float = setting(
        10.0,
        "Seconds a subscribe or fetch waits for a silent missing-topic handler before it proceeds.",
        minimum=0.01,
    )
    fanout_queue_limit: int = setting(
        100_000,
        "Replication messages a primary holds in order for a secondary that is behind (its fan-out credit used up); "
        "past it, only the latest value of each topic waits (docs/fanout.md).",
        minimum=0,
    )
    policy_refresh_interval: float = setting(
        2.0, "Seconds between re-reads of users, roles and grants from the store.", flag="--policy-refresh", minimum=0.1
    )
    page_messages: int = setting(
        2000,
        "Messages a durable queue or subscription keeps in memory; the rest is read from the journal as consumers "
        "get there (0: keep everything in memory).",
        minimum=0,
    )
    max_connections: int = setting(
        10000, "Open connections in all; a client over the limit is refused with a reason.", minimum=1
    )
    max_connections_per_address: int = setting(1000, "Open connections from one IP address.", minimum=1)
    handshake_timeout: float = setting(
        10.0,
        "Seconds from accept to the end of SASL and the client's open; slower clients are disconnected.",
        minimum=0.1,
    )
    frame_timeout: float = setting(30.0, "Seconds a frame may take to arrive whole once it has begun.", minimum=0.1)
    # What one connection may hold (engine.endpoint_limits): past each, amqp:resource-limit-exceeded.
    max_sessions_per_connection: int = setting(
        256, "Sessions open at once on one connection; a further begin is answered and ended with an error.", minimum=1
    )
    max_links_per_session: int = setting(
        1000,
        "Links attached at once on one session; a further attach is answered and detached with an error.",
        minimum=1,
    )
    max_unsettled_per_link: int = setting(
        5000,
        "Deliveries sent on one consumer link and not yet settled; at the limit the link gets no more messages "
        "until the consumer settles some (its credit is kept).",
        minimum=1,
    )
    max_topics_per_connection: int = setting(
        10000,
        "Topics that one connection created (publishing or subscribing to a new one, management CREATE) and that "
        "still exist; a further creation is refused with an error.",
        minimum=1,
    )
    max_selector_length: int = setting(
        8192,
        "Characters of a JMS selector in an attach (keep the attach's echo within the clients' max frame size).",
        minimum=1,
        maximum=65536,
    )
    # Transport security (docs/security.md "TLS"): a second listener that speaks TLS, and what plain text may do.
    tls_listen: str = setting(
        "", "HOST:PORT of a second listener that speaks TLS (amqps) ('': none; port 0 picks a free port)."
    )
    tls_cert: str = setting("", "PEM file of the TLS listener's certificate (with its chain).")
    tls_key: str = setting("", "PEM file of the private key of --tls-cert.")
    tls_ca: str = setting(
        "", "PEM file of the CAs that client certificates are checked against (a client may then present one)."
    )
    tls_verify_client: bool = setting(
        False, "Require a client certificate, signed by a CA of --tls-ca, on the TLS listener."
    )
    require_tls: bool = setting(
        False, "Refuse plain-text connections from other hosts (loopback ones are still served)."
    )
    allow_plain_without_tls: bool = setting(
        False, "Offer SASL PLAIN on plain-text connections from other hosts (by default only over TLS or loopback)."
    )
    sasl_scram: bool = setting(
        False,
        "Offer SASL SCRAM-SHA-256, first (clients such as Qpid JMS then pick it over PLAIN; docs/security.md).",
    )
    # Failed logins (engine.login_throttle): counted per address and per user name, and slowed.
    login_free_failures: int = setting(
        3, "Failed logins of one address, or one user name, before its further attempts are held back.", minimum=0
    )
    login_delay: float = setting(
        1.0,
        "Seconds the first held-back attempt waits before its check; doubled with each further failure (0: none).",
        minimum=0,
    )
    login_delay_max: float = setting(
        4.0, "Longest hold, in seconds (keep it under --handshake-timeout, which still applies).", minimum=0
    )
    login_failure_window: float = setting(
        900.0, "Seconds after its last failure that an address's or a user name's failures are forgotten.", minimum=1
    )
    # Per-queue limit on messages held in memory only (not in the journal: non-persistent ones, and every message
    # on a temporary queue or non-durable subscription), 0: none; and what a full queue does (engine.memory).
    memory_limit_messages: int = setting(
        100_000,
        "Messages not in the journal (non-persistent ones, any on a temporary queue or non-durable subscription) "
        "a queue may hold in memory (0: no limit).",
        minimum=0,
    )
    memory_limit_bytes: int = setting(
        64 * 1024 * 1024, "Bytes of such messages a queue may hold in memory (0: no limit).", minimum=0
    )
    memory_full_policy: str = setting(
        "block",
        "A queue at its memory limit: block (no more credit for its publishers until it drains) or fail (reject "
        "further such messages with amqp:resource-limit-exceeded). Topic subscriptions drop the copy.",
        choices=("block", "fail"),
    )
    # Per durable queue and durable subscription: the messages it may hold, journaled ones too (engine.backlog).
    max_backlog_messages: int = setting(
        0,
        "Messages a durable queue or durable subscription may hold, in memory or paged out to the journal (0: no "
        "limit; the journal is on disk).",
        minimum=0,
    )
    backlog_full_policy: str = setting(
        "block",
        "A durable queue or subscription at --max-backlog-messages: block (no more credit for its publishers, a "
        "topic's included, until it drains to 80 %) or fail (reject further messages as resource-limit-exceeded).",
        choices=("block", "fail"),
    )
    memory_high_water: int = setting(
        1 << 30,
        "Bytes of message bodies the server may hold in memory, all queues, subscriptions and the credit of publisher "
        "links (each credit reserves --max-message-size) together; at the mark every publisher link gets no more "
        "credit until they drop to 80 % of it (0: no mark; at least --max-message-size).",
        minimum=0,
    )
    max_connection_output: int = setting(
        4 * 1024 * 1024,
        "Bytes of transfers the server buffers for one connection's socket; past it the connection's consumers get "
        "no more messages until the socket has taken half of them (a consumer that stops reading costs no more).",
        minimum=64 * 1024,
    )
    max_groups: int = setting(
        100_000,
        "Message groups (JMSXGroupID) a queue remembers the consumer of; past it the least recently used group is "
        "forgotten and its next message picks a consumer again.",
        minimum=1,
    )
    # Address prefixes that name the node type, as Artemis' anycastPrefix and multicastPrefix (mapping.names).
    anycast_prefixes: tuple[str, ...] = setting(
        ("queue://",), "Comma-separated address prefixes that name a queue (as Artemis' anycastPrefix); '' for none."
    )
    multicast_prefixes: tuple[str, ...] = setting(
        ("topic://",), "Comma-separated address prefixes that name a topic (as Artemis' multicastPrefix); '' for none."
    )
    artemis_wildcards: bool = setting(
        False,
        "Read a topic consumer's address in Artemis wildcard syntax (news.#, news.*.eu) as the Diffusion topic "
        "selector it means; off: such an address is refused with the Diffusion form in the error. Never a node.",
    )
    wildcard_delimiter: str = setting(".", "The word delimiter of Artemis wildcard addresses.")
    address_settings: tuple[str, ...] = setting(
        (),
        'Comma-separated PATTERN:key=value;key=value entries (TOML: [address_settings."PATTERN"] tables): per '
        "queue name pattern (Artemis wildcards # and *), max_delivery_attempts (10), dead_letter_address (DLQ), "
        "expiry_address (ExpiryQueue), auto_create_dead_letter_resources, redelivery_delay (ms), "
        "redelivery_delay_multiplier, max_redelivery_delay, auto_create_queues, max_backlog_messages, "
        "backlog_full_policy and more: docs/jms.md.",
    )
    http: str = setting(
        "",
        "HOST:PORT of the HTTP endpoint: /metrics (Prometheus), /healthz and /readyz ('': off; port 0 picks a free "
        "port, the log line says which).",
    )
    http_threads: int = setting(
        4,
        "Worker threads answering HTTP requests; sockets are read and written by one more thread.",
        minimum=1,
        maximum=256,
    )
    http_max_connections: int = setting(
        1000, "Open HTTP connections at most; past it new ones wait in the listen backlog.", minimum=1
    )
    http_idle_timeout: float = setting(
        60.0, "Seconds an HTTP connection may stay open without a request before it is closed.", minimum=0.5
    )
    http_request_timeout: float = setting(
        10.0,
        "Seconds an HTTP request may take to arrive whole (request line, headers and body) from its first byte; "
        "a slower client is disconnected.",
        minimum=0.5,
    )
    metrics_top_nodes: int = setting(
        50,
        "Nodes (and queues, and durable subscriptions) that get series of their own in /metrics: the busiest ones; "
        "the rest are summed under 'other'.",
        minimum=1,
    )
    expiry_sweep_interval: float = 1.0
    # Fan-out links to primaries (``--fanout``, TOML ``[[fanout]]``; docs/fanout.md): parsed by the CLI.
    fanout: tuple[FanoutConfig, ...] = ()

    def endpoint_limits(self) -> EndpointLimits:
        """What one connection may hold (``engine.endpoint_limits``)."""
        return EndpointLimits(
            self.max_sessions_per_connection,
            self.max_links_per_session,
            self.max_unsettled_per_link,
            self.max_topics_per_connection,
            self.max_selector_length,
        )
