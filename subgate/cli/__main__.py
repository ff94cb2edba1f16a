"""``python -m cli``: the same as the ``subgate`` console script."""

from subgate.cli.main import main

main()
