"""``ServerIO.is_waiting``: true exactly while the reactor waits in epoll (the journal writer's group commit
stops gathering then: nothing more will come until input arrives)."""

from __future__ import annotations

from proton.reactor import Container

from subgate.gateway.io import ServerIO


def test_the_reactor_counts_as_waiting_only_inside_its_wait_for_input():
    io = ServerIO(Container(), authenticate=lambda *_: None, configure_transport=lambda _: None)
    seen: list[bool] = []

    class Epoll:
        """Stands in for the epoll object (whose methods cannot be replaced): notes what the reactor says."""

        def poll(self, timeout: float) -> list:
            seen.append(io.is_waiting())
            return []

    io._epoll = Epoll()  # type: ignore[assignment]
    assert not io.is_waiting()
    io.wait_for_io()
    assert seen == [True]
    assert not io.is_waiting()
