"""The stored sufficient statistics: written quickly, read back exactly, old rows still read.

The state is written on every quality pass; NumPy's ``savez_compressed`` (zlib level 6) took
46 ms of a pass with 128 annotators, so the arrays are now deflated at a lower level. The
arrays over annotator pairs are stored as the blocks of the pairs with a count (issue 22: dense,
512 annotators' confusion took 68 ms to deflate and 36 ms to inflate, on every pass).
"""

from __future__ import annotations

import io

import numpy as np

from analytics.sufficient_stats import CategoricalStats, ContinuousStats, PairwiseStats


def owners(stats) -> list:
    """``stats`` and, for pairwise statistics, its pair sums: the objects holding the arrays."""
    return [stats, *([stats.pairs] if hasattr(stats, "pairs") else [])]


def filled(stats, rng: np.random.Generator):
    """``stats`` with every array and column replaced by random counts and sums."""
    for owner in owners(stats):
        for name, value in vars(owner).items():
            if isinstance(value, np.ndarray):
                counts = rng.poisson(2.0, size=value.shape).astype(float)
                setattr(owner, name, counts + rng.random(value.shape))
    return stats


def same_arrays(a, b) -> bool:
    def arrays(stats) -> dict[str, np.ndarray]:
        return {
            f"{k}.{name}": value
            for k, owner in enumerate(owners(stats))
            for name, value in vars(owner).items()
            if isinstance(value, np.ndarray)
        }

    left, right = arrays(a), arrays(b)
    return left.keys() == right.keys() and all(np.array_equal(left[k], right[k]) for k in left)


def test_every_kind_s_statistics_read_back_exactly() -> None:
    rng = np.random.default_rng(7)
    categorical = filled(CategoricalStats(12, 4), rng)
    again = CategoricalStats.from_bytes(categorical.to_bytes(), n_annotators=12, n_values=4)
    assert same_arrays(categorical, again)
    pairwise = filled(PairwiseStats(9), rng)
    assert same_arrays(pairwise, PairwiseStats.from_bytes(pairwise.to_bytes(), n_annotators=9))
    continuous = filled(ContinuousStats(5), rng)
    assert same_arrays(
        continuous, ContinuousStats.from_bytes(continuous.to_bytes(), n_annotators=5)
    )


def test_rows_written_with_numpy_s_savez_compressed_still_read() -> None:
    """States stored before the change are read as they were."""
    stats = filled(CategoricalStats(6, 3), np.random.default_rng(3))
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        **{
            name: getattr(stats, name) for name in ("confusion", "coincidence", "retest", "time_ms")
        },
    )
    again = CategoricalStats.from_bytes(buffer.getvalue(), n_annotators=6, n_values=3)
    assert same_arrays(stats, again)


def test_the_archive_is_deflated() -> None:
    """Counts of a large study compress: the bytes stay far below the raw arrays'."""
    stats = CategoricalStats(128, 3)
    stats.confusion[:64, :64, 0, 0] = 5.0
    raw = stats.confusion.nbytes
    assert len(stats.to_bytes()) < raw / 20


