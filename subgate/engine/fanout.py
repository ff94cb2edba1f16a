"""Fan-out: the rules of a fan-out link, without sockets or proton (docs/fanout.md).

Owns the configuration of one fan-out link (``FanoutConfig``: ``--fanout 'URL=SELECTOR'`` and the TOML table
``[[fanout]]``), the names of the replication wire contract (the ``replicate`` capability, the message kinds and
their application properties, the missing-topic propagation node), seed 000's propagation conditions that need
no I/O (``propagates``: selector intersection on path prefixes, no replicated topic matching both) and the lag
window behind ``subgate fanout status``. Standard library and ``topics`` only.
"""

from __future__ import annotations

import re
import struct
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from subgate.engine.nodes import Queue, Topic
from subgate.mapping.errors import NOT_ALLOWED, Refused
from subgate.topics import Selector, TopicsError, intersects, parse_selector

REPLICATE = "replicate"  # the source capability of a fan-out link's receiver
# Offered beside it by a secondary that reads batches: the primary may then send several operations per transfer.
REPLICATE_BATCH = "replicate-batch"
PROPAGATION_ADDRESS = "$subgate/fanout/missing-topic"  # target of the secondary's sender for notifications

# A replication message: subject = OP_PROPERTY's value, application properties below, body = the value's bytes.
OP, PATH, TIMESTAMP = "op", "path", "ts"
ADD, UPDATE, REMOVE, SNAPSHOT_END = "add", "update", "remove", "snapshot-end"
OPERATIONS = (ADD, UPDATE, REMOVE, SNAPSHOT_END)
BATCH = "batch"  # op of a transfer that carries several operations (encode_batch), to a peer offering it
BATCH_OPERATIONS = 64  # at most this many operations per batch transfer
BATCH_BYTES = 16 * 1024  # and no more bytes of paths and values than this (one larger value goes alone)
_NO_VALUE = 0xFFFFFFFF
_RECORD = struct.Struct(">BHI")  # op index, path length, value length (_NO_VALUE: none)

# Link states (subgate fanout status)
CONNECTING, SNAPSHOT, LIVE, LOST = "connecting", "snapshot", "live", "lost"

_URL = re.compile(r"^(amqps?)://(?:([^:@/]*)(?::([^@/]*))?@)?([^=/@]+?)(?::(\d+))?$")
_SPEC = re.compile(r"^(amqps?://(?:[^@/]*@)?[^=/@]+)=(.+)$")
KEYS = ("url", "selector", "user", "password", "retry_interval", "reconnect_timeout", "max_in_flight")


class FanoutConfigError(ValueError):
    """A fan-out link that cannot be configured (the message names what is wrong)."""


@dataclass(frozen=True)
class FanoutConfig:
    """One fan-out link, as configured on the secondary."""

    url: str  # amqp://host:port (credentials moved to user/password)
    selector: str  # the Diffusion topic selector replicated
    user: str | None = None
    password: str | None = None
    retry_interval: float = 1.0  # seconds between connection attempts
    reconnect_timeout: float = 60.0  # seconds a lost link keeps its replicas
    max_in_flight: int = 1000  # replication messages received and not yet applied (the receiver's credit)

    @property
    def host(self) -> str:
        return _split_url(self.url)[2]

    @property
    def port(self) -> int:
        return _split_url(self.url)[3]

    @property
    def parsed_selector(self) -> Selector:
        return parse_selector(self.selector)

    def describe(self) -> str:
        return f"{self.url}={self.selector}"


def _split_url(url: str) -> tuple[str | None, str | None, str, int]:
    match = _URL.match(url)
    if match is None:
        raise FanoutConfigError(f"fan-out URL {url!r} is not amqp://[user:password@]host:port")
    _scheme, user, password, host, port = match.groups()
    return (
        unquote(user) if user else None,
        unquote(password) if password is not None else None,
        host.strip("[]"),
        int(port) if port else 5672,
    )


