"""Absolute Annotation Difference (AAD) and its RMSE variant (Du & Hoste).

Ratings are numbers on a scale (Eq. 1: valence 1-5, sentiment -1/0/1) or label codes projected
into a space by ``coordinates`` (Eq. 2: emotion labels in the valence-arousal plane). Pairwise
views come from the per-pair confusion counts of
:func:`analytics.metrics.categorical.pairwise_confusion`, so every annotator pair is handled at
once; they suit scales with few distinct values (memory grows with
``n_values ** 2``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from analytics.metrics._validate import as_label_data, as_ratings
from analytics.metrics.categorical import _confusions

Coordinates = Mapping[float, Sequence[float]]

__all__ = [
    "EMOTION_COORDINATES",
    "aad",
    "aad_histogram",
    "aad_rmse",
    "aad_rmse_per_item",
    "annotator_mean_aad",
    "intra_annotator_aad",
    "pairwise_aad",
]

#: Du & Hoste (2025), Appendix A, Table 8: averaged (valence, arousal) of the seven emotion
#: labels, each on a 1-5 scale. Map your label codes to these, e.g.
#: ``{code: EMOTION_COORDINATES[name] for code, name in enumerate(label_names)}``.
EMOTION_COORDINATES: dict[str, tuple[float, float]] = {
    "confusion": (3.0, 2.9),
    "contentment": (3.8, 3.0),
    "disappointment": (2.0, 2.8),
    "disgust": (2.0, 3.2),
    "joy": (4.1, 3.6),
    "neutral": (3.0, 3.0),
    "surprise": (3.6, 3.4),
}


def _points(values: NDArray[np.float64], coordinates: Coordinates | None) -> NDArray[np.float64]:
    """``values`` as points ``(..., D)``: the value itself (D = 1) or its coordinates; nan
    (not annotated) becomes a nan point."""
    if coordinates is None:
        return values[..., None]
    if not coordinates:
        raise ValueError("coordinates is empty")
    if len({len(point) for point in coordinates.values()}) != 1:
        raise ValueError("every label in coordinates needs a point of the same dimension")
    keys = np.array(sorted(coordinates), dtype=np.float64)
    table = np.array([coordinates[k] for k in sorted(coordinates)], dtype=np.float64)
    observed = ~np.isnan(values)
    idx = np.minimum(np.searchsorted(keys, values[observed]), keys.size - 1)
    unknown = keys[idx] != values[observed]
    if unknown.any():
        raise ValueError(f"label {float(values[observed][unknown][0])} has no coordinates")
    points = np.full((*values.shape, table.shape[1]), np.nan)
    points[observed] = table[idx]
    return points


def _pair_distances(
    ratings: ArrayLike, coordinates: Coordinates | None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-pair confusion ``(M, M, V, V)`` and the ``(V, V)`` distances between the values."""
    data = as_label_data(ratings, integer=False)
    points = _points(data.values, coordinates)
    distance = np.linalg.norm(points[:, None, :] - points[None, :, :], axis=-1)
    return _confusions(data), distance


def aad(
    x: ArrayLike, y: ArrayLike, *, coordinates: Coordinates | None = None
) -> NDArray[np.float64]:
    r"""Absolute annotation difference of two annotators, item by item.

    Parameters
    ----------
    x, y : array_like, same shape (e.g. ``(n_items,)``)
        Ratings of two annotators (or two rounds of one); ``np.nan`` = not annotated.
    coordinates : mapping of label -> point, optional
        Project labels into a space (e.g. :data:`EMOTION_COORDINATES` keyed by your codes).

    Returns
    -------
    ndarray, same shape as ``x``
        :math:`D^i`; nan where either rating is missing.

    Notes
    -----
    Eq. 1 for scales and Eq. 2 with coordinates (Euclidean distance):

    .. math:: D^i = |x_i - y_i|, \qquad D^i = \lVert c(x_i) - c(y_i) \rVert_2

    References
    ----------
    Du, Q. & Hoste, V. (2025). Another approach to agreement measurement and prediction with
    emotion annotations. Proc. 19th Linguistic Annotation Workshop (LAW-XIX), 87-102.
    doi:10.18653/v1/2025.law-1.7. Eqs. 1-2.

    Examples
    --------
    >>> aad([1, 3, 5, np.nan], [2, 3, 1, 4])
    array([ 1.,  0.,  4., nan])
    >>> coords = {0: EMOTION_COORDINATES["joy"], 1: EMOTION_COORDINATES["contentment"]}
    >>> aad([0, 0], [1, 0], coordinates=coords).round(4)
    array([0.6708, 0.    ])
    """
    xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if xa.shape != ya.shape:
        raise ValueError(f"x and y must have the same shape; got {xa.shape} and {ya.shape}")
    if xa.size == 0:
        raise ValueError("x and y are empty")
    return np.linalg.norm(_points(xa, coordinates) - _points(ya, coordinates), axis=-1)


