"""Sufficient statistics of a question, updated item by item (categorical; pairwise and
continuous questions below).

Every agreement figure of the dashboard derives from these arrays (with
:mod:`analytics.metrics`), so one annotation costs an update of the item it touches, not a
recomputation of the study. Axes: ``M`` annotators, ``V`` label values (codes ``0 .. V-1``).

``confusion``    (M, M, V, V)  round-1 items both annotators labelled (diagonal: own counts)
``coincidence``  (V, V)        Krippendorff coincidences over round-1 items
``retest``       (M, V, V)     an annotator's round-1 label against their round-2 label
``time_ms``      (M, 2)        sum of time spent and number of timed answers
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

# An item as the state sees it: (annotator index, round) -> (value code, time spent in ms).
ItemView = Mapping[tuple[int, int], tuple[int, int | None]]

_ARRAYS = ("confusion", "coincidence", "retest", "time_ms")


@dataclass
class CategoricalStats:
    n_annotators: int
    n_values: int
    confusion: NDArray[np.float64] = field(init=False)
    coincidence: NDArray[np.float64] = field(init=False)
    retest: NDArray[np.float64] = field(init=False)
    time_ms: NDArray[np.float64] = field(init=False)

    def __post_init__(self) -> None:
        m, v = self.n_annotators, self.n_values
        self.confusion = np.zeros((m, m, v, v))
        self.coincidence = np.zeros((v, v))
        self.retest = np.zeros((m, v, v))
        self.time_ms = np.zeros((m, 2))

    # --- shape ---------------------------------------------------------------------------
    def grown(self, *, n_annotators: int, n_values: int) -> CategoricalStats:
        """A copy with room for more annotators or values (new rows and columns are zero)."""
        if n_annotators < self.n_annotators or n_values < self.n_values:
            raise ValueError("sufficient statistics only grow")
        bigger = CategoricalStats(n_annotators, n_values)
        m, v = self.n_annotators, self.n_values
        bigger.confusion[:m, :m, :v, :v] = self.confusion
        bigger.coincidence[:v, :v] = self.coincidence
        bigger.retest[:m, :v, :v] = self.retest
        bigger.time_ms[:m] = self.time_ms
        return bigger

    # --- updates -------------------------------------------------------------------------
    def add_item(self, view: ItemView, *, sign: float = 1.0) -> None:
        """Add (``sign=1``) or remove (``sign=-1``) one item's contribution."""
        first = {a: code for (a, rnd), (code, _) in view.items() if rnd == 1}
        if first:
            who = np.fromiter(first.keys(), dtype=np.intp)
            codes = np.fromiter(first.values(), dtype=np.intp)
            k, l = np.meshgrid(np.arange(who.size), np.arange(who.size), indexing="ij")
            np.add.at(self.confusion, (who[k], who[l], codes[k], codes[l]), sign)
            if who.size >= 2:
                n = np.bincount(codes, minlength=self.n_values).astype(np.float64)
                self.coincidence += sign * (np.outer(n, n) - np.diag(n)) / (who.size - 1)
        for (a, rnd), (code, _) in view.items():
            if rnd == 2 and a in first:
                self.retest[a, first[a], code] += sign
        for (a, _), (_, ms) in view.items():
            if ms is not None:
                self.time_ms[a] += sign * np.array([ms, 1.0])

    def replace_item(self, before: ItemView, after: ItemView) -> None:
        self.add_item(before, sign=-1.0)
        self.add_item(after, sign=1.0)

    # --- storage -------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        return _arrays_to_bytes({name: getattr(self, name) for name in _ARRAYS})

    @classmethod
    def from_bytes(
        cls, data: bytes | memoryview, *, n_annotators: int, n_values: int
    ) -> CategoricalStats:
        stats = cls(n_annotators, n_values)
        if data:
            arrays = _arrays_from_bytes(data)
            for name in _ARRAYS:
                setattr(stats, name, arrays[name])
        return stats

    def equals(self, other: CategoricalStats, *, atol: float = 1e-9) -> bool:
        return all(
            np.allclose(getattr(self, name), getattr(other, name), atol=atol) for name in _ARRAYS
        )


#: zlib level of the stored arrays. The state is written on every quality pass; with 128
#: annotators (a 1.2 MB confusion array) NumPy's ``savez_compressed`` (level 6) took 46 ms of
#: the pass, level 2 takes 5 ms for 1.5x the bytes (108 KB against 74 KB); reading is as fast.
COMPRESS_LEVEL = 2


