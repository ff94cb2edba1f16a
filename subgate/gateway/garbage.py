"""Where Python's cyclic garbage collector runs in a server: on the reactor thread, and nowhere else.

Owns the collector's schedule while the reactor runs. CPython starts a collection in whichever thread happens to
allocate past the threshold, and the journal writer allocates far more than any other thread. A collection frees
unreachable cycles, and a cycle that holds a proton wrapper releases it there: ``Wrapper.__del__`` calls
``pn_decref``, proton-c is not thread-safe, and the reactor thread runs inside proton-c without the GIL. So while
a server runs, automatic collection is off and the event loop asks ``collect_if_due`` after each burst of events,
which collects the same generations CPython would have, by the same thresholds, on the reactor thread.

One difference: a full (generation 2) collection runs at most every ``full_interval`` seconds. CPython skips most
full collections on a large heap (it waits until the objects that survived since the last one are a quarter of
the long-lived ones), which Python code cannot see; a time bound keeps a server holding 10,000 subscriptions
from walking its whole heap over and over under load.
"""

from __future__ import annotations

import gc
import time


class ReactorGarbageCollector:
    """``take_over()`` when the loop starts, ``collect_if_due()`` between bursts, ``release()`` when it ends."""

    def __init__(self, full_interval: float = 10.0) -> None:
        self.full_interval = full_interval
        self._last_full = time.monotonic()
        self._was_enabled = False
        self.collections = [0, 0, 0]  # per generation, for the curious (tests, debugging)

    def take_over(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()

    def release(self) -> None:
        if self._was_enabled:
            gc.enable()

    def collect_if_due(self) -> None:
        """Collect the oldest generation whose count has passed its threshold, as CPython's allocator would."""
        counts = gc.get_count()
        thresholds = gc.get_threshold()
        if counts[0] < thresholds[0]:
            return
        generation = 0
        if counts[1] >= thresholds[1]:
            generation = 1
            if counts[2] >= thresholds[2] and time.monotonic() - self._last_full >= self.full_interval:
                generation = 2
                self._last_full = time.monotonic()
        gc.collect(generation)
        self.collections[generation] += 1
