"""docs/configuration.md, generated from ``subgate serve``'s own options (the one table of settings).

Owns the rendering of every ``serve`` option — its TOML key, flag, ``SUBGATE_*`` variable, default and meaning —
as the reference page. The options come from click's command object, which ``cli.serve_options`` builds from
``gateway.settings.Settings``, so the page cannot say anything the server does not do; a unit test fails when the
checked-in page and this rendering drift apart. Regenerate with:

    python -m subgate.cli.config_doc > docs/configuration.md
"""

from __future__ import annotations

import click

HEADER = """# Configuration reference

Generated from `subgate serve`'s options by `python -m subgate.cli.config_doc > docs/configuration.md`; a test
fails when this page and the code drift apart, so edit the help texts in `subgate/gateway/settings.py` (or the
option in `subgate/cli/main.py`), not this page.

Every setting can be given three ways, the first found wins: the command-line flag, the environment variable, the
key in the TOML file named by `--config` (or `SUBGATE_CONFIG`). In the file, keys are the flag's name with `_` or
`-` (`credit_window` or `credit-window`), at the top level or in a `[subgate]` table:

```toml
[subgate]
listen = "0.0.0.0:5672"
store = "postgresql+psycopg://subgate:secret@db/subgate"
retention = "3d"
journal_branches = ["audit=all", "scratch=off"]
```

An unknown key or a value the option refuses stops start-up with a one-line error that names the key (exit code
2). A list setting takes a TOML array or a comma-separated string.

| TOML key | flag | environment | default | meaning |
|---|---|---|---|---|
"""


def _default(param: click.Option) -> str:
    default = param.default
    if isinstance(param.type, click.types.BoolParamType) or param.is_flag:
        if default is None:
            return "(see meaning)"
        return "on" if default else "off"
    if default is None or default == "":
        return "(none)"
    if isinstance(default, tuple | list):
        return ", ".join(f"`{item}`" for item in default) or "(none)"
    return f"`{default}`"


def _flags(param: click.Option) -> str:
    names = [*param.opts, *param.secondary_opts]
    return " / ".join(f"`{name}`" for name in names)


def _meaning(param: click.Option) -> str:
    text = " ".join((param.help or "").split())
    if isinstance(param.type, click.Choice):
        text += " One of: " + ", ".join(f"`{choice}`" for choice in param.type.choices) + "."
    elif isinstance(param.type, click.IntRange | click.FloatRange) and param.type.min is not None:
        text += f" At least {param.type.min}."
    return text.replace("|", "\\|")


def render() -> str:
    """The whole page."""
    from subgate.cli.main import serve

    rows = []
    for param in serve.params:
        if not isinstance(param, click.Option) or not param.expose_value or param.name is None:
            continue
        env = param.envvar if isinstance(param.envvar, str) else ""
        rows.append(
            f"| `{param.name}` | {_flags(param)} | `{env}` | {_default(param)} | {_meaning(param)} |"
            if env
            else f"| `{param.name}` | {_flags(param)} | | {_default(param)} | {_meaning(param)} |"
        )
    return HEADER + "\n".join(rows) + "\n"


if __name__ == "__main__":
    click.echo(render(), nl=False)
