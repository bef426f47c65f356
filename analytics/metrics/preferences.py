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
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cache
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import LinearOperator, cg
from scipy.special import expit, log_expit
from threadpoolctl import ThreadpoolController

__all__ = [
    "BradleyTerryResult",
    "RepeatAudit",
    "RepeatContradiction",
    "SideBias",
    "absolute_scale",
    "audit_contradictions",
    "bradley_terry",
    "count_scores",
    "refine_ranking",
    "reliability_weight",
    "side_bias",
    "transitivity_chance",
    "transitivity_kappa",
    "transitivity_kappa_from_counts",
    "transitivity_kappa_upper",
    "triplet_counts",
]

Judgement = tuple[Hashable, Hashable, int]

#: Amidei's chance probability that a triplet is transitive: 13 weak orders among the 27
#: outcome combinations of three pairs (weak preferences), 6 strict orders among 8 (strict).
_CHANCE_TRANSITIVE = {False: 13 / 27, True: 3 / 4}

#: Where the chance level of transitivity kappa comes from: Amidei's fixed share of transitive
#: outcome combinations, or the annotator's own tie rate (:func:`transitivity_chance`).
Chance = Literal["amidei", "observed"]


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
    return _triplets(*_latest_relation(_encode(judgements, strict=strict)))


def _triplets(P: NDArray[np.bool_], T: NDArray[np.bool_]) -> tuple[int, int]:
    """``(n_transitive, n_complete)`` of a relation (see :func:`triplet_counts`)."""
    p, t = P.astype(np.float64), T.astype(np.float64)
    g = p + p.T + t
    # tr(X^3) = sum((X @ X) * X) for symmetric X: one product fewer.
    n_complete = np.sum((g @ g) * g) / 6
    n_transitive = (
        np.sum((t @ t) * t) / 6 + np.sum(t * (p.T @ p + p @ p.T)) / 2 + np.sum(p * (p @ p))
    )
    return round(n_transitive), round(n_complete)


def transitivity_chance(tie_rate: float) -> float:
    r"""Probability that a triplet is transitive when its three outcomes are independent draws.

    Parameters
    ----------
    tie_rate : float
        Probability ``t`` in [0, 1] that a judgement is a tie; each strict direction then has
        probability ``q = (1 - t) / 2`` (the side an item is shown on is random, so an
        annotator's own A/B bias does not orient the relation between two items).

    Returns
    -------
    float
        P(E), between about 0.40 and 1: the chance level of :func:`transitivity_kappa` for an
        annotator who answers at random with their own tie rate.

    Notes
    -----
    Of the 27 outcome combinations of a triplet's pairs, 13 are weak orders (transitive): the
    6 strict orders (no tie, probability :math:`q^3` each), the 6 orders with one tied pair
    above or below the third item (one tie, :math:`t q^2` each) and all tied (:math:`t^3`):

    .. math:: P(E) = 6 q^3 + 6 t q^2 + t^3, \qquad q = \frac{1 - t}{2}

    At :math:`t = 1/3` (each outcome equally likely) this is Amidei's 13/27; at :math:`t = 0`
    (strict preferences, or an annotator who never presses "equal") it is 3/4, so a random
    annotator without ties is transitive 75 % of the time and scores 0.52 against 13/27 but
    about 0 against this level. It is smallest, 0.402, near :math:`t = 0.55`, and 1 at
    :math:`t = 1` (kappa undefined).

    References
    ----------
    .. [1] Amidei, J. (2020). Aligning Intraobserver Agreement by Transitivity.
       arXiv:2009.13905, Section 3.1 (the fixed level 13/27 is the case t = 1/3).

    Examples
    --------
    >>> round(transitivity_chance(1 / 3), 6) == round(13 / 27, 6)
    True
    >>> transitivity_chance(0.0)
    0.75
    """
    if not 0.0 <= tie_rate <= 1.0:
        raise ValueError(f"tie_rate must be in [0, 1]; got {tie_rate}")
    q = (1.0 - tie_rate) / 2.0
    return 6 * q**3 + 6 * tie_rate * q**2 + tie_rate**3


