"""A probe for tests/e2e/test_thread_confinement.py, loaded into a server process through PYTHONPATH.

When ``THREAD_PROBE_REPORT`` names a file, every proton wrapper released on a thread other than the main
(reactor) thread appends a line there: the thread, the wrapper type and where it happened. proton-c is not
thread-safe and ``Wrapper.__del__`` calls ``pn_decref``, so any such line is a race with the reactor. The probe
writes ``probe loaded`` first, so the test can tell an empty report from a probe that never ran.
"""

from __future__ import annotations

import os
import threading
import traceback

_report = os.environ.get("THREAD_PROBE_REPORT")

if _report:
    import proton._wrapper as _wrapper

    _release = _wrapper.Wrapper.__del__

    def _checked_release(self: object) -> None:
        thread = threading.current_thread()
        if thread is not threading.main_thread():
            stack = "".join(traceback.format_stack(limit=10))
            with open(_report, "a") as report:
                report.write(f"released on {thread.name}: {type(self).__name__}\n{stack}\n")
        _release(self)  # type: ignore[arg-type]

    _wrapper.Wrapper.__del__ = _checked_release  # type: ignore[method-assign]
    with open(_report, "a") as report:
        report.write("probe loaded\n")
