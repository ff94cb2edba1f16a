"""proton objects stay on the reactor thread: a regression test for the race behind a rare SIGSEGV under load.

proton-c is not thread-safe, and a proton wrapper released on another thread calls ``pn_decref`` there while the
reactor may be inside proton-c (cffi drops the GIL on every call). The server hands work to two kinds of threads
(the journal writer, the auth workers); before the ticket hand-off (storage/journal.py, gateway/io.py) the writer
released about one Delivery wrapper in twenty under load. This runs a workload through every hand-off (durable
messages, page reads, SASL PLAIN checks, connections coming and going, ``/metrics`` scraped with its store reads
and write probes) against a server with the probe of ``tests/support/thread_probe`` loaded, and expects no release
off the main thread.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

from tests.e2e.test_auth import ALICE, add_alice
from tests.e2e.test_metrics import http_base
from tests.support.amqp import connect, receive_bodies, receiver, send_all, sender

PROBE = Path(__file__).resolve().parent.parent / "support" / "thread_probe"
MESSAGES = 300


def test_no_proton_object_is_released_off_the_reactor_thread(make_server, store_url, tmp_path):
    add_alice(tmp_path, store_url)
    report = tmp_path / "thread-probe.txt"
    env = {"PYTHONPATH": str(PROBE), "THREAD_PROBE_REPORT": str(report)}
    server = make_server(store_url, "--page-messages", "40", "--http", "127.0.0.1:0", env=env)
    metrics = http_base(server) + "/metrics"
    bodies = [f"m{i}" for i in range(MESSAGES)]
    conn = connect(server.url, **ALICE)
    # One message in flight at a time: each commit is a batch of one, the pattern that released wrappers on
    # the writer thread (its last batch outlived the reactor's use of the tokens).
    send_all(sender(conn, "confined.q", "queue"), bodies, durable=True)
    assert receive_bodies(receiver(conn, "confined.q", "queue", credit=25), MESSAGES) == bodies  # page reads
    conn.close()
    for _ in range(10):  # SASL checks on the auth workers, and connections ending; scrapes on the HTTP threads
        connect(server.url, **ALICE).close()
        with urllib.request.urlopen(metrics, timeout=10) as response:
            assert b"subgate_messages_in_total" in response.read()
    assert server.stop() == 0
    lines = report.read_text().splitlines()
    # The journal writer process loads the probe too (same environment): one "probe loaded" line per process.
    loaded = [line for line in lines if line == "probe loaded"]
    assert lines[0] == "probe loaded" and len(loaded) == 2
    releases = [line for line in lines if line != "probe loaded"]
    assert releases == [], "\n".join(releases[:40])
