"""In-process coverage-guided fuzzing (atheris, i.e. libFuzzer) of the broker's pure parsers (issue 19 item 2), and
of the checks on client values that become store query parameters, into a real SQLite store (issue 33: ``store``).

Each target module (``codec``, ``sasl``, ``jms``, ``topics``, ``store``, ``frames``) has ``INSTRUMENT`` (the
subgate modules to instrument), ``MAX_LEN``, ``DICTIONARY``, ``seeds()`` and ``test_one(data)``, which feeds one
input to the module and asserts its documented contract: only the module's own declared error types escape, and
the invariants named in the target's docstring hold. Anything else escaping ``test_one`` is a finding; so is an input
that runs longer than the per-input timeout (libFuzzer's ``-timeout``).

``python -m tests.fuzz.atheris_targets TARGET --runs N`` runs one target (``__main__``); ``test_atheris.py`` runs a
bounded run of each in ``make test``; ``test_regressions.py`` replays every input that was ever a finding.
"""

from __future__ import annotations

TARGETS = ("codec", "sasl", "jms", "topics", "store", "frames")