def aad_rmse_per_item(
    ratings: ArrayLike, *, coordinates: Coordinates | None = None
) -> NDArray[np.float64]:
    r"""AAD-based RMSE disagreement of every item of a ratings matrix.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Ratings; ``np.nan`` = not annotated.
    coordinates : mapping of label -> point, optional
        Project labels into a space (squared Euclidean distances).

    Returns
    -------
    ndarray, shape (n_items,)
        :math:`D^i`; nan for items with fewer than 2 ratings.

    Notes
    -----
    Eq. 4 over the :math:`n_i` annotators of item :math:`i`, computed without forming pairs
    through :math:`\sum_{x<y} \lVert p_x - p_y \rVert^2 = n \sum_x \lVert p_x - \bar p \rVert^2`:

    .. math:: D^i = \sqrt{\binom{n_i}{2}^{-1} \sum_{(x,y)} \lVert p_{xi} - p_{yi} \rVert^2}
              = \sqrt{\frac{2}{n_i - 1} \sum_x \lVert p_{xi} - \bar p_i \rVert^2}

    References
    ----------
    Du, Q. & Hoste, V. (2025). Another approach to agreement measurement and prediction with
    emotion annotations. Proc. 19th Linguistic Annotation Workshop (LAW-XIX), 87-102.
    doi:10.18653/v1/2025.law-1.7. Eq. 4.

    Examples
    --------
    >>> aad_rmse_per_item([[1, 1, 2], [1, -1, np.nan], [0, 0, np.nan]]).round(4)
    array([0.8165, 1.4142,    nan])
    """
    data = as_label_data(ratings, integer=False)
    points = _points(data.values, coordinates)[data.code]  # (n_ratings, D)
    n = np.bincount(data.item, minlength=data.n_items)
    sums = [np.bincount(data.item, weights=axis, minlength=data.n_items) for axis in points.T]
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.stack(sums, axis=1) / n[:, None]
        squares = np.sum((points - mean[data.item]) ** 2, axis=1)
        total = np.bincount(data.item, weights=squares, minlength=data.n_items)
        return np.where(n >= 2, np.sqrt(2.0 * total / (n - 1)), np.nan)


