"""Server settings: one frozen record built by the CLI (flags, SUBGATE_* variables, TOML file)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    listen_host: str = "127.0.0.1"
    listen_port: int = 5672
    store_url: str = "sqlite:///subgate.db"
    name: str = "subgate"
    allow_anonymous: bool | None = None  # None: only while no principal exists
    auto_create: bool = True
    default_node_type: str = "queue"
    credit_window: int = 1000  # credit granted to each publisher link
    max_message_size: int = 10 * 1024 * 1024
    max_frame_size: int = 1024 * 1024
    idle_timeout: float = 60.0  # seconds; half is advertised
    journal_non_persistent: bool = False  # journal messages without header.durable too
    max_connections: int = 10000
    expiry_sweep_interval: float = 1.0
    reconnect_timeout: float = 60.0  # seconds a lost connection keeps its remove-with-session registrations
    missing_topic_timeout: float = 10.0  # seconds a subscribe/fetch waits for silent missing-topic handlers
    policy_refresh_interval: float = 2.0  # seconds between re-reads of principals, roles and grants
    page_messages: int = 2000  # messages a durable queue keeps in memory before it pages from the journal; 0: never
    max_connections_per_address: int = 1000  # open connections from one IP address
    handshake_timeout: float = 10.0  # seconds from accept to the end of SASL and the peer's open
    frame_timeout: float = 30.0  # seconds a frame may take to arrive whole once it has begun
    # Per-queue limit on messages held in memory only (not in the journal: non-persistent ones, and every message
    # on a temporary queue or non-durable subscription), 0: none; and what a full queue does (engine.memory).
    memory_limit_messages: int = 100_000
    memory_limit_bytes: int = 64 * 1024 * 1024
    memory_full_policy: str = "block"  # "block": withhold credit from the queue's publishers; "fail": reject
    # Address prefixes that name the node type, as Artemis' anycastPrefix and multicastPrefix (mapping.names).
    anycast_prefixes: tuple[str, ...] = ("queue://",)
    multicast_prefixes: tuple[str, ...] = ("topic://",)
