"""Sufficient statistics of a categorical question, updated item by item.

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
from collections.abc import Mapping
from dataclasses import dataclass, field

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
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **{name: getattr(self, name) for name in _ARRAYS})
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, *, n_annotators: int, n_values: int) -> CategoricalStats:
        stats = cls(n_annotators, n_values)
        if data:
            with np.load(io.BytesIO(bytes(data))) as arrays:
                for name in _ARRAYS:
                    setattr(stats, name, arrays[name])
        return stats

    def equals(self, other: CategoricalStats, *, atol: float = 1e-9) -> bool:
        return all(
            np.allclose(getattr(self, name), getattr(other, name), atol=atol) for name in _ARRAYS
        )
