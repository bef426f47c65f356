"""Pairwise-preference metrics: transitivity kappa, the count function and Bradley-Terry.

A **judgement** is a tuple ``(item_a, item_b, outcome)``: outcome ``1`` means a is preferred,
``-1`` means b is preferred and ``0`` is a tie (weak preference). Items are any hashable ids.
R is "at least as good as": ``a R b`` when a is preferred to b or tied with it.

Repeated judgements of the same pair (in either orientation, e.g. a test-retest audit) are
resolved with **the latest judgement wins** for everything computed on one relation
(triplets, the count function); :func:`audit_contradictions` reports how often a repeat
disagreed with the judgement before it. :func:`bradley_terry` is a statistical model, so it
keeps every judgement as one observation.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.sparse.csgraph import connected_components
from scipy.special import expit, log_expit

__all__ = [
    "BradleyTerryResult",
    "RepeatAudit",
    "RepeatContradiction",
    "absolute_scale",
    "audit_contradictions",
    "bradley_terry",
    "count_scores",
    "transitivity_kappa",
    "transitivity_kappa_from_counts",
    "triplet_counts",
]

Judgement = tuple[Hashable, Hashable, int]

#: Chance probability that a triplet is transitive: 13 weak orders among the 27 outcome
#: combinations of three pairs (weak preferences), 6 strict orders among 8 (strict).
_CHANCE_TRANSITIVE = {False: 13 / 27, True: 3 / 4}


class _Coded(NamedTuple):
    """Judgements as integer codes: ``a``, ``b`` index ``items``; ``outcome`` in {-1, 0, 1}."""

    items: list[Hashable]
    a: NDArray[np.intp]
    b: NDArray[np.intp]
    outcome: NDArray[np.int8]


def _encode(
    judgements: Iterable[Judgement],
    *,
    items: Sequence[Hashable] | None = None,
    strict: bool = False,
) -> _Coded:
    """Validate judgements and code items as integers.

    ``items=None`` codes the judged items in order of first appearance; otherwise every judged
    item must be in ``items`` (unique), and codes follow its order.
    """
    index: dict[Hashable, int] = {}
    if items is not None:
        for item in items:
            if item in index:
                raise ValueError(f"items must be unique; {item!r} appears twice")
            index[item] = len(index)
    frozen = items is not None
    a, b, outcome = [], [], []
    for k, judgement in enumerate(judgements):
        try:
            item_a, item_b, value = judgement
        except (TypeError, ValueError):
            raise ValueError(
                f"judgement {k} must be a tuple (item_a, item_b, outcome); got {judgement!r}"
            ) from None
        if value not in (-1, 0, 1) or isinstance(value, bool):
            raise ValueError(
                f"judgement {k}: outcome must be 1 (a preferred), -1 (b preferred) or 0 (tie);"
                f" got {value!r}"
            )
        if strict and value == 0:
            raise ValueError(f"judgement {k} is a tie, but strict=True allows no ties")
        if item_a == item_b:
            raise ValueError(f"judgement {k} compares item {item_a!r} with itself")
        for item in (item_a, item_b):
            if item not in index:
                if frozen:
                    raise ValueError(f"judgement {k}: item {item!r} is not in items")
                index[item] = len(index)
        a.append(index[item_a])
        b.append(index[item_b])
        outcome.append(int(value))
    return _Coded(
        list(index),
        np.asarray(a, dtype=np.intp),
        np.asarray(b, dtype=np.intp),
        np.asarray(outcome, dtype=np.int8),
    )


def _latest_relation(coded: _Coded) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Strict-preference and tie matrices ``(P, T)`` of the latest judgement of each pair.

    ``P[i, j]`` is True when i is preferred to j; ``T`` is symmetric; the diagonals are False.
    """
    n = len(coded.items)
    lo = np.minimum(coded.a, coded.b)
    hi = np.maximum(coded.a, coded.b)
    # Outcome oriented as "lo preferred" = 1, then keep the last judgement of every pair.
    oriented = np.where(coded.a == lo, coded.outcome, -coded.outcome)
    _, last_reversed = np.unique((lo * n + hi)[::-1], return_index=True)
    last = coded.a.size - 1 - last_reversed
    lo, hi, oriented = lo[last], hi[last], oriented[last]
    P = np.zeros((n, n), dtype=bool)
    T = np.zeros((n, n), dtype=bool)
    P[lo[oriented == 1], hi[oriented == 1]] = True
    P[hi[oriented == -1], lo[oriented == -1]] = True
    T[lo[oriented == 0], hi[oriented == 0]] = True
    T |= T.T
    return P, T


