"""The demultiplexer's dealing plan (smtrain.data.dealer.deal, block_for): whole rounds of blocks,
every record once, equal counts, one span per block."""
from __future__ import annotations

import pytest

from smtrain.data.dealer import BLOCK_BYTES, MAX_BLOCK, ROUND_BYTES, SAMPLE_RECORDS, block_for, deal
from smtrain.data.frames import Frames


def _adjacent_spans(sizes: list[int]) -> list[tuple[int, int]]:
    spans, at = [], 0
    for size in sizes:
        spans.append((at, at + size))
        at += size
    return spans


def _frames(spans: list[tuple[int, int]]) -> Frames:
    return Frames(spans[0][0], [stop for _, stop in spans], len(spans))


@pytest.mark.parametrize("ranks,block,rounds", [([0, 1], 3, 2), ([0, 1, 2, 3], 1, 5), ([1, 3], 7, 1)])
def test_each_rank_gets_its_blocks_in_order_covering_every_record_once(ranks: list[int], block: int,
                                                                        rounds: int) -> None:
    spans = _adjacent_spans([(i * 7) % 13 + 1 for i in range(block * len(ranks) * rounds)])
    dealt = deal(_frames(spans), len(spans), ranks, block)
    assert sorted(dealt) == sorted(ranks)
    assert all(len(blocks) == rounds for blocks in dealt.values())  # equal counts
    covered = sorted(span for blocks in dealt.values() for span in blocks)
    assert covered[0][0] == 0 and covered[-1][1] == spans[-1][1]
    assert all(a[1] == b[0] for a, b in zip(covered, covered[1:]))  # no gap, no overlap
    # round r, i-th rank: records [r*B*P + i*B, r*B*P + (i+1)*B)
    per_round = block * len(ranks)
    for i, rank in enumerate(ranks):
        for r, (start, stop) in enumerate(dealt[rank]):
            first = r * per_round + i * block
            assert (start, stop) == (spans[first][0], spans[first + block - 1][1])


def _sized(sizes: list[int]) -> Frames:
    return _frames(_adjacent_spans(sizes))


def test_blocks_are_about_block_bytes_of_records_of_the_first_records_mean_size() -> None:
    assert block_for(_sized([116] * 100), 2) == block_for(_sized([116] * 100), 4) == BLOCK_BYTES // 116
    # a small first record does not make blocks of thousands of large ones: the mean of the first 64
    sizes = [20] + [1500] * 99
    mean = sum(sizes[:SAMPLE_RECORDS]) / SAMPLE_RECORDS
    assert block_for(_sized(sizes), 2) == int(BLOCK_BYTES // mean)
    assert block_for(_sized([100 * 1024 + 16] * 3), 2) == 1  # one record is sample enough, and a block
    assert block_for(_sized([16] * SAMPLE_RECORDS), 2) == MAX_BLOCK  # empty records: capped


def test_the_block_waits_for_a_whole_sample_of_first_records() -> None:
    assert block_for(_sized([116] * (SAMPLE_RECORDS - 1)), 2) == 0  # more records may come
    assert block_for(_sized([40 * 1024, 20 * 1024]), 2) == 0  # and below BLOCK_BYTES so far
    assert block_for(_sized([40 * 1024, 30 * 1024]), 2) == 1  # 70 KiB in two records: enough to judge
    assert block_for(_sized([116] * SAMPLE_RECORDS), 2) == block_for(_sized([116] * 5 * SAMPLE_RECORDS), 2)


def test_a_round_of_many_ranks_stays_within_round_bytes() -> None:
    many = 4 * ROUND_BYTES // BLOCK_BYTES
    assert block_for(_sized([116] * 100), many) == ROUND_BYTES // many // 116 < BLOCK_BYTES // 116
    assert block_for(_sized([116] * 100), many) * 116 * many <= ROUND_BYTES
    assert block_for(_sized([100 * 1024 + 16] * 2), many) == 1  # a record per rank, however large


def test_only_the_first_count_records_are_dealt_the_rest_wait_for_the_next_round() -> None:
    spans = _adjacent_spans([5, 6, 7, 8, 9, 10, 11])
    dealt = deal(_frames(spans), 4, [0, 1], 2)
    assert dealt == {0: [(0, 11)], 1: [(11, 26)]}  # records 0-1 and 2-3; 4-6 are not touched