#: Arrays over annotator pairs, ``(M, M, ...)``: stored as the blocks of the pairs with any
#: count while those are at most half of the pairs (a crowd study's annotators share items
#: with few others). Dense, the confusion of 512 annotators, each sharing items with 10
#: others, took 72 ms to deflate on every pass and 28 ms to inflate; as pairs 17 and 7 ms.
#: With most pairs counted the dense array is smaller (3.3 MB against 3.7 at 512) and
#: quicker, and is stored as it is.
PAIR_ARRAYS = frozenset({"confusion", "signs"})


def _arrays_to_bytes(arrays: Mapping[str, NDArray[np.float64]]) -> bytes:
    """``arrays`` as an ``.npz`` archive (what ``np.savez_compressed`` writes, at
    :data:`COMPRESS_LEVEL`), which ``np.load`` reads. A pair array ``name`` of
    :data:`PAIR_ARRAYS` with at most half of its pairs counted is stored as ``name.shape``,
    ``name.pairs`` (the flat indices ``k * M + l`` of the pairs with a nonzero count) and
    ``name.blocks`` (their blocks). Counts are stored in the smallest unsigned type that
    holds them (:func:`_compact`)."""
    members: dict[str, NDArray[Any]] = {}
    for name, array in arrays.items():
        array = np.asanyarray(array)
        if name not in PAIR_ARRAYS or not array.size:
            members[name] = _compact(array)
            continue
        m = array.shape[0]
        flat = array.reshape(m * m, -1)
        # a pair is counted if any cell is nonzero (einsum: 2x as quick as any(axis=1))
        pairs = np.flatnonzero(np.einsum("pc->p", np.abs(flat)))
        if 2 * pairs.size > m * m:  # most pairs counted: dense is smaller and quicker
            members[name] = _compact(array)
            continue
        members[f"{name}.shape"] = np.array(array.shape, dtype=np.int64)
        members[f"{name}.pairs"] = pairs.astype(np.int64)
        members[f"{name}.blocks"] = _compact(array.reshape(m * m, *array.shape[2:])[pairs])
    buffer = io.BytesIO()
    with zipfile.ZipFile(
        buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=COMPRESS_LEVEL
    ) as archive:
        for name, array in members.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                # numeric arrays: never pickled
                np.lib.format.write_array(member, array, allow_pickle=False)
    return buffer.getvalue()


def _arrays_from_bytes(data: bytes | memoryview) -> dict[str, NDArray[np.float64]]:
    """The arrays of an archive :func:`_arrays_to_bytes` wrote (pair arrays made dense again),
    or of one written before pair arrays were stored sparse (dense, as they were)."""
    with np.load(io.BytesIO(bytes(data)), allow_pickle=False) as archive:
        stored = {name: archive[name] for name in archive.files}
    arrays = {
        name: array.astype(np.float64, copy=False)
        for name, array in stored.items()
        if "." not in name
    }
    for name in PAIR_ARRAYS:
        if f"{name}.shape" in stored:
            shape = tuple(int(n) for n in stored[f"{name}.shape"])
            dense = np.zeros((shape[0] * shape[1], *shape[2:]))
            dense[stored[f"{name}.pairs"]] = stored[f"{name}.blocks"]
            arrays[name] = dense.reshape(shape)
    return arrays


def _compact(array: NDArray[Any]) -> NDArray[Any]:
    """``array`` in the smallest unsigned integer type that holds every value exactly (counts:
    whole and non-negative, at most ``2**32 - 1``), else as it is.

    The state is deflated on every quality pass, and deflating takes time in proportion to the
    bytes: 512 annotators' dense confusion (one byte a cell instead of eight) took 41 ms of a
    133 ms pass as float64. Read back, the arrays are float64 again (:func:`_arrays_from_bytes`).
    """
    if array.dtype.kind != "f" or not array.size:
        return array
    high = array.max()
    if not (array.min() >= 0 and high <= np.iinfo(np.uint32).max):  # nan fails both
        return array
    counts = array.astype(np.min_scalar_type(int(high)))
    return counts if np.array_equal(counts, array) else array


def _grow(array: NDArray[np.float64], shape: tuple[int, ...]) -> NDArray[np.float64]:
    """``array`` zero-padded to ``shape`` (every axis at least as long as before)."""
    if any(new < old for new, old in zip(shape, array.shape, strict=True)):
        raise ValueError("sufficient statistics only grow")
    bigger = np.zeros(shape)
    bigger[tuple(slice(0, n) for n in array.shape)] = array
    return bigger


#: Per-annotator columns of :class:`PairwiseStats` (replaced whole when an annotator judges).
PAIRWISE_COLUMNS = (
    "judgements",
    "time_ms",
    "timed",
    "n_transitive",
    "n_complete",
    "audits",
    "contradictions",
    "pruning_stopped_at",  # judgements after which pruning stopped; 0 while pruning
    "applied",  # sequence of the annotator's last judgement counted in ``pairs``
)


