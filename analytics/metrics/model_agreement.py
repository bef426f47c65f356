"""How well a model reproduces the annotators' tendencies: DIC, BAE, MDS maps and baselines.

Zhang et al. (2025) compare an inter-annotator consistency matrix of the humans
(``pairwise_kappa``) with the same matrix built from a model's per-annotator predictions (DIC)
or from the model's per-annotator feature/attention vectors (BAE), and draw both in 2-D by MDS.
Baselines give the scale: Random and Consensus for DIC, Random and Uniform for BAE.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.linalg import orthogonal_procrustes

from analytics.metrics._validate import as_label_data, as_ratings, as_square, check_min_overlap
from analytics.metrics.categorical import kappa_from_confusion, pairwise_kappa
from analytics.metrics.traces import kappa_sda_from_counts
from analytics.metrics.uncertainty import (
    _BATCH,
    Interval,
    Seed,
    _check_n_boot,
    _features,
    _item_bootstrap,
    _item_pairs,
    _percentile_interval,
    _replicate_sums,
    _weight_chunks,
)

__all__ = [
    "DicBaeIntervals",
    "bae",
    "bae_random_baseline",
    "bae_uniform_baseline",
    "cosine_similarity_matrix",
    "dic",
    "dic_bae_bootstrap",
    "dic_bae_bootstrap_sda",
    "dic_consensus_baseline",
    "dic_random_baseline",
    "mds_embedding",
    "mean_accuracy_bootstrap",
    "paired_difference",
    "procrustes_align",
]


def _same_squares(
    a: ArrayLike, b: ArrayLike, *, names: tuple[str, str]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Both matrices as float arrays, checked square and of one shape."""
    x = as_square(a, name=names[0])
    y = as_square(b, name=names[1])
    if x.shape != y.shape:
        raise ValueError(
            f"{names[0]} and {names[1]} must have the same shape; got {x.shape} and {y.shape}"
        )
    return x, y


