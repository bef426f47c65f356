"""Input validation shared by every metric: shapes, dtypes and precise error messages."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse


def as_ratings(ratings: ArrayLike, *, name: str = "ratings") -> NDArray[np.float64]:
    """Return ``ratings`` as a 2-D float array ``(n_annotators, n_items)``; nan = not annotated.

    Raises
    ------
    ValueError
        If the input is not 2-D, is empty, or holds infinite values.
    """
    try:
        arr = np.asarray(ratings, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric (use np.nan for missing): {exc}") from exc
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (n_annotators, n_items); got an array of shape {arr.shape}"
        )
    if arr.size == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape})")
    if np.isinf(arr).any():
        raise ValueError(f"{name} holds infinite values; use np.nan for missing ratings")
    return arr


def check_min_overlap(min_overlap: object) -> None:
    """Refuse a ``min_overlap`` that is not a whole number (``True`` included)."""
    if isinstance(min_overlap, bool) or not isinstance(min_overlap, int | np.integer):
        raise ValueError(f"min_overlap must be an integer; got {min_overlap!r}")


def as_trace(x: ArrayLike, *, name: str = "x", allow_nan: bool = False) -> NDArray[np.float64]:
    """Return ``x`` as a 1-D float trace.

    Raises
    ------
    ValueError
        If ``x`` is not 1-D, or holds nan (unless ``allow_nan``) or infinite values.
    """
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric 1-D trace: {exc}") from exc
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D trace; got an array of shape {arr.shape}")
    if np.isinf(arr).any():
        raise ValueError(f"{name} holds infinite values")
    if not allow_nan and np.isnan(arr).any():
        first = int(np.flatnonzero(np.isnan(arr))[0])
        raise ValueError(
            f"{name} holds nan (first at index {first}); resample or interpolate the trace first"
        )
    return arr


def as_trace_pair(
    x: ArrayLike, y: ArrayLike, *, min_length: int = 2
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Validate two traces of equal length with at least ``min_length`` samples."""
    xa, ya = as_trace(x, name="x"), as_trace(y, name="y")
    if xa.shape != ya.shape:
        raise ValueError(f"x and y must have the same length; got {xa.size} and {ya.size}")
    if xa.size < min_length:
        raise ValueError(f"traces need at least {min_length} samples; got {xa.size}")
    return xa, ya


def as_square(matrix: ArrayLike, *, name: str) -> NDArray[np.float64]:
    """Return ``matrix`` as a square 2-D float array (nan allowed)."""
    arr = np.asarray(matrix, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be a square matrix; got shape {arr.shape}")
    return arr


@dataclass(frozen=True)
class LabelData:
    """Observed ratings of a ratings matrix as (annotator, item, value index) triples.

    ``values`` holds the value domain in increasing order; ``code[r]`` indexes it for rating
    ``r``. The sparse indicator views below are what the vectorised metrics multiply.
    """

    values: NDArray[np.float64]
    annotator: NDArray[np.intp]
    item: NDArray[np.intp]
    code: NDArray[np.intp]
    n_annotators: int
    n_items: int

    @property
    def n_values(self) -> int:
        return int(self.values.size)

    def indicators(self) -> sparse.csr_array:
        """One-hot indicators ``(n_annotators * n_values, n_items)``; row ``k * V + c`` marks
        the items annotator ``k`` gave value ``c``."""
        rows = self.annotator * self.n_values + self.code
        shape = (self.n_annotators * self.n_values, self.n_items)
        return _csr(rows, self.item, shape)

    def annotated(self) -> sparse.csr_array:
        """``(n_annotators, n_items)`` 1 where the annotator rated the item."""
        return _csr(self.annotator, self.item, (self.n_annotators, self.n_items))

    def item_counts(self) -> sparse.csr_array:
        """``(n_items, n_values)`` number of annotators who gave each value to each item."""
        return _csr(self.item, self.code, (self.n_items, self.n_values))


def _csr(
    rows: NDArray[np.intp], cols: NDArray[np.intp], shape: tuple[int, int]
) -> sparse.csr_array:
    ones = np.ones(rows.size, dtype=np.float64)
    return sparse.csr_array((ones, (rows, cols)), shape=shape)


def as_label_data(
    ratings: ArrayLike,
    *,
    values: ArrayLike | None = None,
    integer: bool = True,
    name: str = "ratings",
) -> LabelData:
    """Validate a ratings matrix and encode its observed ratings against a value domain.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Ratings; ``np.nan`` = not annotated.
    values : array_like, shape (n_values,), optional
        The value domain (strictly increasing). Default: the distinct observed ratings.
    integer : bool
        Require integer label codes (categorical metrics).

    Raises
    ------
    ValueError
        On a bad ratings matrix, non-integer codes when ``integer``, a domain that is not
        strictly increasing, or a rating outside ``values``.
    """
    arr = as_ratings(ratings, name=name)
    flat = np.flatnonzero(~np.isnan(arr))
    annotator, item = np.divmod(flat, arr.shape[1])
    observed = arr.ravel()[flat]
    if integer and observed.size and not np.array_equal(observed, np.round(observed)):
        bad = observed[observed != np.round(observed)][0]
        raise ValueError(
            f"{name} must hold integer label codes (np.nan = missing); got {float(bad)}"
        )
    if values is None and integer and observed.size and np.ptp(observed) <= observed.size:
        domain, code = _encode_small_integers(observed)
        return LabelData(domain, annotator, item, code, arr.shape[0], arr.shape[1])
    if values is None:
        domain = np.unique(observed)
    else:
        domain = np.asarray(values, dtype=np.float64)
        if domain.ndim != 1 or domain.size == 0 or np.any(np.diff(domain) <= 0):
            raise ValueError("values must be a non-empty, strictly increasing 1-D array")
    code = np.minimum(np.searchsorted(domain, observed), max(domain.size - 1, 0))
    if domain.size and np.any(domain[code] != observed):
        bad = observed[domain[code] != observed][0]
        raise ValueError(f"{name} holds {float(bad)}, which is not in values {domain.tolist()}")
    return LabelData(domain, annotator, item, code, arr.shape[0], arr.shape[1])


def _encode_small_integers(
    observed: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Domain and codes of integer ratings spanning few values, in O(n) (no sort)."""
    offset = (observed - observed.min()).astype(np.intp)
    present = np.bincount(offset) > 0
    return observed.min() + np.flatnonzero(present), (np.cumsum(present) - 1)[offset]
