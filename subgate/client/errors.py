"""The client SDK's exceptions.

ClientError            anything the SDK refuses or cannot do (closed objects, a refused subscription)
└── PublishError       messages that may not have been persisted: their count and publisher seqs
"""

from __future__ import annotations

from collections.abc import Iterable


class ClientError(Exception):
    """The client SDK could not do what was asked."""


class PublishError(ClientError):
    """Messages that may have been lost: the server did not confirm them (retry duration ran out, or rejected).

    ``lost_seqs`` are the publisher seqs of those messages (``x-opt-publisher-seq``), ``count`` how many.
    """

    def __init__(self, reason: str, lost_seqs: Iterable[int] = ()) -> None:
        self.reason = reason
        self.lost_seqs = tuple(sorted(lost_seqs))
        super().__init__(self._text())

    @property
    def count(self) -> int:
        return len(self.lost_seqs)

    def _text(self) -> str:
        seqs = self.lost_seqs
        shown = ", ".join(str(s) for s in seqs[:20]) + (", ..." if len(seqs) > 20 else "")
        return f"{len(seqs)} message(s) may have been lost (seqs {shown}): {self.reason}"

    def merged(self, other: PublishError) -> PublishError:
        """One error for both: the seqs of each, the reasons joined."""
        reason = self.reason if self.reason == other.reason else f"{self.reason}; {other.reason}"
        return PublishError(reason, {*self.lost_seqs, *other.lost_seqs})
