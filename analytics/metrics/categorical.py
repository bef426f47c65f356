"""Chance-corrected agreement on categorical labels: Cohen's and Fleiss' kappa, label skew.

Every annotator pair is handled at once: with the one-hot matrix ``X`` of the ratings, of shape
``(n_annotators * n_values, n_items)``, the Gram matrix ``X @ X.T`` holds the confusion matrix
of every pair on exactly the items both annotated (so the marginals of a pair are counted on
that pair's overlap only); it is accumulated from each item's index pairs, without a loop over
annotator pairs. :func:`kappa_from_confusion` turns any stack of
confusion matrices into kappas; :func:`cohen_kappa`, :func:`pairwise_kappa` and the dashboard
(which stores per-pair confusion counts) all go through it.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial.distance import jensenshannon

from analytics.metrics._validate import LabelData, as_label_data, check_min_overlap

Weights = Literal["linear", "quadratic"] | None

_BATCH = 1 << 22
"""Index pairs counted per batch in :func:`_confusions` (bounds its temporary memory)."""

__all__ = [
    "cohen_kappa",
    "fleiss_kappa",
    "kappa_from_confusion",
    "label_distribution",
    "label_skew",
    "pairwise_confusion",
    "pairwise_kappa",
]


def _disagreement_weights(values: NDArray[np.float64], weights: Weights) -> NDArray[np.float64]:
    """``(V, V)`` disagreement weights between value codes: 0 on the diagonal."""
    diff = values[:, None] - values[None, :]
    if weights is None:
        return (diff != 0).astype(np.float64)
    if weights == "linear":
        return np.abs(diff)
    if weights == "quadratic":
        return diff**2
    raise ValueError(f"weights must be None, 'linear' or 'quadratic'; got {weights!r}")


def _confusions(data: LabelData) -> NDArray[np.float64]:
    """``(M, M, V, V)`` confusion counts of every annotator pair on the items both rated.

    This is the Gram matrix ``X @ X.T`` of the one-hot ratings, accumulated item by item: the
    ratings of the items with ``s`` ratings form an ``(n_items_s, s)`` block of row indices
    ``k * V + a`` whose ``s * s`` index pairs are counted at once (in batches of at most
    ``_BATCH`` pairs). Several times faster than a sparse matrix product on crowd-sized data.
    """
    m, v = data.n_annotators, data.n_values
    rows = (data.annotator * v + data.code)[np.argsort(data.item, kind="stable")]
    sizes = np.bincount(data.item, minlength=data.n_items)
    starts = np.cumsum(sizes) - sizes
    gram = np.zeros(m * v * m * v, dtype=np.int64)
    for size in np.unique(sizes[sizes > 0]):
        first = starts[sizes == size]
        step = max(1, _BATCH // size**2)
        for lo in range(0, first.size, step):
            block = rows[first[lo : lo + step, None] + np.arange(size)]
            np.add.at(gram, (block[:, :, None] * (m * v) + block[:, None, :]).ravel(), 1)
    return gram.reshape(m, v, m, v).transpose(0, 2, 1, 3).astype(np.float64)


def _annotator_counts(data: LabelData) -> NDArray[np.float64]:
    """``(M, V)`` number of times each annotator used each value."""
    cells = data.annotator * data.n_values + data.code
    counts = np.bincount(cells, minlength=data.n_annotators * data.n_values)
    return counts.reshape(data.n_annotators, data.n_values).astype(np.float64)


def kappa_from_confusion(
    confusion: ArrayLike,
    *,
    weights: Weights = None,
    values: ArrayLike | None = None,
) -> float | NDArray[np.float64]:
    r"""Cohen's kappa from one confusion matrix, or from a stack of them.

    Parameters
    ----------
    confusion : array_like, shape (..., n_values, n_values)
        Counts: ``confusion[..., a, b]`` = items the first rater labelled ``values[a]`` and the
        second ``values[b]``. Leading axes are batch axes (e.g. ``(M, M)`` annotator pairs).
    weights : {None, "linear", "quadratic"}
        Disagreement weights; None = unweighted (nominal) kappa.
    values : array_like, shape (n_values,), optional
        Numeric codes of the rows/columns, used for the weighted distances
        (default ``0 .. n_values - 1``).

    Returns
    -------
    float or ndarray of shape (...)
        Kappa; nan where it is undefined (no items, or expected disagreement 0, i.e.
        :math:`p_e = 1`).

    Notes
    -----
    With confusion :math:`O`, :math:`n = \sum O`, expected counts
    :math:`E_{ab} = O_{a\cdot} O_{\cdot b} / n` and disagreement weights :math:`w_{ab}`
    (:math:`1 - \delta_{ab}`, :math:`|v_a - v_b|` or :math:`(v_a - v_b)^2`):

    .. math:: \kappa = 1 - \frac{\sum_{ab} w_{ab} O_{ab}}{\sum_{ab} w_{ab} E_{ab}}

    which for unweighted kappa is :math:`(p_o - p_e) / (1 - p_e)`.

    References
    ----------
    Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational and
    Psychological Measurement 20(1), 37-46. doi:10.1177/001316446002000104

    Cohen, J. (1968). Weighted kappa. Psychological Bulletin 70(4), 213-220.
    doi:10.1037/h0026256

    Examples
    --------
    >>> round(kappa_from_confusion([[20, 5], [10, 15]]), 4)
    0.4
    >>> kappa_from_confusion([[[4, 0], [0, 0]], [[2, 1], [1, 2]]]).round(4)
    array([   nan, 0.3333])
    """
    conf = np.asarray(confusion, dtype=np.float64)
    if conf.ndim < 2 or conf.shape[-1] != conf.shape[-2]:
        raise ValueError(
            f"confusion must have shape (..., n_values, n_values); got shape {conf.shape}"
        )
    if conf.size and not conf.min() >= 0:  # one pass; a nan fails it too
        raise ValueError("confusion must hold non-negative counts")
    n_values = conf.shape[-1]
    codes = np.arange(n_values, dtype=np.float64) if values is None else np.asarray(values, float)
    if codes.shape != (n_values,):
        raise ValueError(f"values must have shape ({n_values},); got shape {codes.shape}")
    w = _disagreement_weights(codes, weights)
    # einsum, not ndarray.sum over the last axes: with (M, M) pairs of 3 x 3 tables the
    # reductions over a short axis took 44 of the 79 ms at 512 annotators; this takes 17
    n = np.einsum("...ab->...", conf)
    observed = np.einsum("...ab,ab->...", conf, w)
    rows, cols = np.einsum("...ab->...a", conf), np.einsum("...ab->...b", conf)
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.einsum("...b,...b->...", rows @ w, cols) / n
        kappa = np.where(expected > 0, 1.0 - observed / expected, np.nan)
    return float(kappa) if kappa.ndim == 0 else kappa


def pairwise_confusion(
    ratings: ArrayLike, *, values: ArrayLike | None = None
) -> NDArray[np.float64]:
    r"""Confusion counts of every annotator pair on the items both annotated.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Integer label codes; ``np.nan`` = not annotated.
    values : array_like, shape (n_values,), optional
        Label domain (strictly increasing); default the codes observed. Fix it when the counts
        are stored and added up over time.

    Returns
    -------
    ndarray, shape (n_annotators, n_annotators, n_values, n_values)
        ``C[k, l, a, b]`` = items annotator ``k`` labelled ``values[a]`` and ``l`` labelled
        ``values[b]``; ``C[k, l].sum()`` is the overlap of ``k`` and ``l``.

    Notes
    -----
    With the one-hot matrix :math:`X_{(k,a),i} = [y_{ki} = a]`, all counts are one Gram
    matrix, accumulated from each item's pairs of ratings (time :math:`O(\sum_i n_i^2)`,
    memory :math:`O(M^2 V^2)`):

    .. math:: C_{klab} = \sum_i X_{(k,a),i} X_{(l,b),i} = (X X^\top)_{(k,a),(l,b)}

    Examples
    --------
    >>> c = pairwise_confusion([[0, 1, 1, np.nan], [0, 1, 0, 1]])
    >>> c[0, 1]
    array([[1., 0.],
           [1., 1.]])
    """
    return _confusions(as_label_data(ratings, values=values))


def cohen_kappa(y1: ArrayLike, y2: ArrayLike, *, weights: Weights = None) -> float:
    r"""Cohen's kappa of two annotators on the items both annotated.

    Parameters
    ----------
    y1, y2 : array_like, shape (n_items,)
        Integer label codes; ``np.nan`` = not annotated (the item is skipped).
    weights : {None, "linear", "quadratic"}
        Disagreement weights, from the distance between the codes themselves.

    Returns
    -------
    float
        Kappa; nan when undefined: no shared item, or :math:`p_e = 1` (both annotators
        used one and the same label).

    Notes
    -----
    .. math:: \kappa = \frac{p_o - p_e}{1 - p_e} = 1 - \frac{\sum w_{ab} O_{ab}}{\sum w_{ab} E_{ab}}

    See :func:`kappa_from_confusion`. Equals ``sklearn.metrics.cohen_kappa_score`` on the
    shared items. For weighted kappa scikit-learn takes distances between the *ranks* of the
    labels present, this function between the codes: the two agree whenever the codes present
    are consecutive integers, and always agree with ``cohen_kappa_score(...,
    labels=np.arange(lo, hi + 1))``.

    References
    ----------
    Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational and
    Psychological Measurement 20(1), 37-46. doi:10.1177/001316446002000104

    Examples
    --------
    >>> round(cohen_kappa([0, 1, 1, 2, 2, 0], [0, 1, 2, 2, 2, 1]), 4)
    0.5
    >>> round(cohen_kappa([0, 1, 1, 2, 2, 0], [0, 1, 2, 2, 2, 1], weights="linear"), 4)
    0.625
    >>> cohen_kappa([1, 1, np.nan], [1, 1, 0])
    nan
    """
    a = np.asarray(y1, dtype=np.float64)
    b = np.asarray(y2, dtype=np.float64)
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"y1 and y2 must be 1-D; got shapes {a.shape} and {b.shape}")
    if a.shape != b.shape:
        raise ValueError(f"y1 and y2 must have the same length; got {a.size} and {b.size}")
    data = as_label_data(np.vstack([a, b]), name="y1/y2")
    return float(kappa_from_confusion(_confusions(data)[0, 1], weights=weights, values=data.values))


def pairwise_kappa(
    ratings: ArrayLike, *, min_overlap: int = 2, weights: Weights = None
) -> NDArray[np.float64]:
    r"""Cohen's kappa of every annotator pair on the items both annotated.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Integer label codes; ``np.nan`` = not annotated.
    min_overlap : int
        Pairs sharing fewer items get nan.
    weights : {None, "linear", "quadratic"}
        Disagreement weights, from the distance between the codes (see :func:`cohen_kappa`).

    Returns
    -------
    ndarray, shape (n_annotators, n_annotators)
        Symmetric; entry ``(k, l)`` equals ``cohen_kappa(ratings[k], ratings[l])``; nan where
        the overlap is below ``min_overlap`` or kappa is undefined. The diagonal is 1.0 for
        every annotator with at least ``min_overlap`` ratings and nan for the others: an
        annotator who labelled nothing has no consistency with anyone, themselves included,
        so matrix comparisons over annotators (DIC, BAE, MDS maps) leave them out (Zhang et
        al. define :math:`M` over the annotators who labelled).

    Notes
    -----
    The confusion of each pair comes from :func:`pairwise_confusion` (one Gram matrix, no
    loop over pairs), so each pair's marginals are counted on its own overlap; then for each
    pair :math:`(k, l)`

    .. math:: \kappa_{kl} = 1 - \frac{\sum_{ab} w_{ab} C_{klab}}
              {\sum_{ab} w_{ab} C_{kla\cdot} C_{kl\cdot b} / n_{kl}}

    References
    ----------
    Cohen, J. (1960). A coefficient of agreement for nominal scales. Educational and
    Psychological Measurement 20(1), 37-46. doi:10.1177/001316446002000104

    Zhang, L. et al. (2025). A unified evaluation framework for multi-annotator tendency
    learning (Eq. 1). arXiv:2508.10393. doi:10.48550/arXiv.2508.10393

    Examples
    --------
    >>> r = [[0, 1, 1, 0, np.nan], [0, 1, 0, 0, 1], [np.nan, np.nan, np.nan, 1, 1]]
    >>> pairwise_kappa(r).round(3)
    array([[1. , 0.5, nan],
           [0.5, 1. , 0. ],
           [nan, 0. , 1. ]])
    >>> pairwise_kappa([[0, 1, 1], [1, 1, 0], [np.nan] * 3]).round(3)
    array([[ 1. , -0.5,  nan],
           [-0.5,  1. ,  nan],
           [ nan,  nan,  nan]])
    """
    check_min_overlap(min_overlap)
    data = as_label_data(ratings)
    confusion = _confusions(data)
    kappa = np.asarray(kappa_from_confusion(confusion, weights=weights, values=data.values))
    overlap = confusion.sum(axis=(2, 3))
    kappa[overlap < min_overlap] = np.nan
    kappa[np.diag_indices_from(kappa)] = np.where(np.diag(overlap) >= min_overlap, 1.0, np.nan)
    return kappa


def fleiss_kappa(ratings: ArrayLike) -> float:
    r"""Fleiss' kappa of a study where each item may have its own raters.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Integer label codes; ``np.nan`` = not annotated. Items with fewer than 2 ratings are
        dropped.

    Returns
    -------
    float
        Kappa; nan when no item has 2 ratings or :math:`P_e = 1` (a single label used).

    Notes
    -----
    With :math:`n_{ij}` raters putting item :math:`i` in category :math:`j` and
    :math:`n_i = \sum_j n_{ij}` (items with :math:`n_i \ge 2`, :math:`N` of them):

    .. math::

        P_i = \frac{\sum_j n_{ij}(n_{ij} - 1)}{n_i (n_i - 1)}, \quad
        \bar P = \frac{1}{N} \sum_i P_i, \quad
        p_j = \frac{\sum_i n_{ij}}{\sum_i n_i}, \quad
        P_e = \sum_j p_j^2, \quad
        \kappa = \frac{\bar P - P_e}{1 - P_e}

    When every item has the same number of ratings this is Fleiss (1971) exactly (and
    ``statsmodels.stats.inter_rater.fleiss_kappa(table, method="fleiss")``). With unequal
    counts each item's agreement :math:`P_i` uses its own :math:`n_i` and items weigh equally
    in :math:`\bar P`, while :math:`p_j` pools all ratings of the kept items: the usual
    generalisation to unequal numbers of raters.

    References
    ----------
    Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters. Psychological
    Bulletin 76(5), 378-382. doi:10.1037/h0031619

    Examples
    --------
    >>> r = [[0, 1, 2, 1], [0, 1, 2, 0], [0, 1, 1, 0]]
    >>> round(fleiss_kappa(r), 4)
    0.4667
    """
    counts = as_label_data(ratings).item_counts()
    n_i = counts.sum(axis=1)
    keep = n_i >= 2
    if not keep.any():
        return float("nan")
    counts, n_i = counts[keep], n_i[keep]
    p_i = (counts.multiply(counts).sum(axis=1) - n_i) / (n_i * (n_i - 1))
    return float(_fleiss_from_sums(np.sum(keep), p_i.sum(), counts.sum(axis=0)))


def _fleiss_from_sums(
    n_items: ArrayLike, sum_agreement: ArrayLike, label_counts: ArrayLike
) -> NDArray[np.float64]:
    """Fleiss' kappa from item sums: the number of items, :math:`\\sum_i P_i` and the label
    counts :math:`\\sum_i n_{ij}` (leading batch axes allowed, e.g. bootstrap replicates with
    weighted sums); nan where no item counts or :math:`P_e = 1`."""
    counts = np.asarray(label_counts, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_j = counts / counts.sum(axis=-1, keepdims=True)
        p_e = np.sum(p_j**2, axis=-1)
        p_bar = np.asarray(sum_agreement, dtype=np.float64) / np.asarray(n_items, np.float64)
        return np.where(p_e < 1.0, (p_bar - p_e) / (1.0 - p_e), np.nan)


def label_distribution(ratings: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Share of each label in each annotator's ratings.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Integer label codes; ``np.nan`` = not annotated.

    Returns
    -------
    values : ndarray, shape (n_values,)
        The label codes observed, increasing.
    shares : ndarray, shape (n_annotators, n_values)
        :math:`p_{kc} = n_{kc} / \sum_c n_{kc}`; rows of annotators with no rating are nan.

    Examples
    --------
    >>> values, shares = label_distribution([[0, 0, 1, 2], [1, 1, np.nan, 1]])
    >>> values
    array([0., 1., 2.])
    >>> shares
    array([[0.5 , 0.25, 0.25],
           [0.  , 1.  , 0.  ]])
    """
    data = as_label_data(ratings)
    counts = _annotator_counts(data)
    with np.errstate(invalid="ignore"):
        return data.values, counts / counts.sum(axis=1, keepdims=True)


