"""How uncertain a model is about each item: the entropy of its label probabilities (issue 28).

The queue's *uncertainty* order serves first the items whose predicted label distribution is
most spread out (uncertainty sampling, Lewis & Gale 1994): the answers that teach a model
retrained on them the most. Pure numpy.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["label_entropy"]


def label_entropy(probabilities: ArrayLike, *, base: float | None = None) -> NDArray[np.float64]:
    r"""Shannon entropy of each row of a label-probability matrix.

    Parameters
    ----------
    probabilities : array_like, shape (n_items, n_labels)
        Row ``i`` is a model's probability of each label for item ``i``: non-negative, each
        row summing to 1 (rows are not renormalised; a row of nan gives nan). A 1-D array is
        one item.
    base : float, optional
        Logarithm base: ``None`` (natural log, nats), ``2`` (bits).

    Returns
    -------
    ndarray of float, shape (n_items,)
        The entropy of each row, in :math:`[0, \log K]` for ``K`` labels: 0 when the model is
        certain, :math:`\log K` when every label is equally likely.

    Notes
    -----
    .. math::

        H(p_i) = -\sum_{k=1}^{K} p_{ik} \log p_{ik}, \qquad 0 \log 0 := 0.

    It is what :func:`scipy.stats.entropy` computes for one distribution (the tests use it as
    the oracle), here for every item at once without renormalising.

    References
    ----------
    Shannon, C. E. (1948). A mathematical theory of communication. Bell System Technical
    Journal 27(3), 379-423. https://doi.org/10.1002/j.1538-7305.1948.tb01338.x

    Lewis, D. D. & Gale, W. A. (1994). A sequential algorithm for training text classifiers.
    SIGIR '94, 3-12. https://doi.org/10.1007/978-1-4471-2099-5_1

    Examples
    --------
    >>> label_entropy([[0.5, 0.5], [1.0, 0.0]], base=2).tolist()
    [1.0, 0.0]
    >>> round(float(label_entropy([1 / 3, 1 / 3, 1 / 3])[0]), 4)  # log 3
    1.0986
    """
    p = np.atleast_2d(np.asarray(probabilities, dtype=np.float64))
    if p.ndim != 2:
        raise ValueError(f"Expected a (n_items, n_labels) matrix, got shape {p.shape}.")
    if (p < 0).any():
        raise ValueError("Probabilities cannot be negative.")
    if base is not None and (base <= 0 or base == 1):
        raise ValueError("The logarithm base must be positive and not 1.")
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    terms[np.isnan(p)] = np.nan
    entropy = 0.0 - terms.sum(axis=1)  # (0.0 - 0.0 is 0.0, where -0.0 would print "-0.0")
    return entropy / np.log(base) if base is not None else entropy
