"""``subgate publish`` and ``subgate subscribe``: the client SDK by hand (docs/client.md).

Thin: each command parses its options and drives ``subgate.client``; SDK errors become ``ClickException``
(exit code 1). Without ``--url`` they go to the server that owns the store (its lease: ``cli.owner``; the store
of ``SUBGATE_STORE``, ``publish --store``, else subgate.db in the working directory), else to
``amqp://127.0.0.1:5672``. A connection that every URL refuses is an error at once, naming each HOST:PORT.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import click

from subgate.cli.options import NAME_512
from subgate.client import Client, ClientError, LoggedBookmarkStore, PublishError
from subgate.mapping.store_values import MAX_SEQ

DEFAULT_URL = "amqp://127.0.0.1:5672"

URL_OPTION = click.option(
    "--url",
    "urls",
    multiple=True,
    default=(),
    show_default="the server that owns the store, else amqp://127.0.0.1:5672",
    help="Server URL; repeat it for servers to fail over between.",
)
USER_OPTION = click.option("--user", default=None, help="SASL PLAIN user name.")
PASSWORD_OPTION = click.option("--password", default=None, help="SASL PLAIN password.")


@click.command()
@click.argument("address")
@URL_OPTION
@USER_OPTION
@PASSWORD_OPTION
@click.option("--count", default=1, show_default=True, type=click.IntRange(min=0), help="Messages to send.")
@click.option("--policy", type=click.Choice(["inline", "non_inline"]), default="non_inline", show_default=True)
@click.option("--body", default="message {n}", show_default=True, help="Body text; {n} is the message's number.")
@click.option("--publisher-id", default=None, type=NAME_512, help="Publisher id (default: a new random one).")
@click.option("--first-seq", default=1, show_default=True, type=click.IntRange(min=1, max=MAX_SEQ))
@click.option("--retry-duration", default=10.0, show_default=True, type=float, help="Seconds to keep retrying.")
@click.option(
    "--store",
    envvar="SUBGATE_STORE",
    default=None,
    show_envvar=True,
    help="Without --url: send to the server that owns this store (default: subgate.db in the working directory).",
)
def publish(
    address: str,
    urls: tuple[str, ...],
    store: str | None,
    user: str | None,
    password: str | None,
    count: int,
    policy: str,
    body: str,
    publisher_id: str | None,
    first_seq: int,
    retry_duration: float,
) -> None:
    """Publish COUNT persistent messages to the topic ADDRESS and wait until the server has confirmed them."""
    if count and first_seq + count - 1 > MAX_SEQ:  # x-opt-publisher-seq: the server refuses seqs past 2^63 - 1
        raise click.BadParameter(f"the last seq would be {first_seq + count - 1}, above {MAX_SEQ}", param_hint="count")
    urls = urls or (owner_url(store),)
    client = Client(list(urls), user=user, password=password)
    try:
        first_connection(client, urls, retry_duration)
        pub = client.publisher(
            address,
            send_policy=policy,
            retry_duration=retry_duration,
            publisher_id=publisher_id,
            first_seq=first_seq,
        )
        started = time.monotonic()
        for n in range(1, count + 1):
            pub.send(body.replace("{n}", str(n)))
        pub.flush(retry_duration + 5)
        took = time.monotonic() - started
        pub.close(linger=0)
        click.echo(
            f"published {count} message(s) to {address!r} in {took:.3f}s "
            f"(publisher id {pub.publisher_id}, seqs {first_seq}..{first_seq + count - 1})"
        )
    except (PublishError, ClientError, TimeoutError) as error:
        raise click.ClickException(str(error)) from error
    finally:
        client.close()


@click.command()
@click.argument("address")
@URL_OPTION
@USER_OPTION
@PASSWORD_OPTION
@click.option("--bookmark", default=None, help="Start: 0 (EPOCH), '0|1|' (NOW), YYYYmmddTHHMMSS, or a bookmark.")
@click.option("--store", "store_path", default=None, help="A LoggedBookmarkStore file to record and resume from.")
@click.option("--name", default=None, help="A JMS durable subscription of --client-id.")
@click.option("--client-id", default=None)
@click.option("--count", default=None, type=click.IntRange(min=1), help="Stop after this many messages.")
@click.option("--timeout", default=None, type=float, help="Stop after this many seconds without a message.")
def subscribe(
    address: str,
    urls: tuple[str, ...],
    user: str | None,
    password: str | None,
    bookmark: str | None,
    store_path: str | None,
    name: str | None,
    client_id: str | None,
    count: int | None,
    timeout: float | None,
) -> None:
    """Print the messages of ADDRESS, one line each: bookmark, a tab, the body. Each is discarded once printed."""
    urls = urls or (owner_url(None),)
    store = LoggedBookmarkStore(store_path) if store_path else None
    client = Client(list(urls), user=user, password=password, client_id=client_id)
    try:
        first_connection(client, urls, timeout if timeout is not None else 10.0)
        sub = client.subscribe(address, bookmark=bookmark, bookmark_store=store, name=name)
        received = 0
        while count is None or received < count:
            message = sub.receive(timeout=timeout)
            if message is None:
                break
            click.echo(f"{message.bookmark}\t{message.body}")
            sub.discard(message)
            received += 1
    except ClientError as error:
        raise click.ClickException(str(error)) from error
    finally:
        client.close()
        if store is not None:
            store.close()


def owner_url(store: str | None) -> str:
    """The URL of the server that owns the store (``--store``, ``SUBGATE_STORE``, else subgate.db here), else
    ``DEFAULT_URL``; a store that cannot be read is said on stderr and the default used."""
    from subgate.cli.options import resolve_store
    from subgate.cli.owner import owner_endpoint, store_owner
    from subgate.storage.errors import StoreError, safe_url, store_errors

    url = resolve_store(store)
    try:
        with store_errors(url):
            owner = store_owner(url)
    except StoreError as exc:
        click.echo(f"cannot read the store {safe_url(url)} for its server ({exc}); trying {DEFAULT_URL}", err=True)
        return DEFAULT_URL
    if owner is None or not owner.listen_port:
        return DEFAULT_URL
    host, port = owner_endpoint(owner)
    return f"amqp://[{host}]:{port}" if ":" in host else f"amqp://{host}:{port}"


def first_connection(client: Client, urls: tuple[str, ...], timeout: float) -> None:
    """Wait up to ``timeout`` s for the first connection; an error at once when every URL has failed to connect
    (``connection refused at HOST:PORT``). Past the timeout the command goes on and the SDK's own error ends it."""
    deadline = time.monotonic() + max(timeout, 0.1)
    while not client.wait_connected(min(0.05, max(deadline - time.monotonic(), 0.0))):
        failures = client.connect_failures()
        if failures and all(url in failures for url in urls):
            raise click.ClickException("; ".join(_failure(url, failures[url]) for url in dict.fromkeys(urls)))
        if time.monotonic() >= deadline:
            return


def _failure(url: str, reason: str) -> str:
    parts = urlsplit(url if "://" in url else f"amqp://{url}")
    where = f"{parts.hostname}:{parts.port or 5672}"
    if "refused" in reason.lower():
        return f"connection refused at {where} (no server listens there)"
    return f"cannot connect to {where}: {reason}"
