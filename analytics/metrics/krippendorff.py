"""Krippendorff's alpha from the coincidence matrix (nominal, ordinal, interval, ratio).

Written from Krippendorff (2011), "Computing Krippendorff's alpha-reliability"; the GPL
``krippendorff`` package is used only as a test oracle. The coincidence matrix is a sum over
units, so the live dashboard keeps it as a sufficient statistic
(:func:`coincidence_matrix`) and derives alpha from it (:func:`alpha_from_coincidences`).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse

from analytics.metrics._validate import LabelData, as_label_data, as_square

Level = Literal["nominal", "ordinal", "interval", "ratio"]

__all__ = ["alpha_from_coincidences", "coincidence_matrix", "krippendorff_alpha"]


def _distances(
    values: NDArray[np.float64], n_c: NDArray[np.float64], level: Level
) -> NDArray[np.float64]:
    """``(V, V)`` squared difference function :math:`\\delta^2_{ck}` of the level.

    ``n_c`` may carry leading batch axes ``(..., V)`` (bootstrap replicates): the ordinal
    distances then come out ``(..., V, V)``, the others ``(V, V)`` (they broadcast).
    """
    if level == "nominal":
        return 1.0 - np.eye(values.size)
    if level == "ordinal":
        cum = np.cumsum(n_c, axis=-1)
        lo = np.minimum.outer(np.arange(values.size), np.arange(values.size))
        hi = np.maximum.outer(np.arange(values.size), np.arange(values.size))
        between = cum[..., hi] - cum[..., lo] + n_c[..., lo]
        return (between - (n_c[..., lo] + n_c[..., hi]) / 2.0) ** 2
    diff = np.subtract.outer(values, values)
    if level == "interval":
        return diff**2
    if level == "ratio":
        total = np.add.outer(values, values)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(total != 0, (diff / total) ** 2, 0.0)
    raise ValueError(f"level must be 'nominal', 'ordinal', 'interval' or 'ratio'; got {level!r}")


def coincidence_matrix(
    ratings: ArrayLike, *, values: ArrayLike | None = None
) -> NDArray[np.float64]:
    r"""Krippendorff's coincidence matrix of a reliability-data matrix.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Values (any real numbers); ``np.nan`` = not annotated.
    values : array_like, shape (n_values,), optional
        Value domain (strictly increasing); default the values observed. Fix it when
        coincidences are stored and added up over time.

    Returns
    -------
    ndarray, shape (n_values, n_values)
        Symmetric :math:`o_{ck}`; units with fewer than 2 values add nothing; the total is the
        number of pairable values :math:`n`.

    Notes
    -----
    With :math:`n_{uc}` the number of coders giving value :math:`c` to unit :math:`u` and
    :math:`m_u = \sum_c n_{uc}`, one sparse product over units:

    .. math:: o_{ck} = \sum_{u: m_u \ge 2} \frac{n_{uc} n_{uk} - [c = k] n_{uc}}{m_u - 1}

    References
    ----------
    Krippendorff, K. (2011). Computing Krippendorff's alpha-reliability. Annenberg School
    for Communication, University of Pennsylvania. https://repository.upenn.edu/asc_papers/43

    Hayes, A. F. & Krippendorff, K. (2007). Answering the call for a standard reliability
    measure for coding data. Communication Methods and Measures 1(1), 77-89.
    doi:10.1080/19312450709336664

    Examples
    --------
    >>> coincidence_matrix([[1, 2, 1], [1, 2, 2], [np.nan, 2, 1]])
    array([[3., 1.],
           [1., 3.]])
    """
    return _coincidences(as_label_data(ratings, values=values, integer=False))


def _coincidences(data: LabelData) -> NDArray[np.float64]:
    counts = data.item_counts()
    m_u = counts.sum(axis=1)
    with np.errstate(divide="ignore"):
        weight = np.where(m_u >= 2, 1.0 / (m_u - 1), 0.0)
    weighted = sparse.diags_array(weight) @ counts
    o = (counts.T @ weighted).toarray()
    o[np.diag_indices_from(o)] -= np.asarray(weighted.sum(axis=0)).ravel()
    return o


def alpha_from_coincidences(
    coincidences: ArrayLike, values: ArrayLike, *, level: Level = "nominal"
) -> float:
    r"""Krippendorff's alpha from a coincidence matrix.

    Parameters
    ----------
    coincidences : array_like, shape (n_values, n_values)
        :math:`o_{ck}` as returned by :func:`coincidence_matrix`.
    values : array_like, shape (n_values,)
        The values the rows/columns stand for (increasing; used by the ordinal, interval and
        ratio difference functions).
    level : {"nominal", "ordinal", "interval", "ratio"}
        Level of measurement.

    Returns
    -------
    float
        Alpha; nan when fewer than 2 pairable values or no expected disagreement (a single
        value used).

    Notes
    -----
    With :math:`n_c = \sum_k o_{ck}`, :math:`n = \sum_c n_c` and the level's squared difference
    :math:`\delta^2_{ck}` (nominal :math:`[c \ne k]`; ordinal
    :math:`(\sum_{g=c}^{k} n_g - (n_c + n_k)/2)^2`; interval :math:`(c - k)^2`; ratio
    :math:`((c - k)/(c + k))^2`):

    .. math:: \alpha = 1 - \frac{D_o}{D_e} = 1 - (n - 1)
              \frac{\sum_{c,k} o_{ck} \delta^2_{ck}}{\sum_{c,k} n_c n_k \delta^2_{ck}}

    References
    ----------
    Krippendorff, K. (2011). Computing Krippendorff's alpha-reliability. Annenberg School
    for Communication, University of Pennsylvania. https://repository.upenn.edu/asc_papers/43

    Hayes, A. F. & Krippendorff, K. (2007). Answering the call for a standard reliability
    measure for coding data. Communication Methods and Measures 1(1), 77-89.
    doi:10.1080/19312450709336664

    Examples
    --------
    >>> o = coincidence_matrix([[1, 2, 1], [1, 2, 2], [np.nan, 2, 1]])
    >>> round(alpha_from_coincidences(o, [1, 2]), 4)
    0.5625
    """
    o = as_square(coincidences, name="coincidences")
    domain = np.asarray(values, dtype=np.float64)
    if domain.shape != (o.shape[0],):
        raise ValueError(f"values must have shape ({o.shape[0]},); got shape {domain.shape}")
    if np.isnan(o).any() or (o < 0).any():
        raise ValueError("coincidences must hold non-negative numbers")
    return float(_alpha(o, domain, level))


def _alpha(
    o: NDArray[np.float64], values: NDArray[np.float64], level: Level
) -> NDArray[np.float64]:
    """Alpha of coincidence matrices ``(..., V, V)`` (validated) -> ``(...)``; nan where
    undefined. The batch form serves the bootstrap replicates of
    :mod:`analytics.metrics.uncertainty`."""
    n_c = o.sum(axis=-2)
    n = n_c.sum(axis=-1)
    delta = np.broadcast_to(_distances(values, n_c, level), o.shape)
    expected = np.einsum("...c,...ck,...k->...", n_c, delta, n_c)
    observed = np.sum(o * delta, axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((n >= 2) & (expected > 0), 1.0 - (n - 1) * observed / expected, np.nan)


def krippendorff_alpha(ratings: ArrayLike, *, level: Level = "nominal") -> float:
    r"""Krippendorff's alpha of a reliability-data matrix with missing values.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Values; ``np.nan`` = not annotated.
    level : {"nominal", "ordinal", "interval", "ratio"}
        Level of measurement.

    Returns
    -------
    float
        Alpha (:math:`\le 1`); nan when undefined (no unit with 2 values, or one value only).
        Equals ``krippendorff.alpha(reliability_data=ratings, level_of_measurement=level)``.

    Notes
    -----
    .. math:: \alpha = 1 - \frac{D_o}{D_e}

    with :math:`D_o` and :math:`D_e` from the coincidence matrix (see
    :func:`coincidence_matrix`, :func:`alpha_from_coincidences`).

    References
    ----------
    Krippendorff, K. (2011). Computing Krippendorff's alpha-reliability. Annenberg School
    for Communication, University of Pennsylvania. https://repository.upenn.edu/asc_papers/43

    Hayes, A. F. & Krippendorff, K. (2007). Answering the call for a standard reliability
    measure for coding data. Communication Methods and Measures 1(1), 77-89.
    doi:10.1080/19312450709336664

    Examples
    --------
    Krippendorff (2011), 4 coders x 12 units with missing values:

    >>> r = [[1, 2, 3, 3, 2, 1, 4, 1, 2, np.nan, np.nan, np.nan],
    ...      [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, np.nan, 3],
    ...      [np.nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, np.nan],
    ...      [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, np.nan]]
    >>> levels = ("nominal", "ordinal", "interval", "ratio")
    >>> [round(krippendorff_alpha(r, level=lv), 3) for lv in levels]
    [0.743, 0.815, 0.849, 0.797]
    """
    data = as_label_data(ratings, integer=False)
    return alpha_from_coincidences(_coincidences(data), data.values, level=level)
