"""The operator's commands check the names they bind in store queries before they reach the store (issue 33,
defect 2, the audit; docs/security.md, "Values that reach the store").

Before: ``subgate users add $'a\\xff'`` (an argument that is not UTF-8: Python hands its bytes on as lone
surrogates) ended in a traceback from the driver ("surrogates not allowed"), as did a name longer than its
column on PostgreSQL; ``subgate publish --first-seq 9223372036854775808`` connected and sent seqs the server
must refuse. Now each is a usage error naming the parameter (exit code 2) and nothing is written. Real
``subgate`` processes on a real SQLite store.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import run_subgate

NOT_UTF8 = "a\udcff"  # the argument's bytes are b"a\xff": not UTF-8


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'subgate.db'}"
    assert run_subgate("db", "upgrade", "--store", url, cwd=tmp_path).returncode == 0
    return url


@pytest.mark.parametrize(
    "args, parameter, problem",
    [
        (("users", "add", NOT_UTF8, "--password", "long-enough-pw"), "NAME", "lone surrogate"),
        (("users", "add", "u" * 257, "--password", "long-enough-pw"), "NAME", "1 to 256 characters, not 257"),
        (("roles", "add", "r" * 300), "NAME", "1 to 256 characters"),
        (("roles", "assign", "admin", NOT_UTF8), "USER", "lone surrogate"),
        (("grants", "add", "READ_TOPIC", "--user", "alice", "--path", NOT_UTF8), "--path", "lone surrogate"),
        (("bookmarks", "show", NOT_UTF8, "--global"), "SUBSCRIPTION", "lone surrogate"),
        (("bookmarks", "show", "s" * 513, "--client-id", "c"), "SUBSCRIPTION", "1 to 512 characters"),
        (("subscriptions", "show", "s", "--client-id", NOT_UTF8), "--client-id", "lone surrogate"),
        (("queues", "show", "q" * 1025), "NAME", "1 to 1024 characters"),
        (("topics", "add", NOT_UTF8), "PATH", "lone surrogate"),
    ],
    ids=lambda value: value[0] + "-" + value[1] if isinstance(value, tuple) else None,
)
def test_a_name_the_store_cannot_hold_is_a_usage_error(store, tmp_path, args, parameter, problem):
    result = run_subgate(*args, "--store", store, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert f"Invalid value for '{parameter}'" in result.stderr and problem in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    for kind in ("users", "roles") if args[0] in ("users", "roles", "grants") else ():  # nothing was written
        listed = run_subgate(kind, "list", "--store", store, cwd=tmp_path)
        assert listed.returncode == 0 and listed.stdout.startswith("no "), listed.stdout


@pytest.mark.parametrize(
    "args, named",
    [
        (("--first-seq", "9223372036854775808"), "1<=x<=9223372036854775807"),
        (("--first-seq", "9223372036854775807", "--count", "2"), "the last seq would be 9223372036854775808"),
        (("--publisher-id", "p" * 513), "1 to 512 characters"),
    ],
    ids=["first-seq-2^63", "last-seq-2^63", "publisher-id-513"],
)
def test_publish_refuses_a_publisher_identity_out_of_range_before_connecting(tmp_path, args, named):
    result = run_subgate("publish", "t", *args, "--url", "amqp://127.0.0.1:1", "--retry-duration", "30", cwd=tmp_path)
    assert result.returncode == 2 and named in result.stderr, result.stderr
    assert "may have been lost" not in result.stderr