def triplet_counts(judgements: Iterable[Judgement], *, strict: bool = False) -> tuple[int, int]:
    """Count the transitive and the complete triplets of one annotator's judgements.

    A triplet is complete when its three pairs were all judged (the latest judgement of a
    repeated pair counts). It is transitive when no x, y, z in it has xRy and yRz but not xRz,
    i.e. when its three outcomes form a weak order. The counts are sufficient statistics for
    :func:`transitivity_kappa`, so a live dashboard can keep them per annotator.

    Parameters
    ----------
    judgements : iterable of (item_a, item_b, outcome)
        One annotator's judgements; outcome 1 = a preferred, -1 = b preferred, 0 = tie.
    strict : bool, default False
        Strict preferences: a tie raises ``ValueError``.

    Returns
    -------
    n_transitive : int
        Number of complete triplets that are transitive.
    n_complete : int
        Number of complete triplets.

    Notes
    -----
    With P the strict-preference matrix, T the tie matrix and G = P + P' + T the judged-pair
    matrix (all 0/1 with a zero diagonal), the complete triplets number tr(G^3)/6. The 13
    transitive outcome patterns are three ties, one tie with the third item above or below both
    tied items, and a strict chain x > y > z with x > z; counting each by a matrix product
    enumerates every triplet exactly once:

    .. math::

        n_T = \\tfrac{1}{6}\\operatorname{tr}(T^3)
              + \\tfrac{1}{2}\\sum_{ij} T_{ij}\\,(P^\\top P + P P^\\top)_{ij}
              + \\sum_{ij} P_{ij}\\,(P P)_{ij}

    The cost is five n x n matrix products: milliseconds for a few hundred items.

    References
    ----------
    .. [1] Amidei, J. (2020). Aligning Intraobserver Agreement by Transitivity.
       arXiv:2009.13905, Section 3.1.

    Examples
    --------
    >>> triplet_counts([("a", "b", 1), ("b", "c", 1), ("a", "c", 1)])
    (1, 1)
    >>> triplet_counts([("a", "b", 1), ("b", "c", 1), ("c", "a", 1)])
    (0, 1)
    """
    P, T = _latest_relation(_encode(judgements, strict=strict))
    p, t = P.astype(np.float64), T.astype(np.float64)
    g = p + p.T + t
    # tr(X^3) = sum((X @ X) * X) for symmetric X: one product fewer.
    n_complete = np.sum((g @ g) * g) / 6
    n_transitive = (
        np.sum((t @ t) * t) / 6 + np.sum(t * (p.T @ p + p @ p.T)) / 2 + np.sum(p * (p @ p))
    )
    return round(n_transitive), round(n_complete)


def transitivity_kappa_from_counts(
    n_transitive: int, n_complete: int, *, strict: bool = False
) -> float:
    """Transitivity kappa from the triplet counts of :func:`triplet_counts`.

    Parameters
    ----------
    n_transitive : int
        Number of transitive complete triplets, ``0 <= n_transitive <= n_complete``.
    n_complete : int
        Number of complete triplets.
    strict : bool, default False
        Chance level of strict preferences (3/4) instead of weak ones (13/27).

    Returns
    -------
    float
        Kappa in [-P(E)/(1-P(E)), 1]: -13/14 (weak) or -3 (strict) when no triplet is
        transitive, 1 when all are; nan when ``n_complete`` is 0.

    Notes
    -----
    .. math::

        K = \\frac{P(A) - P(E)}{1 - P(E)}, \\qquad P(A) = \\frac{n_T}{n_C}, \\qquad
        P(E) = \\begin{cases} 13/27 & \\text{weak} \\\\ 3/4 & \\text{strict} \\end{cases}

    References
    ----------
    .. [1] Amidei, J. (2020). Aligning Intraobserver Agreement by Transitivity.
       arXiv:2009.13905, Section 3.1.

    Examples
    --------
    >>> round(transitivity_kappa_from_counts(2, 3), 3)
    0.357
    >>> transitivity_kappa_from_counts(0, 0)
    nan
    """
    if not 0 <= n_transitive <= n_complete:
        raise ValueError(
            f"need 0 <= n_transitive <= n_complete; got {n_transitive} and {n_complete}"
        )
    if n_complete == 0:
        return math.nan
    p_e = _CHANCE_TRANSITIVE[strict]
    return (n_transitive / n_complete - p_e) / (1 - p_e)


