"""Input validation shared by every metric: shapes, dtypes and precise error messages."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


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
