"""``subgate publish`` and ``subgate subscribe``: the client SDK by hand (docs/client.md).

Thin: each command parses its options and drives ``subgate.client``; SDK errors become ``ClickException``
(exit code 1).
"""

from __future__ import annotations

import time

import click

from subgate.cli.options import NAME_512
from subgate.client import Client, ClientError, LoggedBookmarkStore, PublishError
from subgate.mapping.store_values import MAX_SEQ

URL_OPTION = click.option(
    "--url",
    "urls",
    multiple=True,
    default=["amqp://127.0.0.1:5672"],
    show_default=True,
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
def publish(
    address: str,
    urls: tuple[str, ...],
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
    client = Client(list(urls), user=user, password=password)
    try:
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
    store = LoggedBookmarkStore(store_path) if store_path else None
    client = Client(list(urls), user=user, password=password, client_id=client_id)
    try:
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
