"""Micro-benchmark of engine.codec on the broker's hot path.

Times ``scan``, ``with_delivery_count`` and ``with_annotations`` on a typical 1 KiB JMS-like message
(durable header, x-opt-jms-msg-type and x-opt-jms-dest annotations, properties with message-id, to and
creation-time, a data body), built with proton so the bytes are what a JMS client sends. Numbers are
printed, never asserted: run ``.venv/bin/python bench/codec_micro.py [--number N]``.
"""

from __future__ import annotations

import argparse
import sys
import timeit
from collections.abc import Callable
from pathlib import Path

from proton import Message, byte, symbol

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from subgate.engine import codec  # noqa: E402


def jms_message(body_size: int = 900) -> bytes:
    """A message shaped like one from a JMS producer, about 1 KiB with the default body."""
    msg = Message(durable=True, address="topic://orders.eu", id="ID:host-1234-1:1:1:1:42")
    msg.creation_time = 1_700_000_000.123
    msg.annotations = {symbol("x-opt-jms-msg-type"): byte(3), symbol("x-opt-jms-dest"): byte(1)}
    msg.body, msg.inferred = b"x" * body_size, True
    return bytes(msg.encode())


def per_call_us(func: Callable[[], object], number: int, repeat: int = 5) -> float:
    """Best of ``repeat`` runs, in microseconds per call."""
    return min(timeit.repeat(func, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=100_000, help="calls per timing run")
    args = parser.parse_args()
    raw = jms_message()
    env = codec.scan(raw)
    cases: dict[str, Callable[[], object]] = {
        "scan": lambda: codec.scan(raw),
        "with_delivery_count": lambda: codec.with_delivery_count(raw, env, 1),
        "with_annotations": lambda: codec.with_annotations(raw, env, {"x-opt-bookmark": "pub-1|42|"}),
        "scan+with_annotations": lambda: codec.with_annotations(raw, codec.scan(raw), {"x-opt-bookmark": "b1"}),
    }
    print(f"message: {len(raw)} bytes, python {sys.version.split()[0]}")
    for name, func in cases.items():
        print(f"{name:24} {per_call_us(func, args.number):7.2f} us/call")


if __name__ == "__main__":
    main()
