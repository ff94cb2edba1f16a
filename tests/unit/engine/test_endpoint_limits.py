"""The per-connection limits' rules (engine.endpoint_limits): at the limit allowed, past it refused with a reason
that names the limit and its flag; unsettled room; created topics counted while they exist."""

from __future__ import annotations

from subgate.engine.endpoint_limits import CreatedTopics, EndpointLimits, link_refusal, sendable, session_refusal

LIMITS = EndpointLimits(
    max_sessions_per_connection=2, max_links_per_session=3, max_unsettled_per_link=4, max_topics_per_connection=2
)


def test_sessions_and_links_are_refused_only_past_their_limit():
    assert session_refusal(1, LIMITS) is None
    refusal = session_refusal(2, LIMITS)
    assert refusal is not None and "max-sessions-per-connection 2" in refusal
    assert link_refusal(2, LIMITS) is None
    refusal = link_refusal(3, LIMITS)
    assert refusal is not None and "max-links-per-session 3" in refusal


def test_a_link_is_sent_its_credit_up_to_the_unsettled_limit():
    assert sendable(credit=10, unsettled=0, limit=4) == 4
    assert sendable(credit=10, unsettled=3, limit=4) == 1
    assert sendable(credit=10, unsettled=4, limit=4) == 0
    assert sendable(credit=2, unsettled=0, limit=4) == 2
    assert sendable(credit=0, unsettled=9, limit=4) == 0


def test_created_topics_count_while_they_exist():
    existing = {"a", "b"}
    created: CreatedTopics[str] = CreatedTopics(lambda topic: topic in existing)
    created.add("a")
    assert created.refusal(LIMITS) is None
    created.add("b")
    refusal = created.refusal(LIMITS)
    assert refusal is not None and "max-topics-per-connection 2" in refusal
    existing.discard("a")  # removed: no longer counts
    assert created.refusal(LIMITS) is None
    assert len(created) == 1
