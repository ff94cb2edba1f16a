"""The SASL phase of every accepted connection: from its first byte to the hand-off to a proton transport.

Owns the use of ``gateway.sasl.SaslServer`` per channel: the mechanisms it offers (``engine.transport_policy``:
by address, TLS and client certificate; EXTERNAL checks the certificate's principal), feeding it bytes, asking the
``Authenticator``'s workers for a verdict (by request number: a worker thread never holds a channel, so it can
never drop the last reference to a proton object), answering a connection that is over a limit (sasl-outcome
sys-temp), the no-SASL path (a plain AMQP header, checked against the anonymous policy like SASL ANONYMOUS), and
failed logins: logged, counted and their answers held back on the reactor's timers (``engine.login_throttle``).
SCRAM-SHA-256 takes two steps: the worker's answer to its first message is the user's keys (the challenge goes out),
and the verdict is the proof ``gateway.sasl`` checked (``ProofChecked``), counted here like a PLAIN verdict.
It writes and closes through the ``SocketSide`` it is given (``gateway.channel_io.ChannelIO``). Reactor thread only.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from subgate.engine.login_throttle import LoginThrottle
from subgate.engine.repeats import refused_as
from subgate.engine.sasl_mechanisms import ANONYMOUS, EXTERNAL
from subgate.engine.transport_policy import TransportRules, certificate_name, external_identity
from subgate.gateway.channels import Channel, remote
from subgate.gateway.sasl import (
    OUTCOME_SYS_TEMP,
    SASL_HEADER,
    CredentialsReceived,
    NoSaslHeader,
    ProofChecked,
    ProtocolViolation,
    SaslDone,
    SaslServer,
)

log = logging.getLogger("subgate.io")

# A client that skips SASL is checked against the anonymous policy like SASL ANONYMOUS (by the Authenticator,
# whose answer can depend on the store), so it is submitted as these credentials.
_NO_SASL = CredentialsReceived("ANONYMOUS", None, None, None)


_VIOLATION = refused_as("sasl-violation")  # per-connection log lines held back by engine.repeats
_NO_SASL_LOG = refused_as("sasl-required")


class SocketSide(Protocol):
    """What the SASL phase needs from the socket side."""

    def write(self, channel: Channel, data: bytes) -> None: ...

    def close_after_flush(self, channel: Channel) -> None: ...

    def start_amqp(self, channel: Channel, leftover: bytes) -> None: ...


class SaslPhase:
    """Runs the SASL exchange of every channel that has not reached its AMQP transport yet."""

    def __init__(
        self,
        io: SocketSide,
        authenticate: Callable[[int, CredentialsReceived], None],
        withdraw: Callable[[int], None] | None = None,
        rules: TransportRules | None = None,
        *,
        throttle: LoginThrottle | None = None,
        schedule: Callable[[float, Callable[[], None]], None] | None = None,
    ) -> None:
        self._io = io
        self._rules = rules or TransportRules()
        self._throttle = throttle if throttle is not None else LoginThrottle()  # (an empty one is falsy)
        self._schedule = schedule
        self._authenticate = authenticate
        self._withdraw = withdraw
        # Channels waiting for an auth worker's verdict, by request number.
        self._awaiting_verdict: dict[int, Channel] = {}
        self._mechanisms: dict[int, str] = {}  # request number -> the mechanism it checks ("none": no SASL)
        self.failures: Counter[str] = Counter()  # failed authentications by mechanism, for /metrics
        self._verdict_requests = itertools.count(1)

    def receive(self, channel: Channel, data: bytes) -> None:
        """Bytes read from a channel in its SASL phase (or held while its no-SASL check runs)."""
        if channel.held is not None:
            channel.held += data
            return
        sasl = channel.sasl
        assert sasl is not None
        sasl.receive_data(data)
        self._events(channel)

    def _events(self, channel: Channel) -> None:
        sasl = channel.sasl
        assert sasl is not None
        while not channel.closed and channel.sasl is sasl:
            event = sasl.next_event()
            if event is None:
                break
            if isinstance(event, CredentialsReceived):
                if channel.refusal is not None:  # over a connection limit: "temporary system error", try later
                    sasl.complete(False, code=OUTCOME_SYS_TEMP)
                else:
                    self._ask_verdict(channel, event)
            elif isinstance(event, ProofChecked):
                self._count_verdict(channel.login or "none", event.valid, event.username)
                sasl.complete(event.valid, event.username)
            elif isinstance(event, SaslDone):
                if event.authenticated:
                    self._io.write(channel, sasl.data_to_send())
                    channel.user = event.username
                    self._io.start_amqp(channel, event.leftover)
                elif channel.refusal is None:
                    self._login_failed(channel, event.username, sasl.data_to_send())
                else:
                    self._io.write(channel, sasl.data_to_send())
            elif isinstance(event, NoSaslHeader):
                # Whether anonymous access is allowed may depend on the store (a user added while we run), which
                # only an auth worker reads: hold the bytes and ask; on_verdict carries on.
                channel.sasl = None
                if channel.refusal is not None:  # the broker answers its open with the reason
                    self._io.start_amqp(channel, event.leftover)
                    continue
                channel.held = event.leftover
                self._ask_verdict(channel, _NO_SASL)
            elif isinstance(event, ProtocolViolation):
                log.info("closing connection from %s: %s", channel.peer, event.description, extra=_VIOLATION)
                self._io.write(channel, sasl.data_to_send())
                self._io.close_after_flush(channel)
        if channel.sasl is sasl and not channel.closed:
            self._io.write(channel, sasl.data_to_send())

    def begin(self, channel: Channel) -> None:
        """A new channel: the mechanisms it is offered follow from where it comes from (engine.transport_policy);
        a TLS channel's are decided again when its handshake ends."""
        tls = channel.tls is not None
        channel.sasl = SaslServer(self._rules.mechanisms(channel.address, tls=tls, client_certificate=False))

    def tls_established(self, channel: Channel, certificate: dict[str, Any] | None) -> None:
        """The channel's TLS handshake is over (before any SASL byte): ``certificate`` is the client's, verified,
        when it presented one. EXTERNAL is offered with one, as the principal its subject CN names."""
        channel.certificate_name = certificate_name(certificate)
        log.debug("TLS established with %s (client certificate for %r)", channel.peer, channel.certificate_name)
        if channel.sasl is not None and certificate is not None:
            channel.sasl.offer(self._rules.mechanisms(channel.address, tls=True, client_certificate=True))

    def _login_failed(self, channel: Channel, username: str | None, answer: bytes) -> None:
        """A failed login: logged (never the password), counted against its address and user name, and its
        ``answer`` (the sasl-outcome) written and the socket closed, at once or, past the free failures, after the
        throttle's delay (engine.login_throttle) on the reactor's timer. Only checked credentials count: not
        ANONYMOUS, nor a PLAIN or EXTERNAL message that could not be parsed (``login`` None): nothing was guessed."""
        extra: dict[str, object] = {"event": "auth-failed", "principal": username, "peer": remote(channel.peer)}
        extra.update(refused_as("auth-failure"))
        if channel.login is None or channel.login == ANONYMOUS:
            how = channel.login or "malformed credentials"
            log.info("authentication failed for %r from %s (%s)", username, channel.peer, how, extra=extra)
            self._answer_failure(channel, answer)
            return
        counts = self._throttle.failed(channel.address, username, time.monotonic())
        extra.update(failures_address=counts.address, failures_principal=counts.user, delay=counts.delay)
        log.log(
            logging.WARNING if counts.delay else logging.INFO,
            "authentication failed for %r from %s (%s; failures lately: %d from %s, %d for %r; answer held back "
            "%gs)",
            username, channel.peer, channel.login, counts.address, channel.address, counts.user,
            username, counts.delay, extra=extra,
        )  # fmt: skip
        if counts.delay and self._schedule is not None:
            self._schedule(counts.delay, lambda: self._answer_failure(channel, answer))
        else:
            self._answer_failure(channel, answer)

    def _answer_failure(self, channel: Channel, answer: bytes) -> None:
        if not channel.closed:  # the peer may have given up meanwhile
            self._io.write(channel, answer)
            self._io.close_after_flush(channel)

    def forget(self, channel: Channel) -> None:
        """The channel is gone: a verdict it still waits for is withdrawn (no hash is spent on it)."""
        request = channel.verdict_request
        if request is not None:
            self._mechanisms.pop(request, None)
        if request is not None and self._awaiting_verdict.pop(request, None) is not None and self._withdraw:
            self._withdraw(request)

    def _ask_verdict(self, channel: Channel, credentials: CredentialsReceived) -> None:
        if credentials.mechanism == EXTERNAL:  # who it is: the certificate's name (None: refused)
            principal = external_identity(credentials.username, channel.certificate_name)
            credentials = CredentialsReceived(EXTERNAL, principal, None, credentials.hostname)
        if credentials is not _NO_SASL:
            channel.login = credentials.mechanism
        request = next(self._verdict_requests)
        channel.verdict_request = request
        self._awaiting_verdict[request] = channel
        self._mechanisms[request] = "none" if credentials is _NO_SASL else credentials.mechanism
        self._authenticate(request, credentials)

    def on_verdict(self, event: Any) -> None:
        request, authenticated, username, scram_keys = event.subject
        channel = self._awaiting_verdict.pop(request, None)
        mechanism = self._mechanisms.pop(request, "none")
        if channel is not None:
            channel.verdict_request = None
        if channel is None or channel.closed:
            return
        if scram_keys is not None and channel.sasl is not None:  # SCRAM's first step: not a verdict yet
            channel.sasl.challenge(scram_keys)
            self._events(channel)
            return
        self._count_verdict(mechanism, authenticated, username)
        if channel.held is not None:
            self._no_sasl_verdict(channel, authenticated)
            return
        if channel.sasl is None:
            return
        channel.sasl.complete(authenticated, username)
        self._events(channel)

    def _count_verdict(self, mechanism: str, authenticated: bool, username: str | None) -> None:
        if not authenticated:
            self.failures[mechanism] += 1
        elif mechanism != ANONYMOUS and mechanism != "none":
            self._throttle.succeeded(username)

    def _no_sasl_verdict(self, channel: Channel, allowed: bool) -> None:
        held, channel.held = channel.held or b"", None
        if allowed:
            self._io.start_amqp(channel, held)
            return
        # Answer with the SASL header so the peer learns what we require, then close.
        log.info("connection from %s without SASL refused (anonymous access is off)", channel.peer, extra=_NO_SASL_LOG)
        self._io.write(channel, SASL_HEADER)
        self._io.close_after_flush(channel)
