"""Journal results back on the reactor thread.

Owns the ``journal_committed`` application event: the writer (thread or process) hands over a ``BatchResult`` of
tickets, ``claim`` (``storage.submissions``) turns them back into the tokens (which never left this thread,
docs/threading.md), and each token goes to its owner: a ``Publication`` to the publish pipeline
(``gateway.publish``), any other token (a transaction's discharge, a page read, the shutdown barrier) is a
callable, called with the error or None.
Publishers whose messages were committed get their credit back once per batch.
"""

from __future__ import annotations

from subgate.gateway.links import Inbound
from subgate.gateway.publish import Publication, Publishing
from subgate.storage.journal import BatchResult
from subgate.storage.submissions import Submissions


class Completions:
    """Dispatches one claimed journal result (see the module docstring)."""

    __slots__ = ("journal", "pipeline")

    def __init__(self, journal: Submissions, pipeline: Publishing) -> None:
        self.journal = journal
        self.pipeline = pipeline

    def on_result(self, handed_over: BatchResult) -> None:
        result = self.journal.claim(handed_over)
        pipeline = self.pipeline
        touched: set[Inbound] = set()
        for token in result.tokens:
            if type(token) is Publication:
                publisher = pipeline.on_committed(token)
                if publisher is not None:
                    touched.add(publisher)
            else:
                token(None)
        error = result.error
        for token in result.failed:
            if type(token) is Publication:
                publisher = pipeline.on_failed(token, error)
                if publisher is not None:
                    touched.add(publisher)
            else:
                token(error)
        for publisher in touched:
            publisher.top_up()