def transitivity_kappa_from_counts(
    n_transitive: int,
    n_complete: int,
    *,
    strict: bool = False,
    tie_rate: float | None = None,
) -> float:
    """Transitivity kappa from the triplet counts of :func:`triplet_counts`.

    Parameters
    ----------
    n_transitive : int
        Number of transitive complete triplets, ``0 <= n_transitive <= n_complete``.
    n_complete : int
        Number of complete triplets.
    strict : bool, default False
        Strict preferences: chance level 3/4 (no ties).
    tie_rate : float, optional
        The annotator's own share of ties: chance level :func:`transitivity_chance` of it.
        Default (None): Amidei's fixed level, 13/27 (weak) or 3/4 (strict).

    Returns
    -------
    float
        Kappa in [-P(E)/(1-P(E)), 1]; nan when ``n_complete`` is 0 or P(E) = 1 (all ties).

    Notes
    -----
    .. math::

        K = \\frac{P(A) - P(E)}{1 - P(E)}, \\qquad P(A) = \\frac{n_T}{n_C}

    References
    ----------
    .. [1] Amidei, J. (2020). Aligning Intraobserver Agreement by Transitivity.
       arXiv:2009.13905, Section 3.1.

    Examples
    --------
    >>> round(transitivity_kappa_from_counts(2, 3), 3)
    0.357
    >>> round(transitivity_kappa_from_counts(3, 4, tie_rate=0.0), 3)  # chance for no ties
    0.0
    >>> transitivity_kappa_from_counts(0, 0)
    nan
    """
    if not 0 <= n_transitive <= n_complete:
        raise ValueError(
            f"need 0 <= n_transitive <= n_complete; got {n_transitive} and {n_complete}"
        )
    if tie_rate is None:
        p_e = _CHANCE_TRANSITIVE[strict]
    else:
        p_e = transitivity_chance(0.0 if strict else tie_rate)
    if n_complete == 0 or p_e >= 1.0:
        return math.nan
    return (n_transitive / n_complete - p_e) / (1 - p_e)


def transitivity_kappa(
    judgements: Iterable[Judgement], *, strict: bool = False, chance: Chance = "observed"
) -> float:
    """Amidei's transitivity kappa: chance-corrected share of transitive triplets.

    Parameters
    ----------
    judgements : iterable of (item_a, item_b, outcome)
        One annotator's judgements; outcome 1 = a preferred, -1 = b preferred, 0 = tie.
        Of a pair judged more than once, the latest judgement counts (see
        :func:`audit_contradictions` for the disagreements between repeats).
    strict : bool, default False
        Strict preferences: P(E) = 3/4 and a tie raises ``ValueError``.
    chance : {"observed", "amidei"}, default "observed"
        ``"observed"`` (the dashboard's level): P(E) of an annotator answering at random with
        this annotator's own tie rate (the share of ties among the judged pairs;
        :func:`transitivity_chance`), so that a random annotator sits near 0 whatever their
        tie rate. ``"amidei"``: the paper's fixed P(E) (13/27, or 3/4 strict), which gives a
        random annotator who never ties about 0.52 and one who ties everything 1.0.

    Returns
    -------
    float
        K; nan when no triplet has all three pairs judged, or P(E) = 1 (every answer a tie:
        ties alone say nothing about consistency; the dashboard flags such an annotator by
        the tie rate itself).

    Notes
    -----
    Over every triplet whose three pairs were all judged, P(A) is the share of transitive
    triplets (no x, y, z with xRy, yRz and not xRz). Amidei's P(E) is the share of transitive
    outcome combinations: 13 weak orders among 3^3 = 27 for weak preferences, 6 among
    2^3 = 8 for strict ones; it treats the three outcomes as equally likely, which rewards an
    annotator who never ties (their chance level is 3/4, not 13/27).

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
    >>> round(transitivity_kappa(judgements), 4)  # no ties: P(E) = 3/4
    -1.0
    >>> round(transitivity_kappa(judgements, chance="amidei"), 4)
    0.0357
    >>> transitivity_kappa([("a", "b", 0)])
    nan
    """
    if chance not in ("amidei", "observed"):
        raise ValueError(f"chance must be 'amidei' or 'observed'; got {chance!r}")
    P, T = _latest_relation(_encode(judgements, strict=strict))
    tie_rate = None
    if chance == "observed":
        ties, strict_pairs = int(T.sum()) // 2, int(P.sum())
        tie_rate = ties / (ties + strict_pairs) if ties + strict_pairs else 0.0
    return transitivity_kappa_from_counts(*_triplets(P, T), strict=strict, tie_rate=tie_rate)