def make_config(values: Mapping[str, Any]) -> FanoutConfig:
    """A link from a TOML ``[[fanout]]`` table (keys ``KEYS``); credentials in the URL count when the table
    has none.

    Raises:
        FanoutConfigError: an unknown key, a missing url or selector, a bad URL, selector or number.
    """
    unknown = sorted(set(values) - set(KEYS))
    if unknown:
        raise FanoutConfigError(f"[[fanout]]: unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
    url, selector = values.get("url"), values.get("selector")
    if not isinstance(url, str) or not isinstance(selector, str) or not selector:
        raise FanoutConfigError("[[fanout]] needs 'url' and 'selector' (strings)")
    user, password, host, port = _split_url(url)
    try:
        parse_selector(selector)
    except TopicsError as exc:
        raise FanoutConfigError(f"fan-out selector {selector!r}: {exc}") from None
    defaults = FanoutConfig("", "")
    retry = _number("retry_interval", values.get("retry_interval", defaults.retry_interval), float, 0.01)
    timeout = _number("reconnect_timeout", values.get("reconnect_timeout", defaults.reconnect_timeout), float, 0)
    in_flight = int(_number("max_in_flight", values.get("max_in_flight", defaults.max_in_flight), int, 1))
    scheme = url.split("://", 1)[0]
    return FanoutConfig(
        url=f"{scheme}://{host if ':' not in host else '[' + host + ']'}:{port}",
        selector=selector,
        user=_text(values, "user") or user,
        password=_text(values, "password") or password,
        retry_interval=retry,
        reconnect_timeout=timeout,
        max_in_flight=in_flight,
    )


def _number(key: str, value: object, kind: type, least: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and not isinstance(value, int)):
        raise FanoutConfigError(f"fan-out {key} must be a number, not {value!r}")
    if value < least:
        raise FanoutConfigError(f"fan-out {key} must be at least {least}, not {value!r}")
    return float(value)


def _text(values: Mapping[str, Any], key: str) -> str | None:
    value = values.get(key)
    if value is not None and not isinstance(value, str):
        raise FanoutConfigError(f"fan-out {key} must be a string")
    return value


def parse_spec(spec: str) -> FanoutConfig:
    """``URL=SELECTOR`` of ``--fanout`` (the first ``=`` after the host:port separates them).

    Raises:
        FanoutConfigError: not URL=SELECTOR, or a bad URL or selector.
    """
    match = _SPEC.match(spec.strip())
    if match is None:
        raise FanoutConfigError(f"--fanout {spec!r} is not 'amqp://[user:password@]host:port=SELECTOR'")
    return make_config({"url": match.group(1), "selector": match.group(2)})


def encode_batch(operations: Iterable[tuple[str, str, bytes | None]]) -> bytes:
    """The body of a ``batch`` transfer (docs/fanout.md, "Wire"): per operation, a record of the op's index in
    ``OPERATIONS`` (1 byte), the path's UTF-8 length (2 bytes) and the value's length (4 bytes, ``0xFFFFFFFF``:
    no value), all big-endian, then the path and the value."""
    parts: list[bytes] = []
    pack = _RECORD.pack
    for op, path, value in operations:
        encoded = path.encode()
        parts.append(pack(OPERATIONS.index(op), len(encoded), _NO_VALUE if value is None else len(value)))
        parts.append(encoded)
        if value is not None:
            parts.append(value)
    return b"".join(parts)


def decode_batch(body: bytes | memoryview) -> list[tuple[str, str, bytes | None]]:
    """The operations of a ``batch`` transfer's body, values copied out of ``body``.

    Raises:
        ValueError: a truncated record or an unknown op.
    """
    view = memoryview(body)
    out: list[tuple[str, str, bytes | None]] = []
    offset, end, size = 0, len(view), _RECORD.size
    unpack = _RECORD.unpack_from
    while offset < end:
        if offset + size > end:
            raise ValueError("truncated batch record")
        index, path_len, value_len = unpack(view, offset)
        offset += size
        value_end = offset + path_len + (0 if value_len == _NO_VALUE else value_len)
        if index >= len(OPERATIONS) or value_end > end:
            raise ValueError("bad batch record")
        path = str(view[offset : offset + path_len], "utf-8")
        value = None if value_len == _NO_VALUE else bytes(view[offset + path_len : value_end])
        out.append((OPERATIONS[index], path, value))
        offset = value_end
    return out


def propagates(link_selector: Selector, selector: Selector, replicated: Iterable[str]) -> bool:
    """Seed 000's conditions 2 and 3 for one fan-out link: the request's selector intersects the link's (on path
    prefixes only), and none of the link's replicated topics (``replicated``: their paths) matches both."""
    if not intersects(link_selector, selector):
        return False
    return not any(selector.matches(path) and link_selector.matches(path) for path in replicated)


def check_local_change(node: Queue | Topic | None, action: str) -> None:
    """A replicated topic is changed only by its primary.

    Raises:
        Refused: amqp:not-allowed when ``node`` is a replica (``action``: what was asked, "published to").
    """
    if isinstance(node, Topic) and node.replica_of is not None:
        primary = node.replica_of
        raise Refused(NOT_ALLOWED, f"topic {node.name!r} is replicated from {primary}: it cannot be {action} here")


class LagWindow:
    """Replication lag samples (primary timestamp to local apply, ms) of the last ``span`` seconds: p50 and max."""

    __slots__ = ("span", "samples")

    def __init__(self, span: float = 60.0) -> None:
        self.span = span
        self.samples: deque[tuple[float, float]] = deque()  # (local time in s, lag in ms)

    def add(self, now: float, lag_ms: float) -> None:
        self.samples.append((now, max(lag_ms, 0.0)))
        if len(self.samples) > 100_000:
            self.samples.popleft()

    def figures(self, now: float) -> tuple[float | None, float | None]:
        """(p50, max) in ms over the window; (None, None) without samples."""
        while self.samples and self.samples[0][0] < now - self.span:
            self.samples.popleft()
        if not self.samples:
            return None, None
        lags = sorted(lag for _, lag in self.samples)
        return lags[len(lags) // 2], lags[-1]