def aad_rmse(values: ArrayLike, *, coordinates: Coordinates | None = None) -> float:
    r"""AAD-based RMSE disagreement of one item.

    Parameters
    ----------
    values : array_like, shape (n_annotators,)
        The item's ratings; ``np.nan`` entries are ignored.
    coordinates : mapping of label -> point, optional
        Project labels into a space (squared Euclidean distances).

    Returns
    -------
    float
        :math:`D^i`; nan with fewer than 2 ratings.

    Notes
    -----
    Eq. 4, the root mean squared difference over all annotator pairs:

    .. math:: D^i = \sqrt{\frac{1}{\binom{n}{2}} \sum_{(x, y) \in \mathcal{N}} (x_i - y_i)^2}

    References
    ----------
    Du, Q. & Hoste, V. (2025). Another approach to agreement measurement and prediction with
    emotion annotations. Proc. 19th Linguistic Annotation Workshop (LAW-XIX), 87-102.
    doi:10.18653/v1/2025.law-1.7. Eq. 4 and Figure 5.

    Examples
    --------
    Figure 5 (positive = 1, neutral = 0, negative = -1):

    >>> round(aad_rmse([1, 1, 1, 0, 0]), 2), round(aad_rmse([1, 1, 1, 0, -1]), 2)
    (0.77, 1.26)
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"values must be 1-D (one item's ratings); got shape {arr.shape}")
    return float(aad_rmse_per_item(arr[:, None], coordinates=coordinates)[0])


def pairwise_aad(
    ratings: ArrayLike, *, coordinates: Coordinates | None = None, min_overlap: int = 1
) -> NDArray[np.float64]:
    r"""Mean AAD of every annotator pair on the items both annotated.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Ratings; ``np.nan`` = not annotated.
    coordinates : mapping of label -> point, optional
        Project labels into a space.
    min_overlap : int
        Pairs sharing fewer items get nan.

    Returns
    -------
    ndarray, shape (n_annotators, n_annotators)
        Symmetric, 0 on the diagonal; nan below ``min_overlap``.

    Notes
    -----
    With the pair confusion :math:`C_{klab}` and value distances :math:`d_{ab}`:

    .. math:: \overline{D}_{kl} = \frac{\sum_{ab} C_{klab} d_{ab}}{\sum_{ab} C_{klab}}

    References
    ----------
    Du, Q. & Hoste, V. (2025). Another approach to agreement measurement and prediction with
    emotion annotations. Proc. 19th Linguistic Annotation Workshop (LAW-XIX), 87-102.
    doi:10.18653/v1/2025.law-1.7. Section 4.1.

    Examples
    --------
    >>> pairwise_aad([[1, 2, 3], [1, 3, 5], [np.nan, np.nan, 1]])
    array([[0., 1., 2.],
           [1., 0., 4.],
           [2., 4., 0.]])
    """
    confusion, distance = _pair_distances(ratings, coordinates)
    n = confusion.sum(axis=(2, 3))
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.einsum("klab,ab->kl", confusion, distance) / n
    mean[n < max(min_overlap, 1)] = np.nan
    np.fill_diagonal(mean, 0.0)
    return mean


def annotator_mean_aad(
    ratings: ArrayLike, *, coordinates: Coordinates | None = None
) -> NDArray[np.float64]:
    r"""Mean AAD of each annotator to all the others, over every shared item.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Ratings; ``np.nan`` = not annotated.
    coordinates : mapping of label -> point, optional
        Project labels into a space.

    Returns
    -------
    ndarray, shape (n_annotators,)
        Pooled over pairs (each shared item counts once per colleague); nan for an annotator
        who shares no item with anyone.

    Notes
    -----
    .. math:: \overline{D}_k = \frac{\sum_{l \ne k} \sum_{ab} C_{klab} d_{ab}}
              {\sum_{l \ne k} \sum_{ab} C_{klab}}

    References
    ----------
    Du, Q. & Hoste, V. (2025). Another approach to agreement measurement and prediction with
    emotion annotations. Proc. 19th Linguistic Annotation Workshop (LAW-XIX), 87-102.
    doi:10.18653/v1/2025.law-1.7. Section 4.1.

    Examples
    --------
    >>> annotator_mean_aad([[1, 2, 3], [1, 3, 5], [np.nan, np.nan, 1]])
    array([1.25, 1.75, 3.  ])
    """
    confusion, distance = _pair_distances(ratings, coordinates)
    idx = np.arange(confusion.shape[0])
    confusion[idx, idx] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.einsum("klab,ab->k", confusion, distance) / confusion.sum(axis=(1, 2, 3))


def aad_histogram(
    ratings: ArrayLike, *, coordinates: Coordinates | None = None, decimals: int = 6
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Distribution of AAD values for every annotator pair (Du & Hoste, Figures 1-2, Tables 2-4).

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Ratings; ``np.nan`` = not annotated.
    coordinates : mapping of label -> point, optional
        Project labels into a space.
    decimals : int
        Distances are rounded to this many decimals before being grouped.

    Returns
    -------
    differences : ndarray, shape (n_differences,)
        The distinct AAD values that two labels can have, increasing.
    counts : ndarray, shape (n_annotators, n_annotators, n_differences)
        ``counts[k, l, j]`` = shared items where ``k`` and ``l`` differ by ``differences[j]``;
        divide by ``counts[k, l].sum()`` for the percentages of Tables 2-4.

    Notes
    -----
    .. math:: h_{klj} = \sum_{ab:\, d_{ab} = \Delta_j} C_{klab}

    References
    ----------
    Du, Q. & Hoste, V. (2025). Another approach to agreement measurement and prediction with
    emotion annotations. Proc. 19th Linguistic Annotation Workshop (LAW-XIX), 87-102.
    doi:10.18653/v1/2025.law-1.7. Section 4.1.

    Examples
    --------
    >>> diffs, counts = aad_histogram([[1, 2, 3, 3], [1, 3, 5, 3]])
    >>> diffs
    array([0., 1., 2., 3., 4.])
    >>> counts[0, 1]
    array([2., 1., 1., 0., 0.])
    """
    confusion, distance = _pair_distances(ratings, coordinates)
    differences, group = np.unique(np.round(distance, decimals), return_inverse=True)
    onehot = np.eye(differences.size)[group.ravel()]
    m, v = confusion.shape[0], confusion.shape[2]
    return differences, confusion.reshape(m, m, v * v) @ onehot


def intra_annotator_aad(
    first: ArrayLike, second: ArrayLike, *, coordinates: Coordinates | None = None
) -> NDArray[np.float64]:
    r"""Mean AAD of each annotator between two rounds on the same items (intra-annotator).

    Parameters
    ----------
    first, second : array_like, shape (n_annotators, n_items)
        The same annotators' ratings of the same items in two rounds; ``np.nan`` = not
        annotated.
    coordinates : mapping of label -> point, optional
        Project labels into a space.

    Returns
    -------
    ndarray, shape (n_annotators,)
        Mean :math:`D^i` over the items rated in both rounds; nan where there is none.

    Notes
    -----
    .. math:: \overline{D}_k = \frac{1}{|I_k|} \sum_{i \in I_k} \lVert c(x^{(1)}_{ki}) -
              c(x^{(2)}_{ki}) \rVert

    References
    ----------
    Du, Q. & Hoste, V. (2025). Another approach to agreement measurement and prediction with
    emotion annotations. Proc. 19th Linguistic Annotation Workshop (LAW-XIX), 87-102.
    doi:10.18653/v1/2025.law-1.7. Section 4.2.

    Examples
    --------
    >>> intra_annotator_aad([[1, 2, 3], [4, 4, np.nan]], [[1, 3, 5], [4, np.nan, 2]])
    array([1., 0.])
    """
    a = as_ratings(first, name="first")
    b = as_ratings(second, name="second")
    if a.shape != b.shape:
        raise ValueError(f"first and second must have the same shape; got {a.shape} and {b.shape}")
    diff = aad(a, b, coordinates=coordinates)
    both = ~np.isnan(diff)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(both, diff, 0.0).sum(axis=1) / both.sum(axis=1)