def transitivity_kappa(judgements: Iterable[Judgement], *, strict: bool = False) -> float:
    """Amidei's transitivity kappa: chance-corrected share of transitive triplets.

    Parameters
    ----------
    judgements : iterable of (item_a, item_b, outcome)
        One annotator's judgements; outcome 1 = a preferred, -1 = b preferred, 0 = tie.
        Of a pair judged more than once, the latest judgement counts (see
        :func:`audit_contradictions` for the disagreements between repeats).
    strict : bool, default False
        Strict preferences: P(E) = 3/4 and a tie raises ``ValueError``.

    Returns
    -------
    float
        K; nan when no triplet has all three pairs judged.

    Notes
    -----
    Over every triplet whose three pairs were all judged, P(A) is the share of transitive
    triplets (no x, y, z with xRy, yRz and not xRz). P(E) is the share of transitive outcome
    combinations: 13 weak orders among 3^3 = 27 for weak preferences, 6 among 2^3 = 8 for
    strict ones.

    .. math::

        K = \\frac{P(A) - P(E)}{1 - P(E)}, \\qquad
        P(E) = \\begin{cases} 13/27 & \\text{weak} \\\\ 3/4 & \\text{strict} \\end{cases}

    Amidei's Table 2 prints 0.34 for an annotator with 2 of 3 transitive triplets; the exact
    value is (2/3 - 13/27) / (14/27) = 5/14 = 0.357.

    References
    ----------
    .. [1] Amidei, J. (2020). Aligning Intraobserver Agreement by Transitivity.
       arXiv:2009.13905, Section 3.1.

    Examples
    --------
    One transitive and one cyclic triplet:

    >>> judgements = [(1, 2, 1), (2, 3, 1), (1, 3, 1), (4, 5, 1), (5, 6, 1), (6, 4, 1)]
    >>> round(transitivity_kappa(judgements), 4)
    0.0357
    >>> transitivity_kappa([("a", "b", 0)])
    nan
    """
    return transitivity_kappa_from_counts(*triplet_counts(judgements, strict=strict), strict=strict)


class RepeatContradiction(NamedTuple):
    """A repeated judgement that disagrees with the previous judgement of the same pair.

    ``index`` is the position of the repeat in the judgements; ``previous`` is the earlier
    outcome expressed in the repeat's orientation ``(item_a, item_b)``.
    """

    index: int
    item_a: Hashable
    item_b: Hashable
    previous: int
    outcome: int


class RepeatAudit(NamedTuple):
    """Test-retest audit of repeated pairs: how many repeats, and which ones disagreed."""

    n_repeats: int
    contradictions: list[RepeatContradiction]


def audit_contradictions(judgements: Iterable[Judgement]) -> RepeatAudit:
    """Compare every repeated judgement of a pair with the judgement before it.

    Parameters
    ----------
    judgements : iterable of (item_a, item_b, outcome)
        One annotator's judgements in the order they were given.

    Returns
    -------
    RepeatAudit
        ``n_repeats``: judgements of a pair already judged; ``contradictions``: those whose
        outcome differs from the previous judgement of the pair (in the same orientation).

    Notes
    -----
    The test-retest agreement of the repeats is

    .. math::

        \\text{agreement} = 1 - \\frac{|\\text{contradictions}|}{n_\\text{repeats}}

    References
    ----------
    .. [1] Amidei, J. (2020). Aligning Intraobserver Agreement by Transitivity.
       arXiv:2009.13905, Section 1 (test-retest strategy).

    Examples
    --------
    >>> audit = audit_contradictions([("a", "b", 1), ("b", "c", 1), ("b", "a", 1)])
    >>> audit.n_repeats, audit.contradictions
    (1, [RepeatContradiction(index=2, item_a='b', item_b='a', previous=-1, outcome=1)])
    """
    coded = _encode(judgements)
    last: dict[tuple[int, int], int] = {}  # (a, b) with a < b -> outcome oriented "a preferred"
    n_repeats = 0
    contradictions = []
    for k, (a, b, value) in enumerate(zip(coded.a, coded.b, coded.outcome, strict=True)):
        sign = 1 if a < b else -1
        key = (min(a, b), max(a, b))
        if key in last:
            n_repeats += 1
            previous = last[key] * sign
            if previous != value:
                contradictions.append(
                    RepeatContradiction(k, coded.items[a], coded.items[b], previous, int(value))
                )
        last[key] = int(value) * sign
    return RepeatAudit(n_repeats, contradictions)


