"""docs/configuration.md is the rendering of serve's options (cli.config_doc), and a TOML array is a list setting."""

from __future__ import annotations

from pathlib import Path

import click
from click.testing import CliRunner

from subgate.cli.config_doc import render
from subgate.cli.main import serve
from subgate.cli.options import load_config

PAGE = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_the_checked_in_page_is_the_rendering_of_the_options():
    assert PAGE.read_text() == render(), "regenerate: python -m subgate.cli.config_doc > docs/configuration.md"


def test_every_serve_option_has_a_row_with_its_variable():
    page = render()
    for param in serve.params:
        if isinstance(param, click.Option) and param.expose_value:
            assert f"| `{param.name}` |" in page
            assert param.help, f"--{param.name} has no help text for the reference"
            if isinstance(param.envvar, str):
                assert f"`{param.envvar}`" in page


def test_a_toml_array_is_read_as_the_comma_separated_list(tmp_path):
    config = tmp_path / "subgate.toml"
    config.write_text('[subgate]\njournal_branches = ["audit=all", "scratch=off"]\n')

    @click.command()
    @click.option("--config", is_eager=True, expose_value=False, callback=load_config)
    @click.option("--journal-branches", default="")
    def probe(journal_branches: str) -> None:
        click.echo(journal_branches)

    result = CliRunner().invoke(probe, ["--config", str(config)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == "audit=all,scratch=off"