def test_pair_arrays_are_stored_as_the_pairs_with_counts() -> None:
    """A crowd's confusion: each of 512 annotators shares items with 8 others. Stored, it
    holds those pairs' blocks, not the 512 x 512 grid, and reads back exactly (empty blocks
    and arrays included)."""
    rng = np.random.default_rng(11)
    m = 512
    stats = CategoricalStats(m, 4)
    for k in range(m):
        for partner in rng.choice(m, 8, replace=False):
            stats.confusion[k, partner] += rng.poisson(1.5, (4, 4))
    stats.confusion[5, 6] = 0.0  # a pair whose counts went back to zero
    data = stats.to_bytes()
    with np.load(io.BytesIO(data)) as archive:
        assert "confusion" not in archive.files
        assert archive["confusion.pairs"].size == np.count_nonzero(
            stats.confusion.reshape(m * m, 16).any(axis=1)
        )
    dense = io.BytesIO()
    np.savez_compressed(dense, confusion=stats.confusion)  # zlib level 6 even
    assert len(data) < 0.7 * len(dense.getvalue())
    assert same_arrays(stats, CategoricalStats.from_bytes(data, n_annotators=m, n_values=4))
    for m, v in ((3, 2), (0, 0), (0, 3)):  # nothing counted; nobody yet
        empty = CategoricalStats(m, v)
        again = CategoricalStats.from_bytes(empty.to_bytes(), n_annotators=m, n_values=v)
        assert same_arrays(empty, again)
    signs = ContinuousStats(4)
    signs.signs[1, 2, 0, 1] = 3.0
    again = ContinuousStats.from_bytes(signs.to_bytes(), n_annotators=4)
    assert same_arrays(signs, again)


def test_a_pair_array_with_most_pairs_counted_is_stored_dense() -> None:
    """Everyone with everyone (a lab study): the grid itself is smaller than its pairs."""
    stats = filled(CategoricalStats(10, 3), np.random.default_rng(5))
    with np.load(io.BytesIO(stats.to_bytes())) as archive:
        assert "confusion" in archive.files
        assert "confusion.pairs" not in archive.files


def test_counts_are_stored_in_the_smallest_unsigned_type_and_read_back_as_floats() -> None:
    """Counts (whole, non-negative) take one byte a cell up to 255, two up to 65,535, four
    beyond: 512 annotators, everyone with everyone, is 2.4 MB of cells to deflate on every
    pass instead of 18.9 MB (issue 22: 41 ms of a 133 ms pass). Anything else (sums of
    seconds, fractions, negatives) is stored as it is; everything reads back as float64,
    exactly."""
    stats = CategoricalStats(6, 3)
    stats.confusion += 1.0  # every pair counted: stored dense
    stats.confusion[0, 1, 0, 0] = 255.0
    stats.retest[2, 1, 1] = 256.0
    stats.time_ms[:, 0] = 70_000.0  # whole, beyond two bytes
    stats.time_ms[1, 1] = 2.0**32  # beyond four bytes
    stats.coincidence[0, 1] = 0.5
    with np.load(io.BytesIO(stats.to_bytes())) as archive:
        stored = {name: archive[name].dtype for name in archive.files}
    assert stored == {
        "confusion": np.uint8,
        "retest": np.uint16,
        "time_ms": np.float64,
        "coincidence": np.float64,
    }
    stats.time_ms[1, 1] = 5.0
    stats.confusion[2, 3, 1, 1] = -1.0  # a count that went wrong is kept, not wrapped
    with np.load(io.BytesIO(stats.to_bytes())) as archive:
        assert archive["time_ms"].dtype == np.uint32
        assert archive["confusion"].dtype == np.float64
    for kind, again in (
        (stats, CategoricalStats.from_bytes(stats.to_bytes(), n_annotators=6, n_values=3)),
        (
            crowd := _crowd(64),
            CategoricalStats.from_bytes(crowd.to_bytes(), n_annotators=64, n_values=4),
        ),
    ):
        assert same_arrays(kind, again)
        assert all(
            value.dtype == np.float64
            for owner in owners(again)
            for value in vars(owner).values()
            if isinstance(value, np.ndarray)
        )
    with np.load(io.BytesIO(crowd.to_bytes())) as archive:
        assert archive["confusion.blocks"].dtype == np.uint8
        assert archive["confusion.pairs"].dtype == np.int64


def _crowd(m: int) -> CategoricalStats:
    """Each of ``m`` annotators shares items with 4 others."""
    rng = np.random.default_rng(13)
    stats = CategoricalStats(m, 4)
    for k in range(m):
        stats.confusion[k, rng.choice(m, 4, replace=False)] += rng.poisson(1.5, (4, 4, 4))
    return stats
