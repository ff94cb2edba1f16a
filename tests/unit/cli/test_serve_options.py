"""serve's options come from the one Settings table: every operator setting has its flag, variable and default."""

from __future__ import annotations

from dataclasses import fields

import click
import pytest
from click.testing import CliRunner

from subgate.cli.main import serve
from subgate.cli.serve_options import settings_values
from subgate.gateway.settings import Settings

OPERATOR_SETTINGS = [f for f in fields(Settings) if f.metadata.get("help")]


def option_of(name: str) -> click.Option:
    for param in serve.params:
        if param.name == name and isinstance(param, click.Option):
            return param
    raise AssertionError(f"serve has no option {name}")


@pytest.mark.parametrize("item", OPERATOR_SETTINGS, ids=lambda f: f.name)
def test_every_operator_setting_is_an_option_with_its_default_and_variable(item):
    param = (item.metadata["flag"] or "--" + item.name.replace("_", "-")).lstrip("-").replace("-", "_")
    option = option_of(param)
    assert option.envvar == "SUBGATE_" + param.upper()
    default = ",".join(item.default) if isinstance(item.default, tuple) else item.default
    assert option.default == default
    assert option.help == item.metadata["help"]


def test_parsed_values_become_settings_with_comma_lists_as_tuples():
    params = {option.name: option.default for option in serve.params if isinstance(option, click.Option)}
    params["anycast_prefixes"] = "queue://, anycast://"
    params["multicast_prefixes"] = ""
    values = settings_values(params)
    settings = Settings(**values)
    assert settings.anycast_prefixes == ("queue://", "anycast://")
    assert settings.multicast_prefixes == ()
    assert settings.policy_refresh_interval == Settings().policy_refresh_interval


def test_help_lists_the_bounds_and_choices():
    result = CliRunner().invoke(serve, ["--help"])
    assert result.exit_code == 0
    assert "1<=x<=1000000" in result.output and "[block|fail]" in result.output
    assert "--no-allow-anonymous" in result.output
