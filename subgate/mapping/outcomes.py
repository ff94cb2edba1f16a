"""What a consumer's outcome does to a message (mapping doc §5.7), as a table.

| outcome                                   | message goes          | delivery-count | this consumer again |
|-------------------------------------------|-----------------------|----------------|---------------------|
| accepted                                  | removed               | –              | –                   |
| rejected                                  | removed (dead-letter) | –              | –                   |
| released, modified{}                      | back, same place      | unchanged      | yes                 |
| modified{delivery-failed}                 | back, same place      | +1             | yes                 |
| modified{undeliverable-here}              | back, same place      | unchanged      | no                  |
| modified{delivery-failed, undeliverable}  | back, same place      | +1             | no                  |
| none, after an orderly detach             | back (released)       | unchanged      | yes                 |
| none, after an abrupt loss                | back (default outcome modified{delivery-failed}) | +1 | yes        |
"""

from __future__ import annotations

from dataclasses import dataclass

ACCEPTED = "accepted"
REJECTED = "rejected"
RELEASED = "released"
MODIFIED = "modified"


@dataclass(frozen=True, slots=True)
class Settlement:
    """What to do with a delivered message once its consumer has settled it."""

    remove: bool
    dead_letter: bool = False
    failed: bool = False  # counts as a failed delivery: delivery-count + 1
    exclude_consumer: bool = False


_REMOVE = Settlement(remove=True)
_DEAD = Settlement(remove=True, dead_letter=True)
_RETURN = Settlement(remove=False)
_RETURN_FAILED = Settlement(remove=False, failed=True)

OUTCOMES: dict[str, Settlement] = {ACCEPTED: _REMOVE, REJECTED: _DEAD, RELEASED: _RETURN}


def settle_outcome(outcome: str | None, *, failed: bool = False, undeliverable_here: bool = False) -> Settlement:
    """The settlement for a remote outcome; ``None`` (no outcome) is treated like released."""
    if outcome == MODIFIED:
        return Settlement(remove=False, failed=failed, exclude_consumer=undeliverable_here)
    return OUTCOMES.get(outcome or RELEASED, _RETURN)


def settle_unsettled(abrupt: bool) -> Settlement:
    """Unsettled deliveries when their link ends: released after an orderly detach, failed after a loss."""
    return _RETURN_FAILED if abrupt else _RETURN
