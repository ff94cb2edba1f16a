"""The pure parts of the metrics endpoint: histogram counts, top-N labelling, a snapshot as metric families
(parsed back with prometheus_client's own parser), the health verdict, the routes; and that ``subgate.metrics``
loads no proton."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from subgate.engine.records import StoreFigures, SubscriptionBacklog
from subgate.metrics.buckets import Buckets
from subgate.metrics.collector import SubgateCollector, WriterFigures
from subgate.metrics.http import MetricsEndpoint, verdict
from subgate.metrics.snapshot import OTHER, Snapshot, fold_temporary, top_nodes, top_queues
from subgate.storage.journal import CommitHealth


def snapshot(**fields) -> Snapshot:
    base = {
        "taken_at": 100.0,
        "taken_wall": 1_000_000.0,
        "connections": 2,
        "links": (("consumer", 1), ("publisher", 3)),
        "nodes": (),
        "queue_depths": (),
        "duplicates_dropped": 4,
        "lost_after_confirm": 1,
        "missing_topic_outcomes": (("cancel", 1), ("proceed", 2)),
        "auth_failures": (("PLAIN", 3),),
    }
    return Snapshot(**{**base, **fields})


def samples(snap: Snapshot | None, top_n: int = 50, writer: WriterFigures | None = None) -> dict:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SubgateCollector(lambda: snap, lambda: writer, top_n))
    text = generate_latest(registry).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_buckets_count_at_or_below_each_bound_cumulatively():
    buckets = Buckets((1, 5, 10))
    for value in (0.5, 1, 3, 10, 11):
        buckets.observe(value)
    view = buckets.view()
    assert view.cumulative == (2, 3, 4, 5)  # <=1: 0.5 and 1; <=5: +3; <=10: +10; +Inf: +11
    assert (view.count, view.total) == (5, 25.5)


def test_top_nodes_keeps_the_busiest_and_sums_the_rest_under_other():
    nodes = [("a", 1, 0), ("b", 5, 5), ("c", 3, 0), ("d", 0, 2)]
    assert top_nodes(nodes, 2) == [("b", 5, 5), ("c", 3, 0), (OTHER, 1, 2)]
    assert top_nodes(nodes, 10) == [("b", 5, 5), ("c", 3, 0), ("d", 0, 2), ("a", 1, 0)]
    assert top_nodes([], 3) == []


def test_a_node_named_other_is_counted_in_other_so_each_label_is_one_series():
    nodes = [("other", 9, 0), ("x", 1, 0)]
    assert top_nodes(nodes, 1) == [(OTHER, 10, 0)]
    assert top_nodes(nodes, 5) == [("x", 1, 0), (OTHER, 9, 0)]


def test_ties_are_broken_by_name_so_the_choice_is_stable():
    assert top_queues([("q2", 1), ("q1", 1), ("q3", 1)], 2) == [("q1", 1), ("q2", 1), (OTHER, 1)]


def test_a_snapshot_as_families_parses_with_prometheus_clients_parser():
    nodes = tuple(top_nodes([("q1", 7, 3), ("t", 2, 4), ("q2", 1, 0)], 2))  # as the feed labels them
    store = StoreFigures(
        12,
        (
            SubscriptionBacklog("app1", "s1", "t", 5, 999_000_000),  # 1000 s before the read
            SubscriptionBacklog(None, "g", "t", 0, None),
        ),
    )
    depths = tuple(top_queues([("q1", 4), ("q2", 1)], 2))
    snap = snapshot(nodes=nodes, queue_depths=depths, store=store, store_read_wall=1_000_000.0)
    buckets = Buckets((0.01, 0.1))
    buckets.observe(0.005)
    writer = WriterFigures(buckets.view(), Buckets((1, 10)).view())
    found = samples(snap, top_n=2, writer=writer)
    assert found[("subgate_connections", ())] == 2
    assert found[("subgate_links", (("role", "publisher"),))] == 3
    assert found[("subgate_messages_in_total", (("node", "q1"),))] == 7
    assert found[("subgate_messages_out_total", (("node", "t"),))] == 4
    assert found[("subgate_messages_in_total", (("node", OTHER),))] == 1
    assert found[("subgate_queue_depth", (("queue", "q1"),))] == 4
    assert found[("subgate_duplicates_dropped_total", ())] == 5
    assert found[("subgate_missing_topic_notifications_total", (("outcome", "proceed"),))] == 2
    assert found[("subgate_auth_failures_total", (("mechanism", "PLAIN"),))] == 3
    assert found[("subgate_journal_rows", ())] == 12
    s1 = (("client_id", "app1"), ("name", "s1"), ("topic", "t"))
    assert found[("subgate_subscription_backlog", s1)] == 5
    assert found[("subgate_subscription_oldest_unaccepted_seconds", s1)] == 1000
    g = (("client_id", ""), ("name", "g"), ("topic", "t"))
    assert (
        found[("subgate_subscription_backlog", g)],
        found[("subgate_subscription_oldest_unaccepted_seconds", g)],
    ) == (
        0,
        0,
    )
    assert found[("subgate_journal_commit_seconds_bucket", (("le", "0.01"),))] == 1
    assert found[("subgate_journal_commit_seconds_count", ())] == 1
    assert found[("subgate_journal_batch_size_count", ())] == 0


def test_subscriptions_beyond_top_n_are_summed_with_the_oldest_age_of_the_rest():
    subs = tuple(SubscriptionBacklog("c", f"s{i}", "t", i, 1_000_000_000 - i * 1000) for i in range(1, 5))
    snap = snapshot(store=StoreFigures(0, subs), store_read_wall=1_000_000.0)
    found = samples(snap, top_n=1)
    other = (("client_id", ""), ("name", OTHER), ("topic", ""))
    assert found[("subgate_subscription_backlog", other)] == 1 + 2 + 3
    assert found[("subgate_subscription_oldest_unaccepted_seconds", other)] == 3  # s3's row: 3 s before the read
    assert found[("subgate_subscription_backlog", (("client_id", "c"), ("name", "s4"), ("topic", "t")))] == 4


def test_no_store_figures_before_the_first_read_and_nothing_before_the_first_snapshot():
    assert ("subgate_journal_rows", ()) not in samples(snapshot())
    assert samples(None) == {}


@pytest.mark.parametrize(
    ("snap", "health", "reason"),
    [
        (None, None, "the reactor has not published its figures yet"),
        (snapshot(taken_at=80.0), CommitHealth(True, 99.0, None, 99.0), "the reactor has not answered for 20.0 s"),
        (snapshot(), None, "the store has not taken a write yet"),
        (snapshot(), CommitHealth(False, 99.0, "disk full", 90.0), "the store refused a write: disk full"),
        (snapshot(), CommitHealth(True, 85.0, None, 85.0), "no store write has succeeded for 15.0 s"),
        (snapshot(), CommitHealth(True, 99.5, None, 99.5), None),
    ],
)
def test_health_verdict(snap, health, reason):
    assert verdict(snap, health, now=100.0) == reason


def test_routes_answer_without_a_request_loop():
    endpoint = MetricsEndpoint("127.0.0.1", 0, 5)
    try:
        assert endpoint.answer("/readyz")[0] == 503
        endpoint.ready = True
        assert endpoint.answer("/readyz?verbose=1")[:1] == (200,)
        assert endpoint.answer("/healthz") == (
            503,
            {"Content-Type": "text/plain; charset=utf-8"},
            b"the reactor has not published its figures yet\n",
        )
        status, headers, body = endpoint.answer("/metrics")
        assert (status, body) == (200, b"") and headers["Content-Type"].startswith("text/plain; version=")
        assert endpoint.answer("/nowhere")[0] == 404
        status, headers, page = endpoint.answer("/")
        assert (status, headers["Content-Type"]) == (200, "text/html; charset=utf-8") and b"console.js" in page
    finally:
        endpoint.close()


def test_the_metrics_package_loads_no_proton():
    code = (
        "import importlib, json, pkgutil, sys, subgate.metrics as m\n"
        "[importlib.import_module(i.name) for i in pkgutil.walk_packages(m.__path__, 'subgate.metrics.')]\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert "subgate.metrics.http" in loaded
    assert [name for name in loaded if name.split(".")[0] in {"proton", "cproton", "_cproton"}] == []
    assert [name for name in loaded if name.startswith("subgate.gateway")] == []


def test_temporary_nodes_are_summed_under_one_label_never_named():
    rows = [("orders", 5, 1), ("$temp.queue.aa", 2, 2), ("$temp.topic.bb", 1, 0), ("$tempest", 1, 1)]
    assert fold_temporary(rows) == [("orders", 5, 1), ("$tempest", 1, 1), ("$temp", 3, 2)]
    assert fold_temporary([("orders", 1)]) == [("orders", 1)]