@dataclass(frozen=True)
class RepeatContradiction:
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
        Standard errors of ``log_strengths`` under the gauge (nan if never compared).
    se_exact : bool
        True when ``se`` is the exact square root of the diagonal of the inverse information
        (at most ``exact_se_max`` compared items); False when it is the belief-propagation
        approximation of :func:`bradley_terry` (Notes).
    log_likelihood : float
        Log-likelihood at the estimate (without the penalty).
    """

    items: list[Hashable]
    log_strengths: NDArray[np.float64]
    strengths: NDArray[np.float64]
    se: NDArray[np.float64]
    se_exact: bool
    log_likelihood: float


class _Comparisons(NamedTuple):
    """Judgements summed per compared pair ``i < j``: ``wins_i`` of i over j, ``total``."""

    i: NDArray[np.intp]
    j: NDArray[np.intp]
    wins_i: NDArray[np.float64]
    total: NDArray[np.float64]

    def log_likelihood(self, theta: NDArray[np.float64]) -> float:
        d = theta[self.i] - theta[self.j]
        return float(self.wins_i @ log_expit(d) + (self.total - self.wins_i) @ log_expit(-d))

    def gradient(self, theta: NDArray[np.float64]) -> NDArray[np.float64]:
        excess = self.wins_i - self.total * expit(theta[self.i] - theta[self.j])
        return self.per_item(excess, -excess, theta.size)

    def per_item(
        self, on_i: NDArray[np.float64], on_j: NDArray[np.float64], n: int
    ) -> NDArray[np.float64]:
        """Sum values of the pairs onto their items: ``on_i`` onto i, ``on_j`` onto j."""
        total = np.asarray(np.bincount(self.i, on_i, minlength=n), dtype=np.float64)
        return total + np.bincount(self.j, on_j, minlength=n)

    def edge_information(self, theta: NDArray[np.float64]) -> NDArray[np.float64]:
        """:math:`n_{ij} p_{ij} p_{ji}` per pair, the off-diagonal of the information."""
        p = expit(theta[self.i] - theta[self.j])
        return self.total * p * (1 - p)


def _sum_pairs(
    winner: NDArray[np.intp], loser: NDArray[np.intp], weight: NDArray[np.float64], n: int
) -> _Comparisons:
    """Sum weighted wins per unordered pair in O(J log J), no items x items array."""
    lo, hi = np.minimum(winner, loser), np.maximum(winner, loser)
    keys, inverse = np.unique(lo * n + hi, return_inverse=True)
    wins_lo = np.bincount(inverse, np.where(winner == lo, weight, 0.0), minlength=keys.size)
    total = np.bincount(inverse, weight, minlength=keys.size)
    return _Comparisons(
        keys // n,
        keys % n,
        np.asarray(wins_lo, dtype=np.float64),
        np.asarray(total, dtype=np.float64),
    )


def _laplacian(pairs: _Comparisons, edge: NDArray[np.float64], n: int, alpha: float) -> csr_matrix:
    """Sparse information matrix: the graph Laplacian of ``edge`` weights plus ``alpha`` I."""
    diagonal = pairs.per_item(edge, edge, n)
    rows = np.concatenate([pairs.i, pairs.j, np.arange(n)])
    cols = np.concatenate([pairs.j, pairs.i, np.arange(n)])
    return coo_matrix(
        (np.concatenate([-edge, -edge, diagonal + alpha]), (rows, cols)), (n, n)
    ).tocsr()


def _solve_gauged(
    information: csr_matrix, rhs: NDArray[np.float64], *, rtol: float
) -> NDArray[np.float64]:
    """Solve (I + 11'/n) x = rhs by Jacobi-preconditioned conjugate gradients.

    The rank-one term (the projector on the gauge direction) makes a Laplacian of a connected
    graph positive definite without densifying it; for a sum-zero ``rhs`` the solution is the
    sum-zero solution of ``I x = rhs``.
    """
    n = rhs.size
    operator = LinearOperator((n, n), matvec=lambda x: information @ x + x.mean(), dtype=float)
    inverse_diagonal = 1.0 / (information.diagonal() + 1.0 / n)
    preconditioner = LinearOperator((n, n), matvec=lambda x: inverse_diagonal * x, dtype=float)
    x, info = cg(operator, rhs, rtol=rtol, atol=0.0, maxiter=10 * n + 100, M=preconditioner)
    if info:
        warnings.warn(
            "Bradley-Terry: conjugate gradients did not converge", RuntimeWarning, stacklevel=3
        )
    return x


def _approximate_se(
    pairs: _Comparisons, edge: NDArray[np.float64], n: int, alpha: float, *, max_iter: int = 200
) -> NDArray[np.float64]:
    """Gaussian belief-propagation (Bethe) marginal variances of the information matrix.

    ``m_i`` is the precision that pair k's j-side removes from i (and ``m_j`` the reverse);
    vectorised over the pairs, O(pairs) per sweep. With ``alpha = 0`` a ridge of 1e-4 x the
    mean information of an item stands in for the gauge, which belief propagation, being
    local, never sees.
    """
    degree = pairs.per_item(edge, edge, n)
    degree += alpha or 1e-4 * float(degree.mean())
    m_i, m_j = np.zeros_like(edge), np.zeros_like(edge)
    precision = degree
    for _ in range(max_iter):
        # The cavity precision of j without i is j's precision plus what i took from it.
        m_i, m_j = edge**2 / (precision[pairs.j] + m_j), edge**2 / (precision[pairs.i] + m_i)
        updated = degree - pairs.per_item(m_i, m_j, n)
        converged = np.max(np.abs(updated - precision)) <= 1e-10 * np.max(precision)
        precision = updated
        if converged:
            break
    return np.sqrt(1.0 / precision)


@cache
def _threadpools() -> ThreadpoolController:
    """The process's thread pools, found once (a search of the loaded libraries costs 2.6 ms,
    as much as a small fit; limiting through the controller found costs 0.03 ms)."""
    return ThreadpoolController()


def _one_blas_thread() -> AbstractContextManager[object]:
    """One BLAS thread while the Newton steps run: their products are vector operations
    (``dot``, ``norm`` of O(items) entries, hundreds per fit), for which a pool of BLAS threads
    costs more in waking and spinning than it saves; on the 2-core machine under load,
    OpenBLAS's default threads made the fit at 100,000 judgements 15-22 times slower."""
    return _threadpools().limit(limits=1, user_api="blas")


