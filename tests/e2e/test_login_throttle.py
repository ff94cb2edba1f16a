"""Failed logins are counted per address and per user name, and their answers are held back on the reactor's
timers (engine.login_throttle): with ``--login-free-failures 3 --login-delay 0.5`` the 4th failure's answer waits
0.5 s, the 5th 1 s, the 6th 2 s. Other clients are not slowed: another address with its own user name, and a right
password from the very same address. The bounds below are the rule's own figures (a held answer can take longer on
a busy machine, never less), so nothing here depends on how fast the machine is.

A second loopback client is a socket bound to 127.0.0.2 (any 127/8 address reaches the server on 127.0.0.1).
"""

from __future__ import annotations

import time

from tests.e2e.test_tls import add_user
from tests.support.rawamqp import SASL_AUTH, SASL_OK, RawClient
from tests.support.server import SubgateProcess
from tests.support.survival import assert_clean_log

FLAGS = ("--login-free-failures", "3", "--login-delay", "0.5", "--login-delay-max", "4")
SLACK = 0.02  # the server's timer and the client's clock are different clocks


def timed_login(server: SubgateProcess, user: str, password: str, source: str = "127.0.0.1") -> tuple[int, float]:
    """(sasl-outcome code, seconds from sending the credentials to the answer) of one PLAIN login."""
    with RawClient(server.port, source=source, timeout=20) as raw:
        started = time.monotonic()
        code = raw.sasl("PLAIN", f"\x00{user}\x00{password}".encode())
        return code, time.monotonic() - started


def test_repeated_failures_get_slower_answers_and_other_clients_do_not(make_server, sqlite_url, tmp_path):
    add_user(tmp_path, sqlite_url, "alice", "s3cret")
    server = make_server(sqlite_url, *FLAGS)
    failures = [timed_login(server, "bob", f"guess-{i}") for i in range(6)]
    assert [code for code, _ in failures] == [SASL_AUTH] * 6
    elapsed = [seconds for _, seconds in failures]
    assert elapsed[3] >= 0.5 - SLACK and elapsed[4] >= 1.0 - SLACK and elapsed[5] >= 2.0 - SLACK, elapsed

    # the right password from the same address: answered at once (successes are never held back)
    code, alice_seconds = timed_login(server, "alice", "s3cret")
    assert code == SASL_OK and alice_seconds < elapsed[5], (alice_seconds, elapsed)
    # another address, another user name: its first failure is not held back
    code, _ = timed_login(server, "carol", "guess", source="127.0.0.2")
    assert code == SASL_AUTH
    assert "from 127.0.0.2, 1 for 'carol'; answer held back 0s" in server.log()
    # bob from another address: counted by user name, so held back (7 failures: 0.5 * 2**3 = 4 s, the ceiling)
    code, seconds = timed_login(server, "bob", "guess-7", source="127.0.0.2")
    assert code == SASL_AUTH and seconds >= 4.0 - SLACK, seconds

    log = server.log()
    assert "failures lately: 6 from 127.0.0.1, 6 for 'bob'; answer held back 2s" in log
    assert "guess-" not in log and "s3cret" not in log  # never a password
    assert_clean_log(server)


def test_a_client_that_leaves_while_its_answer_is_held_costs_nothing(make_server, sqlite_url, tmp_path):
    add_user(tmp_path, sqlite_url, "alice", "s3cret")
    server = make_server(sqlite_url, *FLAGS)
    for i in range(4):
        timed_login(server, "bob", f"guess-{i}")
    for i in range(5):  # each one's answer is held (1 s, 2 s, ...): hang up at once
        with RawClient(server.port) as raw:
            raw.send(b"AMQP\x03\x01\x00\x00")
            raw.read_exactly(8)
            raw.read_frame()
            raw.send(_plain_init("bob", f"leave-{i}"))
            time.sleep(0.2)  # the check is done and the answer held when we leave
    code, _ = timed_login(server, "alice", "s3cret")
    assert code == SASL_OK
    time.sleep(4.5)  # every held answer's timer has fired, on connections long gone
    assert server.alive()
    assert timed_login(server, "alice", "s3cret")[0] == SASL_OK
    assert_clean_log(server)


def _plain_init(user: str, password: str) -> bytes:
    from proton import symbol

    from tests.support.rawamqp import SASL_FRAME, SASL_INIT, frame, performative

    return frame(performative(SASL_INIT, [symbol("PLAIN"), f"\x00{user}\x00{password}".encode(), None]),
                 frame_type=SASL_FRAME)  # fmt: skip
