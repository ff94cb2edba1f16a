"""``subgate publish`` and ``subgate subscribe`` (the client SDK by hand) against a real server."""

from __future__ import annotations

from tests.support.cli import run_subgate


def test_publish_then_subscribe_from_epoch_with_a_store_that_resumes(server, tmp_path):
    sent = run_subgate(
        "publish",
        "cli/prices",
        "--url",
        server.url,
        "--count",
        "5",
        "--policy",
        "inline",
        "--publisher-id",
        "cli-feed",
        cwd=tmp_path,
    )
    assert sent.returncode == 0, sent.stderr
    assert "published 5 message(s)" in sent.stdout and "seqs 1..5" in sent.stdout
    store = str(tmp_path / "sub.log")
    first = run_subgate(
        "subscribe",
        "cli/prices",
        "--url",
        server.url,
        "--bookmark",
        "0",
        "--store",
        store,
        "--count",
        "3",
        cwd=tmp_path,
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [f"cli-feed|{n}|\tmessage {n}" for n in (1, 2, 3)]
    rest = run_subgate("subscribe", "cli/prices", "--url", server.url, "--store", store, "--timeout", "2", cwd=tmp_path)
    assert rest.returncode == 0, rest.stderr
    assert rest.stdout.splitlines() == [f"cli-feed|{n}|\tmessage {n}" for n in (4, 5)]


def test_publish_non_inline_and_a_refused_bookmark(server, tmp_path):
    sent = run_subgate("publish", "cli/other", "--url", server.url, "--count", "50", cwd=tmp_path)
    assert sent.returncode == 0 and "published 50 message(s)" in sent.stdout, sent.stderr
    refused = run_subgate(
        "subscribe", "cli/other", "--url", server.url, "--bookmark", "nobody|1|", "--timeout", "5", cwd=tmp_path
    )
    assert refused.returncode == 1 and "amqp:invalid-field" in refused.stderr