@dataclass
class PairwiseStats:
    """Sufficient statistics of a pairwise question.

    ``pairs`` treats every judged pair of items as an "item" whose label is the latest outcome
    oriented to the smaller item id (codes 0: the larger id preferred, 1: tie, 2: the smaller
    id preferred): its confusion gives the annotators' agreement on shared pairs.
    ``per_annotator`` ``(M, len(PAIRWISE_COLUMNS))`` holds the counts of
    :data:`PAIRWISE_COLUMNS`; an annotator's row depends on their own judgements only.
    """

    n_annotators: int
    pairs: CategoricalStats = field(init=False)
    per_annotator: NDArray[np.float64] = field(init=False)

    def __post_init__(self) -> None:
        self.pairs = CategoricalStats(self.n_annotators, 3)
        self.per_annotator = np.zeros((self.n_annotators, len(PAIRWISE_COLUMNS)))

    def column(self, name: str) -> NDArray[np.float64]:
        """One column of ``per_annotator`` by name."""
        return self.per_annotator[:, PAIRWISE_COLUMNS.index(name)]

    def grown(self, *, n_annotators: int) -> PairwiseStats:
        bigger = PairwiseStats(n_annotators)
        bigger.pairs = self.pairs.grown(n_annotators=n_annotators, n_values=3)
        bigger.per_annotator = _grow(self.per_annotator, bigger.per_annotator.shape)
        return bigger

    def to_bytes(self) -> bytes:
        arrays = {name: getattr(self.pairs, name) for name in _ARRAYS}
        return _arrays_to_bytes({**arrays, "per_annotator": self.per_annotator})

    @classmethod
    def from_bytes(cls, data: bytes | memoryview, *, n_annotators: int) -> PairwiseStats:
        stats = cls(n_annotators)
        if data:
            arrays = _arrays_from_bytes(data)
            for name in _ARRAYS:
                setattr(stats.pairs, name, arrays[name])
            stats.per_annotator = arrays["per_annotator"]
        return stats


#: Per-annotator sums of :class:`ContinuousStats`: traces, and per gold trace the figures of
#: ``apps.continuous.selectors.item_calibration`` with how many items define each.
CONTINUOUS_COLUMNS = (
    "traces",
    "gold",
    "lag_sum",
    "lag_n",
    "f1_sum",
    "f1_n",
    "kappa_truth_sum",
    "kappa_truth_n",
)


@dataclass
class ContinuousStats:
    """Sufficient statistics of a continuous question.

    ``signs`` ``(M, M, 3, 3)``: sign-coincidence tables of every annotator pair, summed over
    the round-1 items both traced (the diagonal: each annotator's own steps), so pooled
    kappa_SDA of any pair is :func:`~analytics.metrics.traces.kappa_sda_from_counts`.
    ``per_annotator`` ``(M, len(CONTINUOUS_COLUMNS))``: sums of :data:`CONTINUOUS_COLUMNS`.
    An item's contribution is subtracted and added again when one of its traces changes.
    """

    n_annotators: int
    signs: NDArray[np.float64] = field(init=False)
    per_annotator: NDArray[np.float64] = field(init=False)

    def __post_init__(self) -> None:
        m = self.n_annotators
        self.signs = np.zeros((m, m, 3, 3))
        self.per_annotator = np.zeros((m, len(CONTINUOUS_COLUMNS)))

    def column(self, name: str) -> NDArray[np.float64]:
        """One column of ``per_annotator`` by name."""
        return self.per_annotator[:, CONTINUOUS_COLUMNS.index(name)]

    def add_item(
        self,
        who: NDArray[np.intp],
        signs: NDArray[np.int64],
        figures: NDArray[np.float64],
        *,
        sign: float = 1.0,
    ) -> None:
        """Add (``sign=1``) or remove (``sign=-1``) one item's contribution: the annotators
        ``who`` (k,), their sign tables ``(k, k, 3, 3)`` and per-annotator sums ``(k, C)``."""
        self.signs[np.ix_(who, who)] += sign * signs
        np.add.at(self.per_annotator, who, sign * figures)

    def grown(self, *, n_annotators: int) -> ContinuousStats:
        bigger = ContinuousStats(n_annotators)
        bigger.signs = _grow(self.signs, bigger.signs.shape)
        bigger.per_annotator = _grow(self.per_annotator, bigger.per_annotator.shape)
        return bigger

    def to_bytes(self) -> bytes:
        return _arrays_to_bytes({"signs": self.signs, "per_annotator": self.per_annotator})

    @classmethod
    def from_bytes(cls, data: bytes | memoryview, *, n_annotators: int) -> ContinuousStats:
        stats = cls(n_annotators)
        if data:
            arrays = _arrays_from_bytes(data)
            stats.signs = arrays["signs"]
            stats.per_annotator = arrays["per_annotator"]
        return stats
