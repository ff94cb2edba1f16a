"""gateway.metrics_feed without a server: the snapshot's node figures are labelled (top N and ``other``), and with
many nodes the pass over them runs only every few ticks."""

from __future__ import annotations

from subgate.engine.nodes import Queue, Topic
from subgate.gateway import metrics_feed
from subgate.gateway.metrics_feed import MetricsFeed
from subgate.metrics.snapshot import OTHER


def test_the_feed_labels_the_nodes_and_visits_many_only_every_few_ticks():
    class Journal:
        def __init__(self) -> None:
            self.reads: list[object] = []

        def submit_read(self, read, token) -> None:
            self.reads.append(read)

    nodes: list[Queue | Topic] = [Queue(f"q{i}") for i in range(5)]
    nodes[0].messages_in = 3
    journal = Journal()
    feed = MetricsFeed(
        connections=lambda: 1,
        links=lambda: [],
        nodes=lambda: nodes,
        duplicates=lambda: 0,
        lost=lambda: 0,
        missing_topic_outcomes={},
        auth_failures={},
        journal=journal,  # type: ignore[arg-type]
        store_figures=lambda: None,
        schedule=lambda delay, callback: None,
        stopping=lambda: False,
        top_n=2,
    )
    first = feed.take()
    assert first.nodes == (("q0", 3, 0), ("q1", 0, 0), (OTHER, 0, 0))
    assert first.queue_depths == (("q0", 0), ("q1", 0), (OTHER, 0))
    old = metrics_feed.NODES_PER_TICK
    metrics_feed.NODES_PER_TICK = 2  # 5 nodes: a pass every 3 ticks
    try:
        feed._nodes_due = 0
        feed.take()
        nodes[1].messages_in = 7
        assert feed.take().nodes[0] == ("q0", 3, 0)  # not visited yet
        assert feed.take().nodes[0] == ("q0", 3, 0)
        assert feed.take().nodes[0] == ("q1", 7, 0)  # the third tick after the pass
    finally:
        metrics_feed.NODES_PER_TICK = old
