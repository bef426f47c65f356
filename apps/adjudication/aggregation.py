r"""Per-item aggregates of a categorical ratings matrix: majority, Dawid-Skene, disagreement.

Pure numpy (no Django): the adjudication page, the aggregated-labels export, the adaptive
overlap rule and ``benchmarks/adaptive_overlap.py`` read the same figures from here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from analytics.metrics.aad import aad_rmse_per_item
from analytics.metrics.dawid_skene import dawid_skene
from analytics.metrics.traces import kappa_sda_matrix

__all__ = [
    "ItemAggregates",
    "aggregate_items",
    "kappa_sda_spread",
    "majority_votes",
    "posterior_entropy",
]


@dataclass(frozen=True)
class ItemAggregates:
    """Aggregates of ``N`` items over ``V`` value codes and ``M`` annotators.

    Attributes
    ----------
    votes : ndarray, shape (N, V)
        Answers per item and code.
    n_answers : ndarray, shape (N,)
    majority : ndarray, shape (N,)
        The code with the most votes; ``-1`` when tied or unanswered.
    tied : ndarray of bool, shape (N,)
        Whether two or more codes share the most votes.
    posteriors : ndarray, shape (N, V)
        Dawid-Skene P(true code | answers); nan when nothing was answered.
    ds_label : ndarray, shape (N,)
        Most probable code (``-1`` for unanswered items).
    competence : ndarray, shape (M,)
        Dawid-Skene competence of each annotator (nan without answers).
    disagreement : ndarray, shape (N,)
        AAD-RMSE (Du & Hoste Eq. 4) of each item's answers; nan below two answers.
    """

    votes: NDArray[np.int64]
    n_answers: NDArray[np.int64]
    majority: NDArray[np.int64]
    tied: NDArray[np.bool_]
    posteriors: NDArray[np.float64]
    ds_label: NDArray[np.int64]
    competence: NDArray[np.float64]
    disagreement: NDArray[np.float64]


def majority_votes(
    ratings: ArrayLike, *, n_values: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """Votes per item and code, the majority code (``-1`` if tied or unanswered) and ties.

    Parameters
    ----------
    ratings : array_like, shape (M, N)
        Value codes ``0 .. n_values - 1``; nan = not answered.
    n_values : int

    Examples
    --------
    >>> votes, majority, tied = majority_votes([[0, 1, 2], [0, 0, float("nan")]], n_values=3)
    >>> majority.tolist(), tied.tolist()
    ([0, -1, 2], [False, True, False])
    """
    matrix = np.asarray(ratings, dtype=float)
    items = np.broadcast_to(np.arange(matrix.shape[1]), matrix.shape)
    seen = ~np.isnan(matrix)
    flat = items[seen] * n_values + matrix[seen].astype(np.int64)
    votes = np.bincount(flat, minlength=matrix.shape[1] * n_values).reshape(-1, n_values)
    top = votes.max(axis=1, initial=0)
    tied = (votes == top[:, None]).sum(axis=1) > 1
    tied &= top > 0
    majority = np.where((top > 0) & ~tied, votes.argmax(axis=1), -1)
    return votes, majority, tied


def aggregate_items(
    ratings: ArrayLike, *, points: ArrayLike, max_iter: int = 2000
) -> ItemAggregates:
    r"""Majority vote, Dawid-Skene posterior and AAD-RMSE disagreement of every item.

    Parameters
    ----------
    ratings : array_like, shape (M, N)
        Value codes; nan = not answered.
    points : array_like, shape (V, D)
        Where each code sits in the space disagreement is measured in (label coordinates, ranks
        of an ordered scale, or one-hot corners 1 apart: ``LabelScale.points``).
    max_iter : int
        Dawid-Skene EM iterations at most.

    Returns
    -------
    ItemAggregates

    Notes
    -----
    Dawid-Skene (:func:`analytics.metrics.dawid_skene.dawid_skene`) is fitted on the whole
    matrix; codes nobody used get posterior 0. The disagreement of item :math:`i` with
    :math:`n_i` answers placed at :math:`p_{xi}` is

    .. math:: D^i = \sqrt{\frac{2}{n_i - 1} \sum_x \lVert p_{xi} - \bar p_i \rVert^2}

    References
    ----------
    Dawid, A. P. & Skene, A. M. (1979). Maximum likelihood estimation of observer error-rates
    using the EM algorithm. Journal of the Royal Statistical Society C 28(1), 20-28.
    doi:10.2307/2346806

    Du, Q. & Hoste, V. (2025). Another approach to agreement measurement and prediction with
    emotion annotations. Proc. LAW-XIX, 87-102. doi:10.18653/v1/2025.law-1.7

    Examples
    --------
    >>> r = [[0, 0, 1, 1], [0, 1, 1, 1], [0, 0, 1, 0]]
    >>> agg = aggregate_items(r, points=[[0.0], [1.0]])
    >>> agg.majority.tolist(), agg.ds_label.tolist()
    ([0, 0, 1, 1], [0, 0, 1, 1])
    >>> agg.disagreement.round(3).tolist()
    [0.0, 0.816, 0.0, 0.816]
    """
    matrix = np.asarray(ratings, dtype=float)
    grid = np.asarray(points, dtype=float)
    n_values = grid.shape[0]
    m, n = matrix.shape
    votes, majority, tied = majority_votes(matrix, n_values=n_values)
    n_answers = votes.sum(axis=1)
    posteriors = np.full((n, n_values), np.nan)
    competence = np.full(m, np.nan)
    if n_answers.any():
        fit = dawid_skene(matrix, max_iter=max_iter)
        codes = fit.values.astype(np.int64)
        posteriors[:] = 0.0
        posteriors[:, codes] = fit.posteriors
        posteriors[n_answers == 0] = np.nan
        competence = fit.competence
    answered = n_answers > 0
    ds_label = np.full(n, -1, dtype=np.int64)
    ds_label[answered] = np.argmax(posteriors[answered], axis=1)
    coordinates = {float(code): tuple(point) for code, point in enumerate(grid)}
    disagreement = (
        aad_rmse_per_item(matrix, coordinates=coordinates) if answered.any() else np.full(n, np.nan)
    )
    return ItemAggregates(
        votes, n_answers, majority, tied, posteriors, ds_label, competence, disagreement
    )


def posterior_entropy(posteriors: ArrayLike) -> NDArray[np.float64]:
    r"""Entropy in bits of each item's Dawid-Skene posterior: 0 when one label is certain,
    :math:`\log_2 V` when all ``V`` are equally likely; nan for unanswered items.

    .. math:: H_i = -\sum_v p_{iv} \log_2 p_{iv}

    Parameters
    ----------
    posteriors : array_like, shape (N, V)

    Examples
    --------
    >>> posterior_entropy([[1.0, 0.0], [0.5, 0.5], [float("nan")] * 2]).tolist()
    [0.0, 1.0, nan]
    """
    p = np.asarray(posteriors, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, -p * np.log2(p), 0.0)
    return np.where(np.isnan(p).any(axis=1), np.nan, terms.sum(axis=1) + 0.0)


def kappa_sda_spread(traces: ArrayLike, *, tol: float = 0.0) -> float:
    r"""How far one item's traces move apart: one minus the mean pairwise kappa_SDA.

    0 when every pair of traces rises and falls together, 1 when they agree only by chance,
    up to 2 when they move opposite ways; nan below two traces.

    .. math:: S = 1 - \frac{2}{n(n-1)} \sum_{k<l} \kappa_{SDA}(x_k, x_l)

    Parameters
    ----------
    traces : array_like, shape (n, T)
        The item's traces at one rate (cut to the shortest).
    tol : float
        Changes up to ``tol`` count as no change (the question's SDA tolerance).

    Examples
    --------
    >>> kappa_sda_spread([[0, 1, 2, 1], [0, 2, 3, 1]])
    0.0
    >>> kappa_sda_spread([[0, 1, 2, 1], [2, 1, 0, 1]])
    1.8
    """
    matrix = np.asarray(traces, dtype=float)
    n = matrix.shape[0]
    if n < 2:
        return float("nan")
    kappa = kappa_sda_matrix(matrix, tol=tol)
    pairs = kappa[np.triu_indices(n, k=1)]
    return float(1.0 - np.nanmean(pairs)) if np.isfinite(pairs).any() else float("nan")
