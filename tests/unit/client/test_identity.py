"""The publisher id file: a stable id, and seqs reserved ahead so that a restart never reuses one."""

from __future__ import annotations

from subgate.client.identity import PublisherIdFile


def test_a_new_file_gets_an_id_and_starts_at_one(tmp_path):
    first = PublisherIdFile(tmp_path / "id")
    assert first.publisher_id.startswith("pub-") and first.next_seq == 1
    assert PublisherIdFile(tmp_path / "id").publisher_id == first.publisher_id


def test_seqs_are_reserved_in_blocks_before_use_and_a_restart_continues_past_them(tmp_path):
    path = tmp_path / "id"
    ids = PublisherIdFile(path, block=100)
    ids.cover(2)  # seq 1 about to be used
    assert ids.reserved == 102
    ids.cover(50)  # within the block: no write
    assert ids.reserved == 102
    ids.cover(103)
    assert ids.reserved == 203
    restarted = PublisherIdFile(path, block=100)
    assert restarted.next_seq == 203 and restarted.publisher_id == ids.publisher_id
    assert not (tmp_path / "id.tmp").exists()


def test_an_id_written_by_hand_is_kept(tmp_path):
    (tmp_path / "id").write_text("feed-7\n")
    ids = PublisherIdFile(tmp_path / "id")
    assert ids.publisher_id == "feed-7" and ids.next_seq == 1
