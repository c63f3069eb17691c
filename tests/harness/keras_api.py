"""The findings of tests/programs/hvd_keras_api.py (Horovod's Keras API on Keras 3 and tf_keras), read and
judged for the tests that run it on one host (tests/process/test_horovod_keras_api.py) and on several
(tests/cluster/test_multihost.py)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

PROGRAM = Path(__file__).resolve().parent.parent / "programs" / "hvd_keras_api.py"
FLAVOURS = ("keras3", "tf_keras")


def read(files: Sequence[Path]) -> list[dict[str, Any]]:
    """Every rank's findings, in rank order (files named api-<rank>.json)."""
    ordered = sorted(files, key=lambda p: int(p.stem.split("-")[1]))
    return [json.loads(p.read_text()) for p in ordered]


def of(found: list[dict[str, Any]], case: str, flavour: str) -> list[dict[str, Any]]:
    """One case's findings on every rank; the case's own error where it raised."""
    key = f"{case}/{flavour}"
    missing = [rank for rank, f in enumerate(found) if key not in f]
    assert not missing, f"{key}: no findings from ranks {missing} (the run ended before it)"
    for rank, f in enumerate(found):
        assert "failed" not in f[key], f"{key} failed on rank {rank}: {f[key]['failed']}\n{f[key]['traceback']}"
    return [f[key] for f in found]


def assert_same_on_every_rank(values: Sequence[Any]) -> None:
    for rank, other in enumerate(values[1:], 1):
        for a, b in zip(values[0], other):
            np.testing.assert_array_equal(np.array(a), np.array(b), err_msg=f"rank {rank} differs from rank 0")


def assert_close(ours: Sequence[Any], theirs: Sequence[Any], atol: float) -> None:
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.array(a, dtype=float), np.array(b, dtype=float), rtol=0, atol=atol)


def assert_trains_as_union(ranks: list[dict[str, Any]], atol: float) -> None:
    """Every rank ended with the same weights, those one process reaches on the union of their batches."""
    assert_same_on_every_rank([r["weights"] for r in ranks])
    assert_close(ranks[0]["weights"], ranks[0]["expected"], atol)
