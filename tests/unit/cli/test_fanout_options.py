"""``subgate serve --fanout URL=SELECTOR`` and the TOML ``[[fanout]]`` tables become ``Settings.fanout``; a bad link
stops start-up with a configuration error (exit code 2) naming what is wrong."""

from __future__ import annotations

import click
import pytest

from subgate.cli.main import serve
from subgate.engine.fanout import FanoutConfig


def _params(*args: str) -> dict:
    return serve.make_context("serve", list(args)).params


def test_repeated_flags_give_one_link_each():
    links = _params("--fanout", "amqp://a:1=A//", "--fanout", "amqp://u:p@b:2=?B/.*")["fanout"]
    assert [(link.url, link.selector, link.user) for link in links] == [
        ("amqp://a:1", "A//", None),
        ("amqp://b:2", "?B/.*", "u"),
    ]


def test_toml_tables_at_the_top_level_next_to_subgate(tmp_path):
    config = tmp_path / "s.toml"
    config.write_text(
        '[subgate]\nname = "edge"\n\n[[fanout]]\nurl = "amqp://p:5672"\nselector = "A//"\nreconnect_timeout = 5\n'
        '\n[[fanout]]\nurl = "amqp://q:5672"\nselector = "B//"\nuser = "fan"\npassword = "pw"\nmax_in_flight = 3\n'
    )
    links = _params("--config", str(config))["fanout"]
    assert links == (
        FanoutConfig("amqp://p:5672", "A//", reconnect_timeout=5.0),
        FanoutConfig("amqp://q:5672", "B//", user="fan", password="pw", max_in_flight=3),
    )


@pytest.mark.parametrize(
    "body",
    [
        '[[fanout]]\nurl = "amqp://p:1"\nselector = "A//"\nspeed = 3\n',
        '[[fanout]]\nurl = "amqp://p:1"\n',
        '[[fanout]]\nurl = "amqp://p:1"\nselector = "A//"\nmax_in_flight = 0\n',
    ],
    ids=["unknown-key", "no-selector", "zero-in-flight"],
)
def test_a_bad_table_is_a_configuration_error(tmp_path, body):
    config = tmp_path / "s.toml"
    config.write_text(body)
    with pytest.raises(click.ClickException) as error:
        _params("--config", str(config))
    assert error.value.exit_code == 2 and "fanout" in error.value.format_message()


def test_a_bad_flag_is_a_usage_error():
    with pytest.raises(click.BadParameter, match="URL=SELECTOR|amqp://"):
        _params("--fanout", "primary:5672=A//")
