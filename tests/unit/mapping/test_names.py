"""Reserved addresses (mapping.names.reserved): no node is made at the server's own addresses."""

from __future__ import annotations

import pytest

from subgate.mapping.errors import INVALID_FIELD, Refused
from subgate.mapping.names import check_new_name, reserved


@pytest.mark.parametrize("address", ["$management", "$subgate/x", "$subgate/remove-with-session/a", "$subgate/"])
@pytest.mark.parametrize("kind", ["queue", "topic"])
def test_the_servers_addresses_are_never_made_into_nodes(address, kind):
    assert reserved(address) is not None
    with pytest.raises(Refused) as refusal:
        check_new_name(address, kind, None)
    assert refusal.value.condition == INVALID_FIELD and address in refusal.value.description


@pytest.mark.parametrize("address", ["$management2", "management", "$subgate", "a/$management", "$sys", "$temps"])
def test_other_names_are_not_reserved(address):
    assert reserved(address) is None
    check_new_name(address, "queue", None)
