"""The ``subgate`` command line: a thin click layer over gateway and storage."""
