"""``python -m cli``: the same as the ``subgate`` console script."""

from cli.main import main

main()
