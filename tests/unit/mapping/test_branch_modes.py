"""Per-branch journal and publisher modes (mapping.branch_modes)."""

from __future__ import annotations

import pytest

from subgate.mapping.branch_modes import (
    BranchModeError,
    journal_mode,
    parse_journal_branches,
    parse_publisher_modes,
    publisher_mode,
)


def test_the_most_specific_branch_wins_and_the_default_stays_elsewhere():
    branches = parse_journal_branches(("prices=off", "prices/fx=all", "/audit/=all"))
    assert branches == {"prices": "off", "prices/fx": "all", "audit": "all"}
    assert journal_mode(branches, "prices/eq/IBM") == "off"
    assert journal_mode(branches, "prices/fx/EURUSD") == "all"
    assert journal_mode(branches, "prices") == "off"
    assert journal_mode(branches, "pricesX") == "persistent"
    assert journal_mode(branches, "audit") == "all"


def test_publisher_modes_cover_a_queue_by_its_name():
    modes = parse_publisher_modes(("orders=STORE_SEND_NOCONFIRM",))
    assert publisher_mode(modes, "orders") == "store_send_noconfirm"
    assert publisher_mode(modes, "orders/eu") == "store_send_noconfirm"
    assert publisher_mode(modes, "billing") == "store_confirm_send"


@pytest.mark.parametrize("entry", ["prices", "=off", "prices=sometimes"])
def test_a_bad_entry_is_an_error_naming_it(entry):
    with pytest.raises(BranchModeError) as caught:
        parse_journal_branches((entry,))
    assert repr(entry) in str(caught.value)
