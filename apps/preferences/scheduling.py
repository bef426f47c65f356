"""Adaptive choice of the next pair to show one annotator in a pairwise-preference study.

Pure Python and numpy (no Django): the view rebuilds a :class:`PairScheduler` from the stored
judgements on every request with :meth:`PairScheduler.from_judgements`, so the server keeps
nothing in memory between requests.

Design
------
The scheduler keeps the **transitive closure** of the annotator's judgements as a boolean
matrix ``ge`` (``ge[x, y]``: x is known to be at least as good as y). Ties merge items into
tie groups; strict preferences between groups form a DAG, so every pair is either known
(x > y, x < y or x ~ y) or incomparable. The session has three kinds of question:

calibration
    The pairs of ``calibration_triplets`` random triplets, asked first, interleaved (first one
    pair of every triplet, then a second, then the third, each layer shuffled) and with random
    sides, so that transitivity kappa is measured from the start. Triplets are item-disjoint
    while items last, then overlap (never repeating a triplet; a pair shared by two triplets is
    asked once).
sort
    Binary insertion of one item at a time into the *chain*: the totally ordered list of tie
    groups placed so far. Items whose place the closure already fixes (from calibration or
    earlier answers) are placed without a question; among the others the item with the
    fewest unknown chain positions goes next, and it is compared with the middle of its
    unknown range. Only pairs incomparable in the closure are asked, so no pair is ever implied
    or repeated. A tie answer merges the item into a group and ends its insertion. Binary
    insertion asks about ``log2 n! + 0.06 n`` pairs on average (``benchmarks/pair_pruning.py``:
    530.5 at n = 100, 1.011 times the information-theoretic minimum ``ceil(log2 n!) = 525``),
    so Ford-Johnson merge insertion, awkward with ties and a partial order, is not used.
audit
    With probability ``audit_rate`` per sort step, a pair the closure already implies and that
    was never asked is asked anyway, preferring pairs that close a triplet of asked pairs (new
    complete triplets for transitivity kappa).

Transitivity kappa (:meth:`PairScheduler.transitivity_kappa`) counts the complete triplets
that contain a calibration or audit answer. Triplets made only of sort answers are transitive
by construction (each was open in the closure when asked), so they would inflate kappa.

Contradictions: an answer that disagrees with the closure (possible only for calibration
and audit pairs, whose answer may be implied) is recorded in :attr:`PairScheduler.judgements`
and :attr:`PairScheduler.contradictions`, and the **earlier implied relation is kept**: the
closure only ever grows, so it stays consistent and the sort never revisits a decision. A
single late answer that contradicts a chain of earlier ones is the more likely slip, and
keeping the latest would mean retracting earlier judgements, whose choice is arbitrary.

Randomness comes only from ``random.Random(seed)``: the calibration plan and the order in
which items enter the sort are drawn at construction, then each new sort step draws the audit
coin (when ``audit_rate > 0``), the audit pair, and the side of the pair, in a fixed order.
Consumption is therefore a function of the judgement history, and replaying the history
reproduces the state exactly.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Iterable, Sequence
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import NDArray

from analytics.metrics.preferences import transitivity_kappa_from_counts, triplet_counts

Kind = Literal["calibration", "sort", "audit"]


class ScheduledJudgement(NamedTuple):
    """One answer, in the orientation the pair was handed out, with the kind of question."""

    item_a: Hashable
    item_b: Hashable
    outcome: int
    kind: Kind


class ClosureContradiction(NamedTuple):
    """An answer that disagrees with what the closure of the earlier answers implied.

    ``index`` is its position in :attr:`PairScheduler.judgements`; ``outcome`` the answer and
    ``implied`` the outcome the closure implied, both in the orientation ``(item_a, item_b)``.
    """

    index: int
    item_a: Hashable
    item_b: Hashable
    outcome: int
    implied: int


class _Positions(NamedTuple):
    """Where every unplaced item may go in the chain (arrays aligned with ``unplaced``).

    The item belongs between chain groups ``lo - 1`` and ``hi`` (exclusive): groups
    ``[lo, hi)`` are incomparable with it. ``tied_group`` is the index of the chain group it
    is known to be tied with, or -1.
    """

    unplaced: NDArray[np.intp]
    lo: NDArray[np.intp]
    hi: NDArray[np.intp]
    tied_group: NDArray[np.intp]

    @property
    def width(self) -> NDArray[np.intp]:
        """Chain groups each item is still incomparable with (0 once its place is known)."""
        return np.where(self.tied_group >= 0, 0, self.hi - self.lo)


class PairScheduler:
    """Choose the pairs one annotator judges, pruning pairs implied by transitivity.

    Parameters
    ----------
    items : sequence of hashable
        The study's items (unique); their order is part of the deterministic state.
    strict : bool, default False
        Strict preferences: a tie answer raises ``ValueError``.
    calibration_triplets : int, default 0
        Number T of triplets whose three pairs are all asked first (see the module docstring);
        at most C(n, 3).
    audit_rate : float, default 0.0
        Probability, in [0, 1), that a sort step asks an already implied pair instead.
    seed : int or str, optional
        Seed of the random stream; store it (e.g. derived from the assignment id) to rebuild
        the scheduler. None gives an unreproducible stream.

    Attributes
    ----------
    judgements : list of ScheduledJudgement
        Every answer in order, with its kind ("calibration", "sort" or "audit").
    contradictions : list of ClosureContradiction
        Answers that disagreed with the closure (kept out of it).

    Notes
    -----
    The sort asks about the information-theoretic minimum of a comparison sort,

    .. math::

        \\lceil \\log_2 n! \\rceil \\approx n \\log_2 n - 1.44\\, n,

    questions for n items with no ties, instead of all :math:`n(n-1)/2` pairs; ties make it
    cheaper (an item tied with a group needs no further question).

    References
    ----------
    .. [1] Amidei, J. (2020). Aligning Intraobserver Agreement by Transitivity.
       arXiv:2009.13905, Section 4 (pruning pairs implied by transitivity).
    .. [2] Knuth, D. E. (1998). The Art of Computer Programming, Vol. 3, 2nd ed.,
       Section 5.3.1 (binary insertion, minimum-comparison sorting).

    Examples
    --------
    >>> truth = {"a": 3, "b": 1, "c": 2, "d": 1}
    >>> s = PairScheduler(list(truth), seed=7)
    >>> while (pair := s.next_pair()) is not None:
    ...     a, b = pair
    ...     s.record(a, b, (truth[a] > truth[b]) - (truth[a] < truth[b]))
    >>> s.ranking()
    [['a'], ['c'], ['b', 'd']]
    >>> len(s.judgements), len(s.contradictions)
    (4, 0)
    """

    def __init__(
        self,
        items: Sequence[Hashable],
        *,
        strict: bool = False,
        calibration_triplets: int = 0,
        audit_rate: float = 0.0,
        seed: int | str | None = None,
    ) -> None:
        self.items: tuple[Hashable, ...] = tuple(items)
        self._index = {item: code for code, item in enumerate(self.items)}
        if len(self._index) != len(self.items):
            raise ValueError("items must be unique")
        n = len(self.items)
        if not 0 <= calibration_triplets <= math.comb(n, 3):
            raise ValueError(
                f"calibration_triplets must be in [0, C({n}, 3) = {math.comb(n, 3)}];"
                f" got {calibration_triplets}"
            )
        if not 0 <= audit_rate < 1:
            raise ValueError(f"audit_rate must be in [0, 1); got {audit_rate}")
        self.strict = strict
        self.audit_rate = audit_rate
        self.judgements: list[ScheduledJudgement] = []
        self.contradictions: list[ClosureContradiction] = []
        self._rng = random.Random(seed)
        self._ge = np.eye(n, dtype=bool)
        self._asked = np.zeros((n, n), dtype=bool)
        # _two_paths[i, j]: items k with (i, k) and (k, j) both asked (asked @ asked, kept
        # incrementally): asking (i, j) then completes that many triplets.
        self._two_paths = np.zeros((n, n), dtype=np.int32)
        self._calibration = self._plan_calibration(calibration_triplets)
        self._calibration_pos = 0
        entry_order = list(range(n))
        self._rng.shuffle(entry_order)
        self._entry_rank = np.argsort(entry_order)
        self._chain: list[list[int]] = []
        self._placed = np.zeros(n, dtype=bool)
        self._pending: tuple[int, int, Kind] | None = None

    @classmethod
    def from_judgements(
        cls,
        items: Sequence[Hashable],
        judgements: Iterable[Sequence[object]],
        *,
        strict: bool = False,
        calibration_triplets: int = 0,
        audit_rate: float = 0.0,
        seed: int | str | None = None,
    ) -> PairScheduler:
        """Rebuild a scheduler by replaying stored judgements.

        Parameters
        ----------
        items, strict, calibration_triplets, audit_rate, seed
            Exactly as given to the original scheduler.
        judgements : iterable of (item_a, item_b, outcome[, kind])
            The stored answers in order; a trailing kind is ignored (it is recomputed).

        Returns
        -------
        PairScheduler
            In the state of the original after these answers: ``next_pair()`` returns the pair
            the original would hand out next.

        Raises
        ------
        ValueError
            If a stored judgement is not the pair the scheduler hands out at that step (the
            history was produced with other settings or another seed).

        Examples
        --------
        >>> s = PairScheduler(["a", "b", "c"], calibration_triplets=1, seed=1)
        >>> a, b = s.next_pair()
        >>> s.record(a, b, 1)
        >>> copy = PairScheduler.from_judgements(
        ...     ["a", "b", "c"], s.judgements, calibration_triplets=1, seed=1
        ... )
        >>> copy.next_pair() == s.next_pair()
        True
        """
        scheduler = cls(
            items,
            strict=strict,
            calibration_triplets=calibration_triplets,
            audit_rate=audit_rate,
            seed=seed,
        )
        for step, (item_a, item_b, outcome, *_) in enumerate(judgements):
            pair = scheduler.next_pair()
            if pair is None or {item_a, item_b} != set(pair):
                raise ValueError(
                    f"stored judgement {step} ({item_a!r}, {item_b!r}) is not the pair the"
                    f" scheduler hands out at that step ({pair!r}); were the items, settings"
                    " and seed the same?"
                )
            scheduler.record(item_a, item_b, outcome)
        return scheduler

    # ----------------------------------------------------------------- public interface

    def next_pair(self) -> tuple[Hashable, Hashable] | None:
        """The pair to judge next, or None once calibration is done and the order is known.

        Calling it again before :meth:`record` returns the same pending pair.

        Returns
        -------
        tuple of (item_a, item_b) or None
            The pair, in the orientation to show (a on the left).
        """
        if self._pending is None:
            self._pending = self._choose()
        if self._pending is None:
            return None
        a, b, _ = self._pending
        return self.items[a], self.items[b]

    def record(self, item_a: Hashable, item_b: Hashable, outcome: int) -> None:
        """Record the answer to the pending pair (either orientation).

        Parameters
        ----------
        item_a, item_b : hashable
            The pending pair, as handed out or swapped.
        outcome : {1, -1, 0}
            1: item_a preferred, -1: item_b preferred, 0: tie.

        Raises
        ------
        ValueError
            Without a pending pair, for another pair than the pending one, for an outcome
            outside {1, -1, 0}, or for a tie in strict mode.
        """
        if self._pending is None:
            raise ValueError("no pair is pending: call next_pair() first")
        a, b, kind = self._pending
        given = (self._index.get(item_a), self._index.get(item_b))
        if outcome not in (-1, 0, 1) or isinstance(outcome, bool):
            raise ValueError(f"outcome must be 1, -1 or 0; got {outcome!r}")
        if given == (b, a):
            outcome = -outcome
        elif given != (a, b):
            raise ValueError(
                f"({item_a!r}, {item_b!r}) is not the pending pair"
                f" ({self.items[a]!r}, {self.items[b]!r})"
            )
        if self.strict and outcome == 0:
            raise ValueError("strict mode: ties are not allowed")
        outcome = int(outcome)
        implied = self._known(a, b)
        if implied is None:
            self._add(a, b, outcome)
        elif implied != outcome:
            self.contradictions.append(
                ClosureContradiction(
                    len(self.judgements), self.items[a], self.items[b], outcome, implied
                )
            )
        self._mark_asked(a, b)
        self.judgements.append(ScheduledJudgement(self.items[a], self.items[b], outcome, kind))
        self._calibration_pos += kind == "calibration"
        self._pending = None

    def ranking(self) -> list[list[Hashable]]:
        """Tie groups of the closure, best first.

        Exact once :meth:`next_pair` returns None. Before that, groups are ordered by the
        count function on the closure (number of items known to be at most as good), a linear
        extension of what is known; items in a group keep the order of ``items``.

        Returns
        -------
        list of list of hashable
        """
        if not self.items:
            return []
        tied = self._ge & self._ge.T
        representative = np.argmax(tied, axis=1)  # first item of each tie group
        counts = self._ge.sum(axis=1)
        groups: dict[int, list[Hashable]] = {}
        for code in sorted(range(len(self.items)), key=lambda c: (-counts[c], representative[c])):
            groups.setdefault(int(representative[code]), []).append(self.items[code])
        return list(groups.values())

    def remaining_estimate(self) -> int:
        """About how many judgements are left.

        Remaining calibration pairs, plus the expected binary-insertion cost of every item
        not yet in the chain, ``log2(w + k + 1)`` for the item with the k-th fewest unknown
        chain positions w (the k items inserted before it may land in its range), scaled by
        ``1 / (1 - audit_rate)`` for the expected audits. Before the sort starts this is
        ``log2 n!``, which ignores what calibration already established.

        Returns
        -------
        int
        """
        width = np.sort(self._positions().width)
        if self._chain:  # against a non-empty chain, width 0 means placed without a question
            width = width[width > 0]
        sort_steps = np.log2(width + np.arange(width.size) + 1).sum()
        calibration_left = len(self._calibration) - self._calibration_pos
        return calibration_left + round(sort_steps / (1 - self.audit_rate))

    def transitivity_kappa(self) -> float:
        """Amidei's transitivity kappa over the triplets that test this annotator.

        Triplets whose three pairs were all *sort* questions are left out: the sort only asks
        pairs the closure leaves open, so such triplets are transitive by construction and
        would pull kappa towards 1. Every triplet containing a calibration or audit answer
        counts. With calibration off and no audit, the result is nan. An audit is chosen
        because two asked pairs imply it, so a random answer keeps its triplet transitive with
        probability 1/3 (strict: 1/2) rather than P(E) = 13/27 (3/4): audits make K slightly
        conservative for careless annotators.

        Returns
        -------
        float
            K over the counted triplets, nan when there is none.
        """
        every = triplet_counts([j[:3] for j in self.judgements], strict=self.strict)
        sort_only = triplet_counts(
            [j[:3] for j in self.judgements if j.kind == "sort"], strict=self.strict
        )
        n_complete = every[1] - sort_only[1]
        return transitivity_kappa_from_counts(
            every[0] - sort_only[0], n_complete, strict=self.strict
        )

    # ------------------------------------------------------------------------ internals

    def _plan_calibration(self, n_triplets: int) -> list[tuple[int, int]]:
        """Draw the calibration triplets and the interleaved order and sides of their pairs."""
        n = len(self.items)
        triplets: list[tuple[int, ...]] = []
        seen: set[tuple[int, ...]] = set()
        while len(triplets) < n_triplets:
            order = list(range(n))
            self._rng.shuffle(order)
            for start in range(0, n - 2, 3):
                triplet = tuple(sorted(order[start : start + 3]))
                if triplet not in seen and len(triplets) < n_triplets:
                    seen.add(triplet)
                    triplets.append(triplet)
        layers: list[list[tuple[int, int]]] = [[], [], []]
        for x, y, z in triplets:
            pairs = [(x, y), (x, z), (y, z)]
            self._rng.shuffle(pairs)
            for layer, pair in zip(layers, pairs, strict=True):
                layer.append(pair)
        plan: list[tuple[int, int]] = []
        planned: set[tuple[int, int]] = set()
        for layer in layers:
            self._rng.shuffle(layer)
            for pair in layer:
                if pair not in planned:
                    planned.add(pair)
                    plan.append(pair if self._rng.random() < 0.5 else pair[::-1])
        return plan

    def _known(self, a: int, b: int) -> int | None:
        """Outcome of (a, b) implied by the closure: 1, -1, 0 (tie), or None if unknown."""
        a_ge_b, b_ge_a = bool(self._ge[a, b]), bool(self._ge[b, a])
        if a_ge_b or b_ge_a:
            return a_ge_b - b_ge_a
        return None

    def _add(self, a: int, b: int, outcome: int) -> None:
        """Add a judgement on an incomparable pair to the closure (one edge per relation)."""
        if outcome == -1:
            a, b = b, a
        self._ge |= np.outer(self._ge[:, a], self._ge[b, :])
        if outcome == 0:
            self._ge |= np.outer(self._ge[:, b], self._ge[a, :])

    def _mark_asked(self, a: int, b: int) -> None:
        """Mark a new pair as asked and count the two-step paths through it."""
        self._two_paths[:, b] += self._asked[:, a]  # i - a - b
        self._two_paths[:, a] += self._asked[:, b]  # i - b - a
        self._two_paths[a, :] += self._asked[b, :]  # a - b - j
        self._two_paths[b, :] += self._asked[a, :]  # b - a - j
        self._asked[a, b] = self._asked[b, a] = True

    def _positions(self) -> _Positions:
        """Range of possible chain positions of every unplaced item (no side effect)."""
        unplaced = np.flatnonzero(~self._placed)
        heads = np.array([group[0] for group in self._chain], dtype=np.intp)
        group_ge_item = self._ge[np.ix_(heads, unplaced)]
        item_ge_group = self._ge[np.ix_(unplaced, heads)].T
        tied = group_ge_item & item_ge_group
        lo = np.count_nonzero(group_ge_item & ~item_ge_group, axis=0)
        hi = len(self._chain) - np.count_nonzero(item_ge_group & ~group_ge_item, axis=0)
        tied_group = np.full(unplaced.size, -1, dtype=np.intp)
        group, item = np.nonzero(tied)  # an item is tied with at most one chain group
        tied_group[item] = group
        return _Positions(unplaced, lo, hi, tied_group)

    def _next_insertion(self) -> tuple[int, int, int] | None:
        """Place every item whose chain position is implied; return the next open insertion.

        Returns ``(item, lo, hi)`` for the unplaced item with the fewest unknown positions
        (ties broken by the random entry order), or None when every item is placed.
        """
        while True:
            positions = self._positions()
            if positions.unplaced.size == 0:
                return None
            width = positions.width
            k = np.lexsort((self._entry_rank[positions.unplaced], width))[0]
            item, lo, hi = (int(v[k]) for v in (positions.unplaced, positions.lo, positions.hi))
            if width[k] > 0:
                return item, lo, hi
            if positions.tied_group[k] >= 0:
                self._chain[positions.tied_group[k]].append(item)
            else:
                self._chain.insert(lo, [item])
            self._placed[item] = True

    def _audit_pair(self) -> tuple[int, int] | None:
        """A never-asked pair the closure implies, preferably one closing an asked triplet."""
        open_implied = np.triu((self._ge | self._ge.T) & ~self._asked, k=1)
        closing = open_implied & (self._two_paths > 0)
        candidates = np.argwhere(closing if closing.any() else open_implied)
        if candidates.size == 0:
            return None
        a, b = candidates[self._rng.randrange(len(candidates))]
        return int(a), int(b)

    def _choose(self) -> tuple[int, int, Kind] | None:
        """Compute the next pending pair (consumes the random stream deterministically)."""
        if self._calibration_pos < len(self._calibration):
            return (*self._calibration[self._calibration_pos], "calibration")
        insertion = self._next_insertion()
        if insertion is None:
            return None
        item, lo, hi = insertion
        a, b, kind = item, self._chain[lo + (hi - lo) // 2][0], "sort"
        if (
            self.audit_rate > 0
            and self._rng.random() < self.audit_rate
            and (audit := self._audit_pair()) is not None
        ):
            (a, b), kind = audit, "audit"
        if self._rng.random() < 0.5:
            a, b = b, a
        return a, b, kind