def _transitive_closure(R: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Reflexive-transitive closure of a boolean relation (Warshall, vectorised per pivot)."""
    closure = R | np.eye(R.shape[0], dtype=bool)
    for k in range(R.shape[0]):
        closure |= np.outer(closure[:, k], closure[k, :])
    return closure


def count_scores(
    judgements: Iterable[Judgement], *, items: Sequence[Hashable] | None = None
) -> NDArray[np.float64]:
    """Amidei's count function: the number of other items each item is at least as good as.

    Parameters
    ----------
    judgements : iterable of (item_a, item_b, outcome)
        One annotator's judgements; of a repeated pair the latest counts.
    items : sequence of hashable, optional
        The items to score, in the order of the result. Default: the judged items in order of
        first appearance. Items in ``items`` that were never judged score nan.

    Returns
    -------
    ndarray of shape (n_items,)
        f(x) for every item; tied items get equal scores.

    Notes
    -----
    .. math::

        f(x) = \\left|\\{\\, y \\neq x : x \\mathrel{R^+} y \\,\\}\\right|

    where :math:`R^+` is the transitive closure of R over the judged pairs. When the judgements
    are a complete weak order (every pair judged, transitive), :math:`R^+ = R` and
    Theorem 1 of [1]_ holds: x R y if and only if f(x) >= f(y). A pruned annotator (pairs
    implied by transitivity never asked) is scored on the closure, which recovers the same
    weak order when the asked pairs determine it. Intransitive judgements form cycles in the
    closure, whose items all get the same score. Pairs that remain incomparable in the closure
    leave the scores a linear extension of a partial order only.

    References
    ----------
    .. [1] Amidei, J. (2020). Aligning Intraobserver Agreement by Transitivity.
       arXiv:2009.13905, Section 5, Theorem 1.
    .. [2] Roberts, F. S. (1985). Measurement Theory. Cambridge University Press, p. 107.

    Examples
    --------
    Amidei's example, a R b, a R c, b R c:

    >>> count_scores([("a", "b", 1), ("a", "c", 1), ("b", "c", 1)]).tolist()
    [2.0, 1.0, 0.0]

    A pruned annotator who tied b and c was never asked a against c:

    >>> count_scores([("a", "b", 1), ("b", "c", 0)]).tolist()
    [2.0, 1.0, 1.0]
    """
    coded = _encode(judgements, items=items)
    P, T = _latest_relation(coded)
    closure = _transitive_closure(P | T)
    scores = closure.sum(axis=1).astype(np.float64) - 1
    judged = np.zeros(len(coded.items), dtype=bool)
    judged[coded.a] = judged[coded.b] = True
    scores[~judged] = np.nan
    return scores


def absolute_scale(scores: ArrayLike) -> NDArray[np.float64]:
    """Map count-function scores to an absolute scale in [0, 1].

    Parameters
    ----------
    scores : array-like of shape (n_items,)
        Output of :func:`count_scores`; nan (never judged) stays nan.

    Returns
    -------
    ndarray of shape (n_items,)
        The share of the other scored items that each item is at least as good as.

    Notes
    -----
    Any positive linear transformation of f satisfies Theorem 1 of [1]_; dividing by the
    number of other items makes scores comparable between annotators who saw different
    numbers of items. A top item scores 1; the bottom of a complete weak order scores
    (k - 1) / (n - 1) for a bottom tie group of k items.

    .. math::

        s(x) = \\frac{f(x)}{n - 1}

    with n the number of scored (non-nan) items.

    References
    ----------
    .. [1] Amidei, J. (2020). Aligning Intraobserver Agreement by Transitivity.
       arXiv:2009.13905, Section 5.

    Examples
    --------
    >>> absolute_scale([2, 1, 1, np.nan]).tolist()
    [1.0, 0.5, 0.5, nan]
    """
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"scores must be 1-D; got an array of shape {arr.shape}")
    n = int(np.count_nonzero(~np.isnan(arr)))
    if n < 2:
        raise ValueError(f"need at least 2 scored (non-nan) items; got {n}")
    if np.nanmin(arr) < 0 or np.nanmax(arr) > n - 1:
        raise ValueError(f"count scores of {n} items must lie in [0, {n - 1}]")
    return arr / (n - 1)


@dataclass(frozen=True)
class BradleyTerryResult:
    """Fitted Bradley-Terry model.

    Attributes
    ----------
    items : list of hashable
        The items, in the order of every array.
    log_strengths : ndarray of shape (n_items,)
        theta_i = log pi_i, gauge sum(theta) = 0 over the compared items; nan if never compared.
    strengths : ndarray of shape (n_items,)
        pi_i = exp(theta_i) (geometric mean 1).
    se : ndarray of shape (n_items,)
        Standard errors of ``log_strengths`` under the gauge.
    covariance : ndarray of shape (n_items, n_items)
        Covariance of ``log_strengths`` under the gauge (nan rows for uncompared items).
    log_likelihood : float
        Log-likelihood at the estimate (without the penalty).
    """

    items: list[Hashable]
    log_strengths: NDArray[np.float64]
    strengths: NDArray[np.float64]
    se: NDArray[np.float64]
    covariance: NDArray[np.float64]
    log_likelihood: float


def _bt_log_likelihood(theta: NDArray[np.float64], wins: NDArray[np.float64]) -> float:
    """Bradley-Terry log-likelihood: sum over ordered pairs of wins_ij * log sigma(t_i - t_j)."""
    return float(np.sum(wins * log_expit(theta[:, None] - theta[None, :])))


def bradley_terry(
    judgements: Iterable[Judgement] | Mapping[Hashable, Iterable[Judgement]],
    *,
    items: Sequence[Hashable] | None = None,
    ties: Literal["half", "ignore"] = "half",
    alpha: float = 0.0,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> BradleyTerryResult:
    """Bradley-Terry strengths with standard errors, pooled over annotators.

    Parameters
    ----------
    judgements : iterable of (item_a, item_b, outcome), or mapping annotator -> iterable
        Judgements pooled over annotators; every judgement (repeats included) is one
        independent comparison.
    items : sequence of hashable, optional
        Items to estimate, in the order of the result; default: the judged items in order of
        first appearance. Items never compared get nan strength and standard error.
    ties : {"half", "ignore"}, default "half"
        ``"half"`` counts a tie as half a win for each item; ``"ignore"`` drops ties.
    alpha : float, default 0.0
        Ridge penalty (alpha/2) * sum(theta^2) on the log-strengths, i.e. a Gaussian prior
        with variance 1/alpha. A tiny value (e.g. 1e-3 to 1e-2) makes the estimate exist when
        the comparison graph is not strongly connected (an item that never lost or never won,
        or separate groups of items) and shrinks such strengths towards the mean.
    tol : float, default 1e-10
        Convergence tolerance on the largest gradient entry, relative to the largest number of
        comparisons of a pair.
    max_iter : int, default 100
        Maximum number of Newton iterations.

    Returns
    -------
    BradleyTerryResult
        Log-strengths with sum 0 over the compared items, strengths, standard errors and
        covariance, log-likelihood.

    Raises
    ------
    ValueError
        With ``alpha=0`` when the directed comparison graph of the compared items is not
        strongly connected: then the maximum-likelihood estimate does not exist (some
        strengths diverge; Hunter 2004, Assumption 1). Also when no comparison remains.

    Notes
    -----
    With :math:`w_{ij}` the wins of i over j (ties half a win each) and
    :math:`n_{ij} = w_{ij} + w_{ji}`, the penalised log-likelihood is maximised by Newton's
    method with step halving (it is concave; each Newton step is solved in the sum-zero
    subspace):

    .. math::

        \\ell(\\theta) = \\sum_{i \\neq j} w_{ij} \\log \\sigma(\\theta_i - \\theta_j)
                         - \\frac{\\alpha}{2} \\lVert\\theta\\rVert^2, \\qquad
        P(i \\succ j) = \\frac{\\pi_i}{\\pi_i + \\pi_j} = \\sigma(\\theta_i - \\theta_j)

    The observed information is the weighted graph Laplacian
    :math:`I = L + \\alpha I_n`, :math:`L_{ij} = -n_{ij} p_{ij} p_{ji}` off the diagonal,
    rows summing to :math:`\\alpha`. Under the gauge :math:`\\sum_i \\theta_i = 0` the
    covariance is :math:`Z (Z^\\top I Z)^{-1} Z^\\top` with Z an orthonormal basis of the
    sum-zero subspace; for ``alpha=0`` this is the pseudo-inverse :math:`L^+`.

    References
    ----------
    .. [1] Bradley, R. A. and Terry, M. E. (1952). Rank analysis of incomplete block designs:
       I. The method of paired comparisons. Biometrika 39(3/4), 324-345.
       DOI 10.2307/2334029.
    .. [2] Hunter, D. R. (2004). MM algorithms for generalized Bradley-Terry models.
       The Annals of Statistics 32(1), 384-406. DOI 10.1214/aos/1079120141.

    Examples
    --------
    >>> judgements = [("a", "b", 1), ("a", "b", 1), ("b", "a", 1), ("b", "c", 1),
    ...               ("c", "b", 0), ("a", "c", 1), ("c", "a", 1)]
    >>> fit = bradley_terry(judgements)
    >>> fit.items
    ['a', 'b', 'c']
    >>> np.round(fit.log_strengths, 3).tolist()
    [0.299, 0.043, -0.342]
    >>> np.round(fit.se, 3).tolist()
    [0.618, 0.609, 0.69]
    """
    if ties not in ("half", "ignore"):
        raise ValueError(f'ties must be "half" or "ignore"; got {ties!r}')
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0; got {alpha}")
    pooled = (
        [j for annotator in judgements.values() for j in annotator]
        if isinstance(judgements, Mapping)
        else judgements
    )
    coded = _encode(pooled, items=items)
    n_all = len(coded.items)
    decisive = coded.outcome != 0
    winner = np.where(coded.outcome == 1, coded.a, coded.b)[decisive]
    loser = np.where(coded.outcome == 1, coded.b, coded.a)[decisive]
    wins_all = np.zeros((n_all, n_all))
    np.add.at(wins_all, (winner, loser), 1.0)
    if ties == "half":
        tie_a, tie_b = coded.a[~decisive], coded.b[~decisive]
        np.add.at(wins_all, (tie_a, tie_b), 0.5)
        np.add.at(wins_all, (tie_b, tie_a), 0.5)

    compared = (wins_all + wins_all.T).sum(axis=1) > 0
    if not compared.any():
        raise ValueError("no comparison to fit (all judgements were ties and ties='ignore'?)")
    wins = wins_all[np.ix_(compared, compared)]
    n = wins.shape[0]
    if alpha == 0:
        n_strong, _ = connected_components(wins > 0, directed=True, connection="strong")
        if n_strong > 1:
            raise ValueError(
                f"the comparison graph splits into {n_strong} strongly connected groups (an item"
                " never lost or never won, or groups never compared): maximum-likelihood"
                " strengths do not exist; pass a small alpha > 0 to regularise"
            )
    counts = wins + wins.T
    centre = np.full((n, n), 1.0 / n)  # projector on the constant vector, the gauge direction

    def information(theta: NDArray[np.float64]) -> NDArray[np.float64]:
        p = expit(theta[:, None] - theta[None, :])
        weights = counts * p * p.T
        return np.diag(weights.sum(axis=1) + alpha) - weights

    def objective(theta: NDArray[np.float64]) -> float:
        return _bt_log_likelihood(theta, wins) - 0.5 * alpha * float(theta @ theta)

    theta = np.zeros(n)
    scale = tol * max(1.0, float(counts.max()))
    for _ in range(max_iter):
        p = expit(theta[:, None] - theta[None, :])
        gradient = wins.sum(axis=1) - (counts * p).sum(axis=1) - alpha * theta
        if np.max(np.abs(gradient)) <= scale:
            break
        # The gradient sums to 0, so adding the gauge projector keeps the step sum-zero.
        step = np.linalg.solve(information(theta) + centre, gradient)
        current, size = objective(theta), 1.0
        while objective(theta + size * step) < current and size > 1e-10:
            size /= 2
        theta = theta + size * step
    else:
        warnings.warn(
            f"Bradley-Terry did not converge in {max_iter} iterations", RuntimeWarning, stacklevel=2
        )

    projector = np.eye(n) - centre
    covariance = projector @ np.linalg.inv(information(theta) + centre) @ projector
    log_strengths = np.full(n_all, np.nan)
    log_strengths[compared] = theta
    full_covariance = np.full((n_all, n_all), np.nan)
    full_covariance[np.ix_(compared, compared)] = covariance
    return BradleyTerryResult(
        items=coded.items,
        log_strengths=log_strengths,
        strengths=np.exp(log_strengths),
        se=np.sqrt(np.diag(full_covariance)),
        covariance=full_covariance,
        log_likelihood=_bt_log_likelihood(theta, wins),
    )
