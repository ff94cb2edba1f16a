"""Small applications on the client SDK, run as processes by the e2e tests (so that they can be SIGKILLed).

``publish URL TOPIC PUBLISHER_ID COUNT``: sends bodies 1..COUNT non-inline with that publisher id (seqs from 1),
flushes, closes, prints ``done``. Run again after a kill, it re-sends everything; the server drops what it has.

``subscribe URL TOPIC STORE OUT SEED [--epoch]``: a subscriber on a ``LoggedBookmarkStore`` that processes
messages out of order (batches of up to five, shuffled): processing a message appends ``body\\n`` to OUT with one
``write``, then discards it. At start it finishes the bookkeeping of the last message it processed (written to
OUT, maybe not yet discarded when the process died), as an exactly-once application must. Exits (printing
``done``) after three seconds without a message.

``hold URL TOPIC STORE``: a subscriber on a ``LoggedBookmarkStore`` with nothing recorded and no ``bookmark=``.
Prints ``subscribed`` once ``subscribe`` returned, then ``received BODY`` per message, and never discards: the
test kills it. ``drain URL TOPIC STORE``: the same subscription from the same store, receiving and discarding
(``received BODY``) until three seconds pass without a message; prints ``done``.
"""

from __future__ import annotations

import os
import random
import sys
import time

from subgate.client import EPOCH, Client, LoggedBookmarkStore

SUB_ID = "crashy"


def publish(url: str, topic: str, publisher_id: str, count: int) -> None:
    client = Client(url)
    publisher = client.publisher(topic, send_policy="non_inline", publisher_id=publisher_id, max_batch_count=50)
    for body in range(1, count + 1):
        publisher.send(body)
    publisher.flush(60)
    publisher.close()
    client.close()
    print("done", flush=True)


def _processed_so_far(out: str) -> list[str]:
    """The lines of OUT, after cutting a partial last line (a write the kill interrupted)."""
    try:
        data = open(out, "rb").read()
    except FileNotFoundError:
        return []
    end = data.rfind(b"\n") + 1
    if end < len(data):
        os.truncate(out, end)
    return data[:end].decode().splitlines()


def subscribe(url: str, topic: str, store_path: str, out: str, seed: int, epoch: bool) -> None:
    store = LoggedBookmarkStore(store_path)
    lines = _processed_so_far(out)
    if lines:
        store.discard(SUB_ID, lines[-1].split(" ", 1)[0])  # a no-op unless the kill came between write and discard
    rng = random.Random(seed)
    client = Client(url)
    sub = client.subscribe(topic, bookmark=EPOCH if epoch else None, bookmark_store=store, sub_id=SUB_ID)
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    held = []
    while True:
        message = sub.receive(timeout=3.0)
        if message is not None:
            held.append(message)
        if held and (len(held) >= 5 or message is None):
            rng.shuffle(held)
            for one in held:
                time.sleep(0.005)  # the work
                os.write(fd, f"{one.bookmark} {one.body}\n".encode())
                sub.discard(one)
            held.clear()
        elif message is None:
            break
    client.close()
    store.close()
    print("done", flush=True)


def hold_or_drain(url: str, topic: str, store_path: str, discard: bool) -> None:
    store = LoggedBookmarkStore(store_path)
    client = Client(url)
    sub = client.subscribe(topic, bookmark_store=store, sub_id=SUB_ID)
    print("subscribed", flush=True)
    deadline = time.monotonic() + 120  # a held subscriber waits to be killed; bounded all the same
    while time.monotonic() < deadline:
        message = sub.receive(timeout=3.0)
        if message is None:
            if discard:
                break
            continue
        print(f"received {message.body}", flush=True)
        if discard:
            sub.discard(message)
    client.close()
    store.close()
    print("done", flush=True)


def main(argv: list[str]) -> None:
    if argv[0] == "publish":
        publish(argv[1], argv[2], argv[3], int(argv[4]))
    elif argv[0] == "subscribe":
        subscribe(argv[1], argv[2], argv[3], argv[4], int(argv[5]), "--epoch" in argv)
    elif argv[0] in ("hold", "drain"):
        hold_or_drain(argv[1], argv[2], argv[3], argv[0] == "drain")
    else:
        raise SystemExit(f"unknown app {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
