"""The demultiplexer's dealing plan (smtrain.data.demux.deal, block_for): whole rounds of blocks,
every record once, equal counts, one span per block."""
from __future__ import annotations

import pytest

from smtrain.data.demux import BLOCK_BYTES, MAX_BLOCK, block_for, deal
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


def test_blocks_are_about_block_bytes_of_records_and_at_least_one() -> None:
    assert block_for(116) == BLOCK_BYTES // 116
    assert block_for(100 * 1024 + 16) == 1
    assert block_for(0) == MAX_BLOCK and block_for(1) == MAX_BLOCK


def test_only_the_first_count_records_are_dealt_the_rest_wait_for_the_next_round() -> None:
    spans = _adjacent_spans([5, 6, 7, 8, 9, 10, 11])
    dealt = deal(_frames(spans), 4, [0, 1], 2)
    assert dealt == {0: [(0, 11)], 1: [(11, 26)]}  # records 0-1 and 2-3; 4-6 are not touched