def label_skew(ratings: ArrayLike) -> NDArray[np.float64]:
    r"""Label distribution skew: how far each annotator's labels are from their colleagues'.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Integer label codes; ``np.nan`` = not annotated.

    Returns
    -------
    ndarray, shape (n_annotators,)
        Jensen-Shannon distance (base 2, in [0, 1]) between the annotator's label distribution
        :math:`p_k` and the distribution :math:`q_k` of the labels the *other* annotators gave
        to the same items; 0 = same mix of labels. nan when the annotator has no rating or no
        colleague rated their items.

    Notes
    -----
    Comparing with the others on the same items (not the whole study) keeps a rotating panel
    design from passing item mix off as annotator bias. With :math:`m = (p + q)/2`:

    .. math:: \mathrm{JSD}(p, q) =
              \sqrt{\tfrac12 \mathrm{KL}(p \| m) + \tfrac12 \mathrm{KL}(q \| m)}

    References
    ----------
    Lin, J. (1991). Divergence measures based on the Shannon entropy. IEEE Transactions on
    Information Theory 37(1), 145-151. doi:10.1109/18.61115

    Examples
    --------
    >>> r = [[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 1, 1]]
    >>> label_skew(r).round(3)
    array([0.221, 0.221, 0.558])
    """
    data = as_label_data(ratings)
    own = _annotator_counts(data)
    others = (data.annotated() @ data.item_counts()).toarray() - own
    skew = np.full(data.n_annotators, np.nan)
    ok = (own.sum(axis=1) > 0) & (others.sum(axis=1) > 0)
    if ok.any():
        skew[ok] = jensenshannon(own[ok], others[ok], base=2, axis=1)
    return skew