def _frobenius_ratios(
    x: NDArray[np.float64], y: NDArray[np.float64], *, diagonal: bool = True
) -> NDArray[np.float64]:
    """``||x - y||_F / ||x||_F`` over the entries defined in both (off the diagonal only
    without ``diagonal``), per matrix of a stack ``(..., M, M)``; nan where no entry is
    defined or ``x`` is 0 there."""
    both = ~np.isnan(x) & ~np.isnan(y)
    if not diagonal:
        both &= ~np.eye(x.shape[-1], dtype=bool)
    norm = np.sqrt(np.sum(np.where(both, x, 0.0) ** 2, axis=(-2, -1)))
    diff = np.sqrt(np.sum(np.where(both, x - y, 0.0) ** 2, axis=(-2, -1)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norm > 0, diff / norm, np.nan)


def _frobenius_ratio(a: ArrayLike, b: ArrayLike, *, names: tuple[str, str]) -> float:
    """``||a - b||_F / ||a||_F`` over the entries defined in both; nan if none or ``a`` = 0."""
    x, y = _same_squares(a, b, names=names)
    return float(_frobenius_ratios(x, y))


def _dic_stack(
    m_true: NDArray[np.float64], m_pred: NDArray[np.float64], bound: float
) -> NDArray[np.float64]:
    """:func:`dic` of each matrix pair of two stacks ``(..., M, M)`` (penalty rule included,
    diagonal left out)."""
    undefined = ~np.isnan(m_true) & np.isnan(m_pred)
    worst = np.where(m_true >= 0, -bound, bound)
    return _frobenius_ratios(m_true, np.where(undefined, worst, m_pred), diagonal=False)


def dic(m_true: ArrayLike, m_pred: ArrayLike, *, bound: float = 1.0) -> float:
    r"""Difference of Inter-annotator Consistency (Zhang et al., Eq. 3); lower is better.

    Parameters
    ----------
    m_true : array_like, shape (n_annotators, n_annotators)
        Consistency matrix of the human ratings (``pairwise_kappa``).
    m_pred : array_like, shape (n_annotators, n_annotators)
        The same matrix computed from the model's per-annotator predictions.
    bound : float
        The consistency measure's range is ``[-bound, bound]`` (1 for Cohen's kappa and
        kappa_SDA); it sets the penalty of a cell the model leaves undefined.

    Returns
    -------
    float
        :math:`\ge 0`; 0 for identical matrices. Only pairs of two different annotators
        count: the diagonal (every annotator's agreement with itself, 1 in both matrices) is
        no relation between annotators, and counting it in the norm pulled every DIC towards
        0 (by about half with six annotators of kappa 0.2). Cells undefined (nan) in
        ``m_true`` take no part (Eq. 1 defines :math:`m_{kl}` only on annotators who
        labelled, sharing at least :math:`\tau` items). A cell defined in ``m_true`` but
        undefined in ``m_pred`` counts as the largest difference the measure allows,
        :math:`\text{bound} + |m_{kl}|`. nan when no cell of ``m_true`` off the diagonal is
        defined or they are all 0.

    Notes
    -----
    .. math:: \mathrm{DIC} = \frac{\lVert M - M' \rVert_{F,\,\ne}}
              {\lVert M \rVert_{F,\,\ne}}, \qquad
              \lVert A \rVert_{F,\,\ne}^2 = \sum_{k \ne l} a_{kl}^2

    Zhang et al.'s Eq. 3 writes the full Frobenius norm; the diagonal is left out here so
    that DIC measures the relations between annotators only (a model that reproduces none,
    :math:`M' = 0` off the diagonal, scores exactly 1).

    How to read the reference rows: Random (:func:`dic_random_baseline`) reproduces no
    relation, so it scores about 1 at every agreement level. Consensus
    (:func:`dic_consensus_baseline`) makes every pair agree perfectly (:math:`m'_{kl} = 1`),
    so it scores :math:`\lVert M - 1 \rVert / \lVert M \rVert`, below Random only when
    the annotators' pair kappas average above about 0.5; at lower agreement Consensus is the
    worse row. A model below Random reproduces some of the annotators' relations; below
    Consensus too, more than "everybody agrees" does.

    Why undefined predictions are penalised: a model that gives every annotator the same
    constant label has :math:`p_e = 1` on every pair, so every :math:`m'_{kl}` is undefined.
    Dropping those cells would leave only the diagonal (1 = 1) and score that model a perfect
    DIC of 0. Eq. 2 asks for :math:`m'_{kl}` on exactly the cells where :math:`m_{kl}` is
    defined; a model that cannot produce one has failed to reproduce that relation at all,
    so the cell takes the worst value of the range, :math:`m'_{kl} = -\operatorname{sgn}
    (m_{kl})\,\text{bound}`. A constant model then scores worse than the Random baseline.

    References
    ----------
    Zhang, L., Liu, F., Sha, X., Wang, B., Liu, H. & Lian, Z. (2025). A unified evaluation
    framework for multi-annotator tendency learning. arXiv:2508.10393.
    doi:10.48550/arXiv.2508.10393

    Examples
    --------
    >>> m = [[1.0, 0.5], [0.5, 1.0]]
    >>> round(dic(m, [[1.0, 0.2], [0.2, 1.0]]), 4)
    0.6
    >>> dic(m, m)
    0.0
    >>> round(dic(m, [[1.0, np.nan], [np.nan, 1.0]]), 4)  # a constant model: 1.5 per cell
    3.0
    """
    x, y = _same_squares(m_true, m_pred, names=("m_true", "m_pred"))
    if not bound > 0:
        raise ValueError(f"bound must be positive; got {bound}")
    return float(_dic_stack(x, y, bound))


def bae(s_model: ArrayLike, s_true: ArrayLike) -> float:
    r"""Behavior Alignment Explainability (Zhang et al., Eq. 7); higher is better.

    Parameters
    ----------
    s_model : array_like, shape (n_annotators, n_annotators)
        Similarity of the model's per-annotator vectors (:func:`cosine_similarity_matrix`).
    s_true : array_like, shape (n_annotators, n_annotators)
        The human consistency matrix (``pairwise_kappa``).

    Returns
    -------
    float
        :math:`\le 1`; 1 for identical matrices. Same nan rule as :func:`dic`.

    Notes
    -----
    .. math:: \mathrm{BAE} = 1 - \frac{\lVert S^{model} - S^{true} \rVert_F}
              {\lVert S^{true} \rVert_F}

    References
    ----------
    Zhang, L., Liu, F., Sha, X., Wang, B., Liu, H. & Lian, Z. (2025). A unified evaluation
    framework for multi-annotator tendency learning. arXiv:2508.10393.
    doi:10.48550/arXiv.2508.10393

    Examples
    --------
    >>> s = [[1.0, 0.5], [0.5, 1.0]]
    >>> round(bae([[1.0, 0.2], [0.2, 1.0]], s), 4)
    0.7317
    """
    return 1.0 - _frobenius_ratio(s_true, s_model, names=("s_true", "s_model"))


def cosine_similarity_matrix(vectors: ArrayLike) -> NDArray[np.float64]:
    r"""Cosine similarity of every pair of per-annotator vectors (Zhang et al., Eqs. 5-6).

    Parameters
    ----------
    vectors : array_like, shape (n_annotators, n_features)
        One vector per annotator (mean feature or mean attention vector).

    Returns
    -------
    ndarray, shape (n_annotators, n_annotators)
        Symmetric; rows and columns of all-zero vectors are nan.

    Notes
    -----
    .. math:: S_{ij} = \frac{F_i \cdot F_j}{\lVert F_i \rVert \lVert F_j \rVert}

    Examples
    --------
    >>> cosine_similarity_matrix([[1, 0], [1, 1], [0, 2]]).round(4)
    array([[1.    , 0.7071, 0.    ],
           [0.7071, 1.    , 0.7071],
           [0.    , 0.7071, 1.    ]])
    """
    arr = np.asarray(vectors, dtype=np.float64)
    if arr.ndim != 2 or arr.size == 0:
        raise ValueError(
            "vectors must be a non-empty 2-D array (n_annotators, n_features); "
            f"got shape {arr.shape}"
        )
    if not np.isfinite(arr).all():
        raise ValueError("vectors must be finite")
    norms = np.linalg.norm(arr, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = arr / norms[:, None]
    return np.clip(unit @ unit.T, -1.0, 1.0)


def mds_embedding(similarity: ArrayLike, *, seed: int = 0) -> NDArray[np.float64]:
    r"""2-D metric MDS map of annotators from a similarity matrix.

    Parameters
    ----------
    similarity : array_like, shape (n_annotators, n_annotators)
        Symmetric similarities (kappa or cosine), at most 1; no nan.
    seed : int
        Random state of the SMACOF runs.

    Returns
    -------
    ndarray, shape (n_annotators, 2)
        Coordinates; close points = similar annotators.

    Notes
    -----
    Embeds the dissimilarities :math:`\max(0, 1 - S_{ij})` (precomputed, diagonal 0) with
    ``sklearn.manifold.MDS`` (SMACOF, classical-MDS start; scikit-learn >= 1.8):

    .. math:: \min_X \sum_{i<j} \left(\lVert x_i - x_j \rVert - \max(0, 1 - S_{ij})\right)^2

    References
    ----------
    Borg, I. & Groenen, P. J. F. (2005). Modern Multidimensional Scaling, 2nd ed. Springer.
    doi:10.1007/0-387-28981-X

    Examples
    --------
    >>> s = [[1.0, 0.9, 0.1], [0.9, 1.0, 0.2], [0.1, 0.2, 1.0]]
    >>> xy = mds_embedding(s)
    >>> xy.shape
    (3, 2)
    >>> d = np.linalg.norm(xy[:, None] - xy[None], axis=-1)
    >>> bool(d[0, 1] < d[0, 2])
    True
    """
    s = as_square(similarity, name="similarity")
    if np.isnan(s).any():
        k, l = np.argwhere(np.isnan(s))[0]
        raise ValueError(
            f"similarity holds nan (first at ({k}, {l})): fill or drop annotators whose "
            "overlap was too small before embedding"
        )
    if s.shape[0] < 2:
        raise ValueError(f"need at least 2 annotators to embed; got {s.shape[0]}")
    dissimilarity = np.clip(1.0 - (s + s.T) / 2.0, 0.0, None)
    np.fill_diagonal(dissimilarity, 0.0)
    if not dissimilarity.any():  # everyone agrees perfectly: one point
        return np.zeros((s.shape[0], 2))
    # imported here: scikit-learn costs a process about 90 MB and 0.45 s, and only the quality
    # worker draws maps (a web process imports this module, never calls this)
    from sklearn.manifold import MDS

    mds = MDS(n_components=2, metric="precomputed", init="classical_mds", random_state=seed)
    return mds.fit_transform(dissimilarity, init=_classical_start(dissimilarity))


def _classical_start(dissimilarity: NDArray[np.float64]) -> NDArray[np.float64]:
    """Classical (Torgerson) MDS coordinates in 2-D with negative eigenvalues taken as 0.

    Dissimilarities that break the triangle inequality (three annotators where 1 - kappa of
    one pair exceeds the sum of the other two) give the double-centred matrix a negative
    eigenvalue; scikit-learn's classical start takes its square root (nan) and SMACOF fails.
    """
    n = dissimilarity.shape[0]
    centre = np.eye(n) - 1.0 / n
    values, vectors = np.linalg.eigh(-0.5 * centre @ (dissimilarity**2) @ centre)
    top = np.argsort(values)[::-1][:2]
    xy = vectors[:, top] * np.sqrt(np.clip(values[top], 0.0, None))
    return np.pad(xy, ((0, 0), (0, 2 - xy.shape[1])))


def procrustes_align(embedding: ArrayLike, reference: ArrayLike) -> NDArray[np.float64]:
    r"""Rotate/reflect an embedding onto a reference (orthogonal Procrustes, no scaling).

    Parameters
    ----------
    embedding : array_like, shape (n_annotators, n_dims)
        Map to align (e.g. the model's MDS map).
    reference : array_like, shape (n_annotators, n_dims)
        Map to align to (e.g. the ground truth's MDS map).

    Returns
    -------
    ndarray, shape (n_annotators, n_dims)
        ``embedding`` centred, rotated by the best orthogonal :math:`R`, and moved to the
        reference's centroid.

    Notes
    -----
    With :math:`A, B` the centred maps:

    .. math:: R = \arg\min_{R^\top R = I} \lVert A R - B \rVert_F

    References
    ----------
    Schönemann, P. H. (1966). A generalized solution of the orthogonal Procrustes problem.
    Psychometrika 31(1), 1-10. doi:10.1007/BF02289451

    Examples
    --------
    >>> ref = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    >>> turned = ref @ np.array([[0.0, -1.0], [1.0, 0.0]])
    >>> np.allclose(procrustes_align(turned, ref), ref)
    True
    """
    a = np.asarray(embedding, dtype=np.float64)
    b = np.asarray(reference, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(
            f"embedding and reference must be 2-D of the same shape; got {a.shape} and {b.shape}"
        )
    a_centred = a - a.mean(axis=0)
    b_mean = b.mean(axis=0)
    rotation, _ = orthogonal_procrustes(a_centred, b - b_mean)
    return a_centred @ rotation + b_mean


def dic_random_baseline(
    ratings: ArrayLike,
    *,
    n_labels: int | None = None,
    seed: int = 0,
    min_overlap: int = 2,
    n_repeats: int = 10,
) -> float:
    r"""DIC of the Random baseline: uniform random labels on each annotator's own items.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Integer label codes; ``np.nan`` = not annotated.
    n_labels : int, optional
        Draw codes ``0 .. n_labels - 1``; default: the label codes observed.
    seed : int
        Seed of the random generator.
    min_overlap : int
        As in ``pairwise_kappa``.
    n_repeats : int
        Number of random draws averaged.

    Returns
    -------
    float
        Mean DIC of ``pairwise_kappa(random)`` against ``pairwise_kappa(ratings)``: about 1
        at every agreement level (random labels reproduce no relation between annotators),
        a little above with few shared items (random kappas scatter around 0). Zhang et al.
        report 0.86-0.93 with the diagonal counted.

    Notes
    -----
    .. math:: \mathrm{DIC}_{rand} = \frac{1}{R} \sum_{r=1}^{R}
              \frac{\lVert M - M'_r \rVert_F}{\lVert M \rVert_F}

    References
    ----------
    Zhang, L. et al. (2025). A unified evaluation framework for multi-annotator tendency
    learning, Section 4.3. doi:10.48550/arXiv.2508.10393

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> truth = rng.integers(0, 3, 200)
    >>> r = np.array([np.where(rng.random(200) < 0.8, truth, rng.integers(0, 3, 200))
    ...               for _ in range(4)], dtype=float)
    >>> round(dic_random_baseline(r), 2)
    1.0
    """
    data = as_label_data(ratings)
    if n_repeats < 1:
        raise ValueError(f"n_repeats must be at least 1; got {n_repeats}")
    labels = data.values if n_labels is None else np.arange(n_labels, dtype=np.float64)
    if labels.size == 0:
        raise ValueError("n_labels must be at least 1 and ratings must hold a label")
    truth = pairwise_kappa(ratings, min_overlap=min_overlap)
    rng = np.random.default_rng(seed)
    drawn = np.full((data.n_annotators, data.n_items), np.nan)
    scores = []
    for _ in range(n_repeats):
        drawn[data.annotator, data.item] = rng.choice(labels, size=data.annotator.size)
        scores.append(dic(truth, pairwise_kappa(drawn, min_overlap=min_overlap)))
    return float(np.mean(scores))


def dic_consensus_baseline(ratings: ArrayLike, *, min_overlap: int = 2) -> float:
    r"""DIC of the Consensus baseline: every annotator gets the majority label of the item.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Integer label codes; ``np.nan`` = not annotated.
    min_overlap : int
        As in ``pairwise_kappa``.

    Returns
    -------
    float
        DIC of ``pairwise_kappa(consensus)`` (majority vote on each annotator's own items; ties
        to the lower code) against ``pairwise_kappa(ratings)``: every predicted pair agrees
        perfectly, so it is :math:`\lVert M - 1 \rVert / \lVert M \rVert` off the
        diagonal, below the Random row (about 1) only when the annotators' pair kappas average
        above about 0.5 (Zhang et al. report 0.51-0.61 on data sets of that kind, diagonal
        counted); at lower agreement it is the worse reference row, not a better one.

    Notes
    -----
    .. math:: y'_{ki} = \arg\max_c n_{ic} \text{ for every } (k, i) \text{ rated}, \qquad
              \mathrm{DIC} = \frac{\lVert M - M' \rVert_F}{\lVert M \rVert_F}

    References
    ----------
    Zhang, L. et al. (2025). A unified evaluation framework for multi-annotator tendency
    learning, Section 4.3. doi:10.48550/arXiv.2508.10393

    Examples
    --------
    >>> r = [[0, 1, 1, 0, 2, 2], [0, 1, 0, 0, 2, 1], [1, 1, 1, 0, 2, 2]]
    >>> round(dic_consensus_baseline(r), 4)
    0.9657
    """
    data = as_label_data(ratings)
    majority = data.values[np.asarray(data.item_counts().argmax(axis=1)).ravel()]
    consensus = np.full((data.n_annotators, data.n_items), np.nan)
    consensus[data.annotator, data.item] = majority[data.item]
    truth = pairwise_kappa(ratings, min_overlap=min_overlap)
    return dic(truth, pairwise_kappa(consensus, min_overlap=min_overlap))


def bae_random_baseline(
    s_true: ArrayLike, *, dim: int = 64, seed: int = 0, n_repeats: int = 10
) -> float:
    r"""BAE of the Random baseline: independent Gaussian vectors per annotator.

    Parameters
    ----------
    s_true : array_like, shape (n_annotators, n_annotators)
        Human consistency matrix.
    dim : int
        Length of the random vectors.
    seed : int
        Seed of the random generator.
    n_repeats : int
        Number of random draws averaged.

    Returns
    -------
    float
        Mean :func:`bae` of the cosine similarities of the random vectors (near 0 off the
        diagonal); Zhang et al. report 0.02-0.08.

    Notes
    -----
    .. math:: F_i \sim \mathcal{N}(0, I_{dim}), \qquad
              \mathrm{BAE}_{rand} = \frac{1}{R} \sum_r \mathrm{BAE}(\cos(F^{(r)}), S^{true})

    References
    ----------
    Zhang, L. et al. (2025). A unified evaluation framework for multi-annotator tendency
    learning, Section 4.3. doi:10.48550/arXiv.2508.10393

    Examples
    --------
    >>> s = np.full((5, 5), 0.3) + 0.7 * np.eye(5)
    >>> round(bae_random_baseline(s, dim=4096), 1)
    0.5
    """
    s = as_square(s_true, name="s_true")
    if dim < 1 or n_repeats < 1:
        raise ValueError(f"dim and n_repeats must be at least 1; got {dim} and {n_repeats}")
    rng = np.random.default_rng(seed)
    draws = [rng.standard_normal((s.shape[0], dim)) for _ in range(n_repeats)]
    return float(np.mean([bae(cosine_similarity_matrix(v), s) for v in draws]))


def bae_uniform_baseline(s_true: ArrayLike) -> float:
    r"""BAE of the Uniform baseline: one and the same vector for every annotator.

    Parameters
    ----------
    s_true : array_like, shape (n_annotators, n_annotators)
        Human consistency matrix.

    Returns
    -------
    float
        :func:`bae` of an all-ones similarity matrix; Zhang et al. report 0.15-0.23.

    Notes
    -----
    .. math:: \mathrm{BAE}_{unif} = 1 - \frac{\lVert \mathbf{1}\mathbf{1}^\top - S^{true}
              \rVert_F}{\lVert S^{true} \rVert_F}

    References
    ----------
    Zhang, L. et al. (2025). A unified evaluation framework for multi-annotator tendency
    learning, Section 4.3. doi:10.48550/arXiv.2508.10393

    Examples
    --------
    >>> s = np.full((5, 5), 0.3) + 0.7 * np.eye(5)
    >>> round(bae_uniform_baseline(s), 4)
    -0.2005
    """
    s = as_square(s_true, name="s_true")
    return bae(np.ones_like(s), s)


class DicBaeIntervals(NamedTuple):
    """DIC and BAE of a model run with percentile intervals from one item bootstrap.

    ``dic`` and each ``bae[kind]`` are :class:`~analytics.metrics.uncertainty.Interval`
    (``n`` = items resampled, ``replicates`` of shape ``(n_boot,)``); ``n_items`` = items with
    at least one cell, ``n_cells`` = (annotator, item) cells with a human label and a
    prediction: the evidence the figures rest on.
    """

    dic: Interval
    bae: dict[str, Interval]
    n_items: int
    n_cells: int


def _pair_index(k: NDArray[np.intp], l: NDArray[np.intp], m: int) -> NDArray[np.intp]:
    """Position of the pair ``k < l`` in ``np.triu_indices(m, 1)`` order."""
    return k * (2 * m - k - 1) // 2 + (l - k - 1)


def dic_bae_bootstrap(
    human: ArrayLike,
    predicted: ArrayLike,
    *,
    s_model: Mapping[str, ArrayLike] | None = None,
    min_overlap: int = 2,
    bound: float = 1.0,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: Seed = None,
) -> DicBaeIntervals:
    r"""DIC and BAE of a model run with percentile intervals from a bootstrap over items.

    Parameters
    ----------
    human, predicted : array_like, shape (n_annotators, n_items)
        Integer label codes of the annotators and the model's per-annotator predictions;
        ``np.nan`` = none. Only the cells where both are defined count (as in the registry's
        evaluation: the same cells for :math:`M` and :math:`M'`).
    s_model : mapping of str to array_like, shape (n_annotators, n_annotators), optional
        Similarity matrices of the model's per-annotator vectors per level (e.g.
        ``{"feature": ..., "attention": ...}``, :func:`cosine_similarity_matrix`; nan for
        annotators without a vector); one BAE interval per entry.
    min_overlap : int
        As in :func:`~analytics.metrics.pairwise_kappa`, in the data and in each replicate.
    bound : float
        As in :func:`dic`.
    n_boot : int
        Number of replicates.
    confidence : float
        Two-sided coverage of the percentile intervals.
    seed : int or numpy.random.Generator, optional
        Random seed; the weights are
        :func:`~analytics.metrics.uncertainty.bootstrap_weights` of the ``n_items`` items
        with a cell (in column order), so a reference loop can resample the same items.

    Returns
    -------
    DicBaeIntervals
        ``dic.estimate`` = :func:`dic` of ``pairwise_kappa(human)`` and
        ``pairwise_kappa(predicted)`` on the shared cells; ``bae[kind].estimate`` =
        :func:`bae` of ``s_model[kind]`` against the same :math:`M`; percentile bounds
        (nan replicates left out; all nan when no item has a cell).

    Notes
    -----
    Every statistic is a function of the pairs' confusion tables, which are sums over items.
    Item :math:`i` contributes to pair :math:`k < l` (both labelled it) the one-hot tables
    :math:`X_{kl,i}` (human labels) and :math:`X'_{kl,i}` (predictions), and 1 to each
    annotator's count :math:`n_{k,i}`. With multinomial weights :math:`W_{bi}` (item
    :math:`i` drawn :math:`W_{bi}` times in replicate :math:`b`),

    .. math::

        C^{(b)}_{kl} = \sum_i W_{bi} X_{kl,i}, \qquad
        m^{(b)}_{kl} = \kappa\big(C^{(b)}_{kl}\big), \qquad
        \mathrm{DIC}^{(b)} = \frac{\lVert M^{(b)} - M'^{(b)} \rVert_F}{\lVert M^{(b)} \rVert_F},
        \qquad
        \mathrm{BAE}^{(b)} = 1 - \frac{\lVert S^{model} - M^{(b)} \rVert_F}
                                      {\lVert M^{(b)} \rVert_F}

    (Zhang et al., Eqs. 1, 3, 5-7; :math:`M'^{(b)}` likewise from :math:`X'`, the diagonal
    1 where :math:`\sum_i W_{bi} n_{k,i} \ge` ``min_overlap``), exactly the figures of the
    data with each item repeated :math:`W_{bi}` times. All replicates' tables are one
    sparse-dense product of the ``(n_items, n_cells)`` contributions (only pairs
    :math:`k < l`, :math:`m_i (m_i - 1) / 2` per item with :math:`m_i` cells) with the
    weights, in chunks bounded in memory; no loop over pairs or items. The interval is the
    percentile interval (Efron & Tibshirani 1993, ch. 13).

    :math:`S^{model}` is held fixed: the registry stores one mean vector per annotator, so
    the BAE interval reflects the sampling of the human matrix :math:`M` only.

    References
    ----------
    Zhang, L., Liu, F., Sha, X., Wang, B., Liu, H. & Lian, Z. (2025). A unified evaluation
    framework for multi-annotator tendency learning. arXiv:2508.10393.
    doi:10.48550/arXiv.2508.10393

    Efron, B. & Tibshirani, R. J. (1993). An Introduction to the Bootstrap. Chapman &
    Hall/CRC. doi:10.1201/9780429246593

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.integers(0, 3, 300)
    >>> human = np.where(rng.random((5, 300)) < 0.7, truth, rng.integers(0, 3, (5, 300)))
    >>> model = np.where(rng.random((5, 300)) < 0.7, truth, rng.integers(0, 3, (5, 300)))
    >>> res = dic_bae_bootstrap(human, model, n_boot=400, seed=1)
    >>> round(res.dic.estimate, 3) == round(dic(pairwise_kappa(human), pairwise_kappa(model)), 3)
    True
    >>> bool(res.dic.low < res.dic.estimate < res.dic.high), res.n_items, res.n_cells
    (True, 300, 1500)
    """
    check_min_overlap(min_overlap)
    h = as_ratings(human, name="human")
    p = as_ratings(predicted, name="predicted")
    if h.shape != p.shape:
        raise ValueError(f"human and predicted differ in shape: {h.shape} and {p.shape}")
    m = h.shape[0]
    similarities = _similarities(s_model, m)
    both = ~np.isnan(h) & ~np.isnan(p)
    columns = np.flatnonzero(both.any(axis=0))
    n_items, n_cells = int(columns.size), int(both.sum())
    if n_items == 0:
        return _undefined(similarities)
    mask = both[:, columns]
    data_h = as_label_data(np.where(mask, h[:, columns], np.nan), name="human")
    data_p = as_label_data(np.where(mask, p[:, columns], np.nan), name="predicted")
    # both encode the same cells in the same (annotator-major) order: one pair list serves both
    item, first, second = _item_pairs(data_h)
    upper = data_h.annotator[first] < data_h.annotator[second]
    item, first, second = item[upper], first[upper], second[upper]
    pair = _pair_index(data_h.annotator[first], data_h.annotator[second], m)
    ones = np.ones(item.size)
    vh, vp = data_h.n_values, data_p.n_values
    intervals = _pair_table_bootstrap(
        human=_Tables(item, pair, data_h.code[first] * vh + data_h.code[second], ones, vh),
        model=_Tables(item, pair, data_p.code[first] * vp + data_p.code[second], ones, vp),
        rated=(data_h.item, data_h.annotator),
        shared=None,
        kappa=kappa_from_confusion,
        n_items=n_items,
        n_annotators=m,
        min_overlap=min_overlap,
        similarities=similarities,
        bound=bound,
        n_boot=n_boot,
        confidence=confidence,
        seed=seed,
    )
    return DicBaeIntervals(
        intervals[0], dict(zip(similarities, intervals[1:], strict=True)), n_items, n_cells
    )


def dic_bae_bootstrap_sda(
    item: ArrayLike,
    first: ArrayLike,
    second: ArrayLike,
    human_tables: ArrayLike,
    model_tables: ArrayLike,
    *,
    traced: tuple[ArrayLike, ArrayLike],
    n_annotators: int,
    min_items: int = 1,
    s_model: Mapping[str, ArrayLike] | None = None,
    bound: float = 1.0,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: Seed = None,
) -> DicBaeIntervals:
    r"""DIC and BAE of a trace model with percentile intervals from a bootstrap over items.

    The trace counterpart of :func:`dic_bae_bootstrap`: :math:`M` and :math:`M'` are
    kappa_SDA of every pair pooled over the items both traced (sign-coincidence tables summed
    over items, :func:`~analytics.metrics.kappa_sda_from_counts`).

    Parameters
    ----------
    item, first, second : array_like of int, shape (n_rows,)
        One row per item and pair of annotators who both traced it: the item (any integer
        id) and the two annotators' indices (different; either order).
    human_tables, model_tables : array_like, shape (n_rows, 3, 3)
        The pair's sign-coincidence table on that item
        (:func:`~analytics.metrics.sign_coincidence_matrix`) from the annotators' traces and
        from the model's traces for them.
    traced : tuple of two array_like of int, shape (n_cells,)
        ``(item, annotator)`` of every trace the figures use (annotators alone on an item
        included): an annotator's diagonal is defined from ``min_items`` traced items.
    n_annotators : int
        Size of the matrices.
    min_items : int
        Pairs sharing fewer items (in the data, and in each replicate) get no kappa_SDA.
    s_model, bound, n_boot, confidence, seed
        As in :func:`dic_bae_bootstrap`; the weights are
        :func:`~analytics.metrics.uncertainty.bootstrap_weights` of the distinct items of
        ``traced`` in increasing order.

    Returns
    -------
    DicBaeIntervals
        As :func:`dic_bae_bootstrap`; ``n_items`` = distinct items traced, ``n_cells`` =
        traces.

    Notes
    -----
    With :math:`T_{kl,i}` the table of pair :math:`k < l` on item :math:`i` and multinomial
    item weights :math:`W_{bi}`:

    .. math:: m^{(b)}_{kl} = \kappa_{SDA}\Big(\sum_i W_{bi} T_{kl,i}\Big)

    defined where :math:`\sum_i W_{bi} [k, l \text{ traced } i] \ge` ``min_items``; DIC
    and BAE of each replicate as in :func:`dic_bae_bootstrap` (Zhang et al., Eqs. 3, 5-7).
    Items, not steps, are resampled: the steps of one trace are serially correlated, the
    items are the independent units (Efron & Tibshirani 1993, ch. 13).

    References
    ----------
    Booth, B. M. & Narayanan, S. S. (2020). Trapezoidal segment sequencing. ICMI 2020.
    doi:10.1145/3382507.3418860

    Zhang, L. et al. (2025). A unified evaluation framework for multi-annotator tendency
    learning. arXiv:2508.10393. doi:10.48550/arXiv.2508.10393

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> signs = lambda n: rng.integers(0, 3, n)
    >>> def table(a, b):
    ...     return np.bincount(a * 3 + b, minlength=9).reshape(3, 3)
    >>> rows, human, model = [], [], []
    >>> for i in range(30):
    ...     truth = signs(40)
    ...     x = [np.where(rng.random(40) < 0.8, truth, signs(40)) for _ in range(3)]
    ...     y = [np.where(rng.random(40) < 0.6, truth, signs(40)) for _ in range(3)]
    ...     for k, l in ((0, 1), (0, 2), (1, 2)):
    ...         rows.append((i, k, l))
    ...         human.append(table(x[k], x[l]))
    ...         model.append(table(y[k], y[l]))
    >>> i, k, l = np.array(rows).T
    >>> cells = (np.repeat(np.arange(30), 3), np.tile(np.arange(3), 30))
    >>> res = dic_bae_bootstrap_sda(i, k, l, human, model, traced=cells, n_annotators=3,
    ...                             n_boot=300, seed=0)
    >>> bool(res.dic.low <= res.dic.estimate <= res.dic.high), res.n_items, res.n_cells
    (True, 30, 90)
    """
    if isinstance(min_items, bool) or not isinstance(min_items, int | np.integer) or min_items < 1:
        raise ValueError(f"min_items must be a positive integer; got {min_items!r}")
    m = int(n_annotators)
    rows = [np.asarray(a, dtype=np.intp).ravel() for a in (item, first, second)]
    th = np.asarray(human_tables, dtype=np.float64).reshape(-1, 3, 3)
    tp = np.asarray(model_tables, dtype=np.float64).reshape(-1, 3, 3)
    cell_item, cell_annotator = (np.asarray(a, dtype=np.intp).ravel() for a in traced)
    if len({a.size for a in rows} | {th.shape[0], tp.shape[0]}) != 1:
        raise ValueError("item, first, second and both tables need one row per item and pair")
    if cell_item.size != cell_annotator.size:
        raise ValueError("traced needs as many items as annotators")
    k, l = np.minimum(rows[1], rows[2]), np.maximum(rows[1], rows[2])
    annotators = np.concatenate([k, l, cell_annotator])
    if (k == l).any() or (annotators.size and (annotators.min() < 0 or annotators.max() >= m)):
        raise ValueError(f"annotators must be different indices in 0..{m - 1}")
    if np.isin(rows[0], cell_item, invert=True).any():
        raise ValueError("every item of a pair must be among the traced items")
    similarities = _similarities(s_model, m)
    ids, cell_item = np.unique(cell_item, return_inverse=True)
    if ids.size == 0:
        return _undefined(similarities)
    pair_item = np.searchsorted(ids, rows[0])
    swapped = rows[1] > rows[2]  # kappa_SDA is symmetric, but keep tables as (first, second)
    th[swapped], tp[swapped] = th[swapped].transpose(0, 2, 1), tp[swapped].transpose(0, 2, 1)
    pair = _pair_index(k, l, m)
    entry_item, entry_pair = np.repeat(pair_item, 9), np.repeat(pair, 9)  # 9 cells per table
    entry_cell = np.tile(np.arange(9), pair.size)
    intervals = _pair_table_bootstrap(
        human=_Tables(entry_item, entry_pair, entry_cell, th.reshape(-1), 3),
        model=_Tables(entry_item, entry_pair, entry_cell, tp.reshape(-1), 3),
        rated=(cell_item, cell_annotator),
        shared=(pair_item, pair),
        kappa=kappa_sda_from_counts,
        n_items=int(ids.size),
        n_annotators=m,
        min_overlap=int(min_items),
        similarities=similarities,
        bound=bound,
        n_boot=n_boot,
        confidence=confidence,
        seed=seed,
    )
    return DicBaeIntervals(
        intervals[0],
        dict(zip(similarities, intervals[1:], strict=True)),
        int(ids.size),
        int(cell_item.size),
    )


def mean_accuracy_bootstrap(
    human: ArrayLike,
    predicted: ArrayLike,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: Seed = None,
) -> Interval:
    r"""Mean per-annotator accuracy of predictions, with a percentile interval from a
    bootstrap over items.

    Parameters
    ----------
    human, predicted : array_like, shape (n_annotators, n_items)
        Label codes; ``np.nan`` = no label / no prediction. Only cells with both count.
    n_boot : int
        Number of replicates.
    confidence : float
        Two-sided coverage.
    seed : int or numpy.random.Generator, optional
        Random seed; the weights are :func:`~analytics.metrics.uncertainty.bootstrap_weights`
        of the items with a cell, in column order: the same as :func:`dic_bae_bootstrap`'s
        for the same data and seed, so the replicates pair with its DIC replicates.

    Returns
    -------
    Interval
        ``estimate`` = the mean over annotators with a compared cell of their accuracy,
        ``low``/``high`` (percentile interval), ``n`` = items with a cell, the replicates;
        all nan (``n`` 0) when no cell is shared.

    Notes
    -----
    With :math:`c_{ki} = 1` when annotator :math:`k` labelled item :math:`i` and the model
    predicted it, :math:`h_{ki} = 1` when the two labels agree, and :math:`W_{bi}` the number
    of times replicate :math:`b` draws item :math:`i`:

    .. math:: \bar a^{(b)} = \frac{1}{|K_b|} \sum_{k \in K_b}
              \frac{\sum_i W_{bi} h_{ki}}{\sum_i W_{bi} c_{ki}}, \qquad
              K_b = \{k : \textstyle\sum_i W_{bi} c_{ki} > 0\}

    (Zhang et al. 2025, Table 2's accuracy, averaged over annotators). The item is the
    resampled unit, as for DIC, since one item's labels are shared by all annotators; all
    replicates are one product of the weights with the ``(n_items, 2 n_annotators)`` counts.

    References
    ----------
    Zhang, L., Liu, F., Sha, X., Wang, B., Liu, H. & Lian, Z. (2025). A unified evaluation
    framework for multi-annotator tendency learning. arXiv:2508.10393.
    doi:10.48550/arXiv.2508.10393

    Efron, B. & Tibshirani, R. J. (1993). An Introduction to the Bootstrap. Chapman &
    Hall/CRC. doi:10.1201/9780429246593

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> human = rng.integers(0, 3, (4, 200)).astype(float)
    >>> model = np.where(rng.random((4, 200)) < 0.8, human, (human + 1) % 3)
    >>> res = mean_accuracy_bootstrap(human, model, n_boot=400, seed=1)
    >>> round(res.estimate, 3), bool(res.low < res.estimate < res.high), res.n
    (0.801, True, 200)
    """
    h = as_ratings(human, name="human")
    p = as_ratings(predicted, name="predicted")
    if h.shape != p.shape:
        raise ValueError(f"human and predicted differ in shape: {h.shape} and {p.shape}")
    both = ~np.isnan(h) & ~np.isnan(p)
    columns = np.flatnonzero(both.any(axis=0))
    if columns.size == 0:
        return Interval(math.nan, math.nan, math.nan, 0, np.full(_check_n_boot(n_boot), np.nan))
    m = h.shape[0]
    hits = both & (h == p)
    features = np.hstack([hits[:, columns].T, both[:, columns].T]).astype(float)

    def statistic(sums: NDArray[np.float64]) -> NDArray[np.float64]:
        right, compared = sums[:, :m], sums[:, m:]
        with np.errstate(invalid="ignore", divide="ignore"):
            accuracy = np.where(compared > 0, right / compared, np.nan)
        counted = np.isfinite(accuracy)
        total = np.where(counted, accuracy, 0.0).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return total / counted.sum(axis=1)

    estimate, replicates = _item_bootstrap(features, statistic, n_boot=n_boot, seed=seed)
    return _percentile_interval(float(estimate), replicates, int(columns.size), confidence)


def paired_difference(
    replicates_a: ArrayLike,
    replicates_b: ArrayLike,
    *,
    estimate_a: float,
    estimate_b: float,
    confidence: float = 0.95,
) -> Interval:
    r"""Difference of two figures with a percentile interval from paired bootstrap replicates.

    Parameters
    ----------
    replicates_a, replicates_b : array_like, shape (n_boot,)
        Replicates of the two figures from the *same* resamples (e.g. :func:`dic_bae_bootstrap`
        of two runs on the same answers, items and seed: replicate ``b`` of both drew the same
        items).
    estimate_a, estimate_b : float
        The figures on the data.
    confidence : float
        Two-sided coverage.

    Returns
    -------
    Interval
        ``estimate`` = ``estimate_a - estimate_b``, percentile bounds of the replicate
        differences (pairs with a nan left out), ``n`` = replicate pairs used.

    Notes
    -----
    .. math:: \Delta^{(b)} = \theta_A^{(b)} - \theta_B^{(b)}

    Pairing removes the variation the two figures share (which items were drawn), so the
    interval of :math:`\Delta` is narrower than the two figures' own intervals suggest; two
    runs are distinguishable when it excludes 0 (Efron & Tibshirani 1993, ch. 13).

    References
    ----------
    Efron, B. & Tibshirani, R. J. (1993). An Introduction to the Bootstrap. Chapman &
    Hall/CRC. doi:10.1201/9780429246593

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> shared = rng.normal(0, 0.05, 1000)  # both figures move with the items drawn
    >>> a, b = 0.60 + shared, 0.58 + shared + rng.normal(0, 0.005, 1000)
    >>> d = paired_difference(a, b, estimate_a=0.60, estimate_b=0.58)
    >>> round(d.estimate, 2), bool(d.low > 0)
    (0.02, True)
    """
    a = np.asarray(replicates_a, dtype=np.float64).ravel()
    b = np.asarray(replicates_b, dtype=np.float64).ravel()
    if a.size != b.size or a.size == 0:
        raise ValueError(f"paired replicates need one non-empty length; got {a.size} and {b.size}")
    difference = a - b
    finite = np.isfinite(difference)
    if not finite.any():
        return Interval(estimate_a - estimate_b, math.nan, math.nan, 0, difference)
    return _percentile_interval(
        float(estimate_a - estimate_b), difference[finite], int(finite.sum()), confidence
    )


class _Tables(NamedTuple):
    """Per-item contributions to the pairs' tables: entry ``e`` adds ``amount[e]`` to cell
    ``cell[e]`` (``a * n_values + b``) of pair ``pair[e]``'s table on item ``item[e]``."""

    item: NDArray[np.intp]
    pair: NDArray[np.intp]
    cell: NDArray[np.intp]
    amount: NDArray[np.float64]
    n_values: int


def _similarities(
    s_model: Mapping[str, ArrayLike] | None, m: int
) -> dict[str, NDArray[np.float64]]:
    similarities = {
        kind: as_square(s, name=f"s_model[{kind!r}]") for kind, s in (s_model or {}).items()
    }
    for kind, s in similarities.items():
        if s.shape[0] != m:
            raise ValueError(f"s_model[{kind!r}] must be {m} x {m}; got {s.shape}")
    return similarities


def _undefined(similarities: Mapping[str, object]) -> DicBaeIntervals:
    nan = Interval(math.nan, math.nan, math.nan, 0, np.zeros(0))
    return DicBaeIntervals(nan, dict.fromkeys(similarities, nan), 0, 0)


def _pair_table_bootstrap(
    *,
    human: _Tables,
    model: _Tables,
    rated: tuple[NDArray[np.intp], NDArray[np.intp]],
    shared: tuple[NDArray[np.intp], NDArray[np.intp]] | None,
    kappa: Callable[[NDArray[np.float64]], float | NDArray[np.float64]],
    n_items: int,
    n_annotators: int,
    min_overlap: int,
    similarities: Mapping[str, NDArray[np.float64]],
    bound: float,
    n_boot: int,
    confidence: float,
    seed: Seed,
) -> list[Interval]:
    """DIC and each BAE with percentile intervals from item-weighted sums of pair tables.

    Columns of the ``(n_items, ...)`` contributions: the human tables, the model's, each
    annotator's items (``rated``: the diagonal) and, when ``shared`` is given, each pair's
    shared items (else the human table's total is the overlap, as for confusion tables).
    """
    if not bound > 0:
        raise ValueError(f"bound must be positive; got {bound}")
    n_boot = _check_n_boot(n_boot)
    m = n_annotators
    n_pairs, vh, vp = m * (m - 1) // 2, human.n_values, model.n_values
    human_at = n_pairs * vh * vh
    counts_at = human_at + n_pairs * vp * vp
    shared_at = counts_at + m
    blocks = [
        (human.item, human.pair * vh * vh + human.cell, human.amount),
        (model.item, human_at + model.pair * vp * vp + model.cell, model.amount),
        (rated[0], counts_at + rated[1], np.ones(rated[0].size)),
    ]
    if shared is not None:
        blocks.append((shared[0], shared_at + shared[1], np.ones(shared[0].size)))
    rows, column, value = (np.concatenate(parts) for parts in zip(*blocks, strict=True))
    keep = value != 0
    features, used = _features(rows[keep], column[keep], value[keep], n_items)
    width = shared_at + (n_pairs if shared is not None else 0)
    upper_k, upper_l = np.triu_indices(m, 1)
    diagonal = np.arange(m)

    def statistic(sums: NDArray[np.float64]) -> NDArray[np.float64]:
        """``(b, 1 + n_kinds)``: DIC and each BAE of every replicate's summed contributions."""
        cells = np.zeros((sums.shape[0], width))
        cells[:, used] = sums
        b = sums.shape[0]  # explicit: with one annotator there are no pairs (size 0)
        tables_h = cells[:, :human_at].reshape(b, n_pairs, vh, vh)
        tables_p = cells[:, human_at:counts_at].reshape(b, n_pairs, vp, vp)
        overlap = tables_h.sum(axis=(-2, -1)) if shared is None else cells[:, shared_at:]
        diag = np.where(cells[:, counts_at:shared_at] >= min_overlap, 1.0, np.nan)
        matrices = []
        for tables in (tables_h, tables_p):
            with np.errstate(divide="ignore", invalid="ignore"):
                values = np.asarray(kappa(tables), dtype=float)
            values[overlap < min_overlap] = np.nan
            full = np.empty((sums.shape[0], m, m))
            full[:, upper_k, upper_l] = values
            full[:, upper_l, upper_k] = values
            full[:, diagonal, diagonal] = diag
            matrices.append(full)
        m_true, m_pred = matrices
        out = [_dic_stack(m_true, m_pred, bound)]
        out += [1.0 - _frobenius_ratios(m_true, s[None]) for s in similarities.values()]
        return np.stack(out, axis=-1)

    per_chunk = max(1, _BATCH // width)

    def replicates(weights: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.concatenate(
            [
                statistic(_replicate_sums(features, weights[lo : lo + per_chunk]))
                for lo in range(0, weights.shape[0], per_chunk)
            ]
        )

    estimate = replicates(np.ones((1, n_items)))[0]
    drawn = np.concatenate([replicates(w) for w in _weight_chunks(n_items, n_boot, seed)])
    return [
        _percentile_interval(float(estimate[j]), drawn[:, j], n_items, confidence)
        for j in range(drawn.shape[1])
    ]