def bradley_terry(
    judgements: Iterable[Judgement] | Mapping[Hashable, Iterable[Judgement]],
    *,
    items: Sequence[Hashable] | None = None,
    ties: Literal["half", "ignore"] = "half",
    alpha: float = 0.0,
    tol: float = 1e-10,
    max_iter: int = 100,
    weights: Mapping[Hashable, float] | None = None,
    exact_se_max: int = 2000,
) -> BradleyTerryResult:
    """Bradley-Terry strengths with standard errors, pooled over annotators.

    Sparse throughout: memory and time per iteration are O(items + judgements), so 100,000
    items work (``benchmarks/bt_scale.py``).

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
    weights : mapping annotator -> float, optional
        With ``judgements`` a mapping: each annotator's judgements count this much (>= 0),
        e.g. their measured reliability; the fit and its standard errors then treat a
        judgement as ``weight`` comparisons (a weighted likelihood). Default: 1 each.
    exact_se_max : int, default 2000
        Up to this many compared items the standard errors are exact (a dense inverse of
        at most ``exact_se_max``\\ :sup:`2` entries, 32 MB at the default); above it they are
        approximated in O(items + pairs) (Notes).

    Returns
    -------
    BradleyTerryResult
        Log-strengths with sum 0 over the compared items, strengths, standard errors,
        log-likelihood.

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
    method with step halving (it is concave):

    .. math::

        \\ell(\\theta) = \\sum_{i \\neq j} w_{ij} \\log \\sigma(\\theta_i - \\theta_j)
                         - \\frac{\\alpha}{2} \\lVert\\theta\\rVert^2, \\qquad
        P(i \\succ j) = \\frac{\\pi_i}{\\pi_i + \\pi_j} = \\sigma(\\theta_i - \\theta_j)

    The observed information is the weighted graph Laplacian
    :math:`I = L + \\alpha I_n`, :math:`L_{ij} = -c_{ij}`, :math:`c_{ij} = n_{ij} p_{ij}
    p_{ji}` off the diagonal, rows summing to :math:`\\alpha`; it is stored sparse (one entry
    per compared pair), and each Newton step solves :math:`(I + 11^\\top/n) s = \\nabla\\ell`
    by preconditioned conjugate gradients (the rank-one term fixes the gauge
    :math:`\\sum_i \\theta_i = 0` without densifying), to a relative residual that shrinks
    with the gradient (inexact Newton). The covariance under the gauge is
    :math:`P (I + 11^\\top/n)^{-1} P`, :math:`P = I_n - 11^\\top/n` (for ``alpha=0`` the
    pseudo-inverse :math:`L^+`); up to ``exact_se_max`` items its diagonal is computed
    exactly. Above, the variances are the marginal variances that Gaussian belief propagation
    assigns to the information matrix (the Bethe approximation, exact on a comparison
    graph without cycles, O(pairs) per sweep [4]_):

    .. math::

        \\operatorname{se}(\\theta_i)^{-2} \\approx
            d_i - \\sum_j \\frac{c_{ij}^2}{P_{j \\setminus i}},
        \\qquad P_{j \\setminus i} = d_j - \\sum_{k \\neq i} \\frac{c_{jk}^2}{P_{k \\setminus j}}

    with :math:`d_i = \\sum_j c_{ij} + \\alpha`. On random comparison graphs of mean degree 6
    to 30 it is within 2 % of the exact values (``tests/analytics/metrics/
    test_preferences.py``); it errs where short cycles are dense. The Newton steps run with
    one BLAS thread (their products are vector operations, which threads slow down).

    References
    ----------
    .. [1] Bradley, R. A. and Terry, M. E. (1952). Rank analysis of incomplete block designs:
       I. The method of paired comparisons. Biometrika 39(3/4), 324-345.
       DOI 10.2307/2334029.
    .. [2] Hunter, D. R. (2004). MM algorithms for generalized Bradley-Terry models.
       The Annals of Statistics 32(1), 384-406. DOI 10.1214/aos/1079120141.
    .. [3] Eisenstat, S. C. and Walker, H. F. (1996). Choosing the forcing terms in an inexact
       Newton method. SIAM J. Sci. Comput. 17(1), 16-32. DOI 10.1137/0917003.
    .. [4] Weiss, Y. and Freeman, W. T. (2001). Correctness of belief propagation in Gaussian
       graphical models of arbitrary topology. Neural Computation 13(10), 2173-2200.
       DOI 10.1162/089976601750541769.

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
    if weights is not None and not isinstance(judgements, Mapping):
        raise ValueError("weights need judgements given per annotator (a mapping)")
    if isinstance(judgements, Mapping):
        per_annotator = {name: list(judged) for name, judged in judgements.items()}
        pooled = [j for judged in per_annotator.values() for j in judged]
        weight = np.concatenate(
            [
                np.full(len(judged), 1.0 if weights is None else float(weights[name]))
                for name, judged in per_annotator.items()
            ]
            or [np.zeros(0)]
        )
        if (weight < 0).any() or not np.isfinite(weight).all():
            raise ValueError("weights must be finite and >= 0")
    else:
        pooled = list(judgements)
        weight = np.ones(len(pooled))
    coded = _encode(pooled, items=items)
    n_all = len(coded.items)
    decisive = coded.outcome != 0
    winner = np.where(coded.outcome == 1, coded.a, coded.b)
    loser = np.where(coded.outcome == 1, coded.b, coded.a)
    counted = weight > 0
    if ties == "ignore":
        counted &= decisive
    # A tie is one comparison won half by each item: half its weight as a win of either.
    half = np.where(decisive, 1.0, 0.5)[counted] * weight[counted]
    ties_kept = counted & ~decisive
    pairs = _sum_pairs(
        np.concatenate([winner[counted], coded.a[ties_kept]]),
        np.concatenate([loser[counted], coded.b[ties_kept]]),
        np.concatenate([half, 0.5 * weight[ties_kept]]),
        n_all,
    )
    if pairs.i.size == 0:
        raise ValueError("no comparison to fit (all judgements were ties and ties='ignore'?)")
    compared = np.zeros(n_all, dtype=bool)
    compared[pairs.i] = compared[pairs.j] = True
    code = np.cumsum(compared) - 1
    pairs = pairs._replace(i=code[pairs.i], j=code[pairs.j])
    n = int(compared.sum())
    if alpha == 0:
        beats = pairs.wins_i > 0, pairs.total - pairs.wins_i > 0
        edges = coo_matrix(
            (
                np.ones(int(beats[0].sum() + beats[1].sum())),
                (
                    np.concatenate([pairs.i[beats[0]], pairs.j[beats[1]]]),
                    np.concatenate([pairs.j[beats[0]], pairs.i[beats[1]]]),
                ),
            ),
            shape=(n, n),
        )
        n_strong, _ = connected_components(edges, directed=True, connection="strong")
        if n_strong > 1:
            raise ValueError(
                f"the comparison graph splits into {n_strong} strongly connected groups (an item"
                " never lost or never won, or groups never compared): maximum-likelihood"
                " strengths do not exist; pass a small alpha > 0 to regularise"
            )

    def objective(theta: NDArray[np.float64]) -> float:
        return pairs.log_likelihood(theta) - 0.5 * alpha * float(theta @ theta)

    theta = np.zeros(n)
    scale = tol * max(1.0, float(pairs.total.max()))
    first = None
    with _one_blas_thread():
        for _ in range(max_iter):
            gradient = pairs.gradient(theta) - alpha * theta
            if np.max(np.abs(gradient)) <= scale:
                break
            norm = float(np.linalg.norm(gradient))
            first = first or norm
            information = _laplacian(pairs, pairs.edge_information(theta), n, alpha)
            step = _solve_gauged(information, gradient, rtol=max(1e-10, min(0.1, norm / first)))
            step -= step.mean()  # the optimum is sum-zero; an inexact solve drifts off it
            current, size = objective(theta), 1.0
            # Near the optimum the gain falls below the rounding of the objective: accept it.
            slack = 1e-13 * max(1.0, abs(current))
            while objective(theta + size * step) < current - slack and size > 1e-10:
                size /= 2
            theta = theta + size * step
        else:
            warnings.warn(
                f"Bradley-Terry did not converge in {max_iter} iterations",
                RuntimeWarning,
                stacklevel=2,
            )

    edge = pairs.edge_information(theta)
    exact = n <= exact_se_max
    if exact:
        inverse = np.linalg.inv(_laplacian(pairs, edge, n, alpha).toarray() + 1.0 / n)
        row_means = inverse.mean(axis=1)
        se = np.sqrt(np.diag(inverse) - 2 * row_means + row_means.mean())
    else:
        se = _approximate_se(pairs, edge, n, alpha)
    log_strengths = np.full(n_all, np.nan)
    log_strengths[compared] = theta
    full_se = np.full(n_all, np.nan)
    full_se[compared] = se
    return BradleyTerryResult(
        items=coded.items,
        log_strengths=log_strengths,
        strengths=np.exp(log_strengths),
        se=full_se,
        se_exact=exact,
        log_likelihood=pairs.log_likelihood(theta),
    )


def transitivity_kappa_upper(
    n_transitive: int,
    n_complete: int,
    *,
    strict: bool = False,
    tie_rate: float | None = None,
    level: float = 0.95,
) -> float:
    """One-sided upper confidence bound of transitivity kappa (Jeffreys interval).

    Parameters
    ----------
    n_transitive, n_complete, strict, tie_rate
        As :func:`transitivity_kappa_from_counts`.
    level : float, default 0.95
        Confidence level of the one-sided bound, in (0, 1).

    Returns
    -------
    float
        The bound; nan as :func:`transitivity_kappa_from_counts`.

    Notes
    -----
    The share of transitive triplets gets the Jeffreys posterior
    :math:`\\mathrm{Beta}(n_T + 1/2,\\, n_C - n_T + 1/2)`; its ``level`` quantile
    :math:`P_u` maps to kappa as the point estimate does,
    :math:`K_u = (P_u - P(E)) / (1 - P(E))`. Triplets that share pairs are not independent,
    so the bound is somewhat optimistic (too narrow) when the triplets overlap.

    References
    ----------
    .. [1] Brown, L. D., Cai, T. T., & DasGupta, A. (2001). Interval estimation for a binomial
       proportion. Statistical Science, 16(2), 101-133 (the Jeffreys interval).

    Examples
    --------
    A random annotator without ties (3 of 4 triplets transitive, kappa 0): the bound shrinks
    towards 0 as triplets accumulate.

    >>> round(transitivity_kappa_upper(15, 20, tie_rate=0.0), 3)
    0.514
    >>> round(transitivity_kappa_upper(60, 80, tie_rate=0.0), 3)
    0.289
    >>> transitivity_kappa_upper(0, 0)
    nan
    """
    from scipy.stats import beta

    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1); got {level}")
    point = transitivity_kappa_from_counts(
        n_transitive, n_complete, strict=strict, tie_rate=tie_rate
    )
    if math.isnan(point):
        return math.nan
    p_e = (
        _CHANCE_TRANSITIVE[strict]
        if tie_rate is None
        else transitivity_chance(0.0 if strict else tie_rate)
    )
    upper = float(beta.ppf(level, n_transitive + 0.5, n_complete - n_transitive + 0.5))
    return (upper - p_e) / (1 - p_e)


def refine_ranking(
    groups: Sequence[Sequence[Hashable]],
    judgements: Iterable[Judgement],
    *,
    weights: Iterable[float] | None = None,
    max_passes: int = 20,
) -> list[list[Hashable]]:
    """Fit a weak order to every judgement by moving one item at a time (local Kemeny search).

    Parameters
    ----------
    groups : sequence of sequences of hashable
        The starting weak order, best tie group first (e.g. a binary insertion's chain).
        Every judged item must be in it.
    judgements : iterable of (item_a, item_b, outcome)
        All judgements, repeats included (each counts): 1 = a preferred, -1 = b, 0 = tie.
    weights : iterable of float, optional
        One non-negative weight per judgement (e.g. the log-odds of the annotator's measured
        reliability); default 1 each.
    max_passes : int, default 20
        Sweeps over the items; the search stops earlier when a sweep moves nothing.

    Returns
    -------
    list of list of hashable
        A weak order whose weighted disagreement with the judgements is at most the start's.

    Notes
    -----
    The disagreement of a judgement with outcome :math:`o` on a pair the order relates as
    :math:`r \\in \\{1, 0, -1\\}` (a above b, tied, below) is :math:`|o - r|`: 0 when they
    agree, 1 for a tie against a strict relation, 2 for the opposite order. This is the
    Kemeny distance to the judgements [1]_, whose exact minimum (minimum feedback arc set) is
    NP-hard; each step moves one item to the slot (into a tie group, or alone between two
    groups) that lowers the total most, the single-vertex moves of [2]_. A wrong early answer
    of a binary insertion leaves an item next to the pivot it misjudged; the later items'
    answers about it then outweigh that answer and pull it back. Cost per sweep:
    O(J log J + n m) for J judgements, n items and m moves.

    References
    ----------
    .. [1] Kemeny, J. G. (1959). Mathematics without numbers. Daedalus, 88(4), 577-591.
    .. [2] Ali, A., & Meila, M. (2012). Experiments with Kemeny ranking: what works when?
       Mathematical Social Sciences, 64(1), 28-40 (local search by single-item moves).

    Examples
    --------
    >>> refine_ranking([["a"], ["b"], ["c"]], [("a", "b", -1), ("c", "a", 1), ("b", "c", 1)])
    [['b'], ['c'], ['a']]
    """
    order = [list(group) for group in groups if group]
    partners: dict[Hashable, list[tuple[Hashable, int, float]]] = {}
    weight_list = None if weights is None else list(weights)
    for k, (a, b, outcome) in enumerate(judgements):
        w = 1.0 if weight_list is None else float(weight_list[k])
        partners.setdefault(a, []).append((b, outcome, w))
        partners.setdefault(b, []).append((a, -outcome, w))
    for _ in range(max_passes):
        rank = {item: r for r, group in enumerate(order) for item in group}
        moved = False
        for item in list(partners):
            here = rank[item]
            ranks = np.array([rank[other] for other, _, _ in partners[item]], dtype=float)
            outcomes = np.array([o for _, o, _ in partners[item]], dtype=float)
            weight = np.array([w for _, _, w in partners[item]])
            below_cost = weight * np.abs(outcomes - 1)  # cost when the partner ranks below item
            above_cost = weight * np.abs(outcomes + 1)
            tie_cost = weight * np.abs(outcomes)
            alone = len(order[here]) == 1
            # Ranks with the item taken out of its group (its group vanishes when alone).
            ranks = np.where(alone & (ranks > here), ranks - 1, ranks)
            n_groups = len(order) - alone
            position = (here, "new") if alone else (here, "tie")

            def cost(
                slot: tuple[int, str],
                ranks: NDArray[np.float64] = ranks,
                b: NDArray[np.float64] = below_cost,
                a: NDArray[np.float64] = above_cost,
                t: NDArray[np.float64] = tie_cost,
            ) -> float:
                k, kind = slot
                if kind == "new":  # alone between groups k - 1 and k
                    return float(b[ranks >= k].sum() + a[ranks < k].sum())
                return float(b[ranks > k].sum() + a[ranks < k].sum() + t[ranks == k].sum())

            slots = {position, (0, "new"), (n_groups, "new")}
            for r in np.unique(ranks).astype(int).tolist():
                slots |= {(r, "tie"), (r, "new"), (r + 1, "new")}
            current = cost(position)
            best = min(sorted(slots), key=cost)
            if cost(best) < current - 1e-9:
                order[here].remove(item)
                if alone:
                    del order[here]
                k, kind = best
                if kind == "tie":
                    order[k].append(item)
                else:
                    order.insert(k, [item])
                rank = {x: r for r, group in enumerate(order) for x in group}
                moved = True
        if not moved:
            break
    return order


class SideBias(NamedTuple):
    """How often an annotator preferred the item shown on the A side (left)."""

    n_a: int
    n_b: int
    share_a: float
    p_value: float


def side_bias(n_a: int, n_b: int) -> SideBias:
    """Share of decisive answers that chose the A (left) side, with an exact binomial test.

    Parameters
    ----------
    n_a, n_b : int
        Answers preferring the item shown as A, resp. as B (ties left out).

    Returns
    -------
    SideBias
        ``share_a`` = n_a / (n_a + n_b) (nan without an answer) and the two-sided p-value of
        the exact binomial test of share 1/2.

    Notes
    -----
    The scheduler draws the side of every pair at random, so without position bias each
    decisive answer picks A with probability 1/2 whatever the items:
    :math:`n_A \\sim \\mathrm{Binomial}(n_A + n_B, 1/2)`. A small p-value with a share above
    1/2 means a preference for the left item (primacy), below 1/2 for the right (recency).

    References
    ----------
    .. [1] Clopper, C. J., & Pearson, E. S. (1934). The use of confidence or fiducial limits
       illustrated in the case of the binomial. Biometrika, 26(4), 404-413.

    Examples
    --------
    >>> bias = side_bias(70, 30)
    >>> bias.share_a, round(bias.p_value, 5)
    (0.7, 8e-05)
    >>> side_bias(0, 0).p_value
    1.0
    """
    from scipy.stats import binomtest

    total = n_a + n_b
    if total == 0:
        return SideBias(0, 0, math.nan, 1.0)
    return SideBias(n_a, n_b, n_a / total, float(binomtest(n_a, total, 0.5).pvalue))


def reliability_weight(error_rate: float) -> float:
    """Weight of an annotator's judgements in a pooled fit, from their error rate.

    Parameters
    ----------
    error_rate : float
        Estimated probability e in [0, 1] that one of the annotator's answers is wrong.

    Returns
    -------
    float
        :math:`w = \\max(0, 1 - 2e)^2`: 1 for a flawless annotator, 0 from e = 1/2 (random).

    Notes
    -----
    An answer that is wrong with probability e agrees with the true order with expectation
    :math:`1 - 2e` (the correlation of a binary symmetric channel); the information it carries
    about the order, relative to a flawless answer, is that correlation squared for small
    effects, so w counts the annotator's judgements as that many flawless ones [1]_.

    References
    ----------
    .. [1] Chen, X., Bennett, P. N., Collins-Thompson, K., & Horvitz, E. (2013). Pairwise
       ranking aggregation in a crowdsourced setting. WSDM 2013, 193-202 (Crowd-BT: each
       annotator's answers weighted by their estimated reliability).

    Examples
    --------
    >>> reliability_weight(0.0), reliability_weight(0.25), reliability_weight(0.6)
    (1.0, 0.25, 0.0)
    """
    if not 0.0 <= error_rate <= 1.0:
        raise ValueError(f"error_rate must be in [0, 1]; got {error_rate}")
    return max(0.0, 1.0 - 2.0 * error_rate) ** 2
