"""Adaptive choice of the next pair to show one annotator in a pairwise-preference study.

Pure Python and numpy (no Django). :meth:`PairScheduler.from_judgements` rebuilds a scheduler
by replaying stored judgements; :class:`ReplayCache` keeps replayed schedulers between requests
so that a request replays only the judgements stored since.

Design
------
The scheduler keeps the **transitive closure** of the annotator's judgements implicitly, in
O(n + judgements) memory: the *chain* (the totally ordered list of tie groups of the items
placed so far; an item's group rank gives its relation to every other placed item in O(1)),
plus the answered pairs as edges of a graph ("x is at least as good as y"). Ties merge items
into tie groups; strict preferences between groups form a DAG, so every pair is either known
(x > y, x < y or x ~ y) or incomparable. For an item not yet placed, the closure fixes a range
of chain positions: below the lowest group known to be at least as good and above the highest
group known to be at most as good, found by following its edges through unplaced items only
(only items with an edge have such bounds; all others may go anywhere). Two unplaced items are
related when a path of edges through unplaced items joins them or when the lower bound of one
is at or above the upper bound of the other. The session has three kinds of question:

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
    complete triplets for transitivity kappa). Audit rule 1 keeps the set of pairs that close
    a triplet (each answer adds those it closes with the answers sharing an item) and draws
    uniformly from the implied ones, else from every implied pair: the set holds up to
    sum(questions per item ^ 2) pairs, J^2 / 2 for an annotator who answers "equal" to
    everything. Audit rule 2 draws instead: an answer (x, c) and another answer (c, y) of
    the same item, then (x, y) if never asked and implied, up to eight times, else two placed
    items, up to eight times; O(1) per audit.

Adaptive mode (``adaptive=True``, every session started since; older sessions replay without
it) makes the same scheduler robust to noisy annotators, spending extra questions only where
the evidence says they are needed: binary insertion as a noisy binary search (Feige, Raghavan,
Peleg & Upfal 1994, "Computing with noisy information"), where a wrong answer is caught by
re-asking the comparisons that bound the item's place and undone by backtracking, rather than
by repeating every comparison. Figures: ``benchmarks/pair_pruning.py``.

reliability
    :meth:`PairScheduler.error_rate` estimates the share of wrong answers from every check so
    far (intransitive calibration and audit triplets, re-asked pairs answered differently),
    shrunk towards a 5 % prior; without calibration and audits nothing is measured and every
    answer is trusted (the plain binary insertion above).
verify
    Before an item is placed, the sort answers that bound its place are re-asked when
    error rate x (range width when asked) / 4 >= ``VERIFY_GAIN``: a single wrong answer leaves
    the item next to the pivot it misjudged, so only those answers matter, and the early,
    coarse ones displace it most. A re-ask that agrees settles the pair; otherwise the pair is
    asked until one outcome leads by Wald's margin for the error rate (at most ``MAX_ASKS``).
backtrack
    When the majority overturns the first answer, the item's edge to that pivot is replaced and
    its insertion continues on the other side of the pivot.
calibration
    Calibration answers stay out of the closure (a wrong one would place items without a
    question, out of reach of verification); a sort step reaching such a pair reuses the answer.
audits
    Come at ``audit_rate`` x min(1, error rate / 5 %): rarer for a careful annotator.
ranking
    :meth:`PairScheduler.ranking` fits the closure's weak order to every judgement, repeats
    included (:func:`~analytics.metrics.preferences.refine_ranking`, local Kemeny search).
stop
    :meth:`PairScheduler.check_floor` ends the session early once kappa's one-sided 99.5 %
    upper bound is below the floor (answers indistinguishable from random), instead of asking
    every pair; :meth:`PairScheduler.flagged` warns the manager about noisy annotators too.

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
reproduces the state exactly (with audit rule 1, also for histories stored by the earlier
dense implementation, which made the same choices from n x n matrices).

Cost, for n items and J judgements: constructing a scheduler takes O(n) time (the seeded
shuffles) and O(n) memory; the rest of the state is O(J). A next pair or an answer costs the
items with an edge not yet placed plus the chain's groups (both at most J; more only through
long chains of calibration ties, which take a pass each), an audit O(1) with rule 2 (rule 1:
its candidate set), a kept kappa count O(partners of the two items). A replay of J
judgements costs O(n) plus J such steps. :class:`ExhaustiveOrder` hands out every pair in a
seeded order without listing them, for annotators whose pruning stopped.
"""

from __future__ import annotations

import math
import random
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import Literal, NamedTuple

import numpy as np

from analytics.metrics.preferences import (
    refine_ranking,
    transitivity_kappa_from_counts,
    transitivity_kappa_upper,
)

Kind = Literal["calibration", "sort", "audit", "verify"]


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


class _Group:
    """A tie group of the chain: its items (the first one is the head) and its current rank."""

    __slots__ = ("items", "rank")

    def __init__(self, items: list[int], rank: int) -> None:
        self.items = items
        self.rank = rank


class _Pivot:
    """One sort answer of the item being inserted (adaptive mode): the width of the item's range
    when it was asked, every answer on the pair (item vs pivot; re-asks appended), settled once
    verified or judged not worth verifying."""

    __slots__ = ("outcomes", "settled", "width")

    def __init__(self, width: int, outcome: int) -> None:
        self.width = width
        self.outcomes = [outcome]
        self.settled = False


class TripletCounter:
    """Transitive and complete triplets of one annotator's answers, counted as answers come.

    Each triplet is counted when its third pair is answered, and only when that answer is a
    calibration or audit answer: a sort answer completes its triplets transitively by
    construction (see :meth:`PairScheduler.transitivity_kappa`), for answers on distinct
    pairs. An answer on (a, b) completes one triplet per item already asked with both a and b: O(min
    of their partners) per answer, O(answers) memory, where ``triplet_counts`` builds items x
    items matrices.

    Examples
    --------
    >>> counter = TripletCounter()
    >>> for a, b, outcome in [(1, 2, 1), (2, 3, 1), (3, 1, 1)]:
    ...     counter.add(a, b, outcome, sort=False)
    >>> counter.n_transitive, counter.n_complete
    (0, 1)

    With ``record=True`` it also lists each counted triplet as ``(a, b, third, transitive)``
    in :attr:`triplets` (for the jackknife interval of the same figure).
    """

    def __init__(self, *, record: bool = False) -> None:
        self.triplets: list[tuple[int, int, int, bool]] | None = [] if record else None
        self.n_transitive = 0
        self.n_complete = 0
        self.n_answers = 0
        self.n_ties = 0
        self.partners: defaultdict[int, set[int]] = defaultdict(set)
        self._answers: dict[tuple[int, int], int] = {}  # smaller item first

    def add(self, a: int, b: int, outcome: int, *, sort: bool) -> None:
        """Count an answer on a pair not answered before (1: a preferred, -1: b, 0: tie)."""
        pair = (min(a, b), max(a, b))
        if pair in self._answers:
            raise ValueError(f"the pair {pair} was answered before")
        self._answers[pair] = outcome if a < b else -outcome
        self.n_answers += 1
        self.n_ties += outcome == 0
        if not sort:  # a sort answer completes its triplets transitively by construction
            for third in self.partners[a] & self.partners[b]:
                transitive = self._transitive(a, b, third)
                self.n_complete += 1
                self.n_transitive += transitive
                if self.triplets is not None:
                    self.triplets.append((a, b, third, transitive))
        self.partners[a].add(b)
        self.partners[b].add(a)

    def answer(self, a: int, b: int) -> int:
        """The outcome counted for the pair, oriented as (a, b)."""
        outcome = self._answers[(min(a, b), max(a, b))]
        return outcome if a < b else -outcome

    @property
    def tie_rate(self) -> float:
        """Share of the answers that are ties (0 before any answer)."""
        return self.n_ties / self.n_answers if self.n_answers else 0.0

    def kappa(self, *, strict: bool) -> float:
        """Amidei's transitivity kappa over the counted triplets (nan without one), against the
        chance level of a random annotator with this annotator's own tie rate
        (:func:`analytics.metrics.transitivity_chance`: 3/4 without ties, 13/27 at one third)."""
        return transitivity_kappa_from_counts(
            self.n_transitive, self.n_complete, strict=strict, tie_rate=self.tie_rate
        )

    def _transitive(self, *triplet: int) -> bool:
        """Whether the answers on the three pairs of a triplet form a weak order."""
        at_least = set()  # (x, y): x was judged at least as good as y
        for x, y in ((0, 1), (0, 2), (1, 2)):
            a, b = sorted((triplet[x], triplet[y]))
            outcome = self._answers[(a, b)]
            if outcome >= 0:
                at_least.add((a, b))
            if outcome <= 0:
                at_least.add((b, a))
        return all(
            (x, z) in at_least for x, y in at_least for y2, z in at_least if y == y2 and x != z
        )


def floor_rule() -> str:
    """What happens to an annotator below the transitivity floor, in one sentence: the editor,
    the results page and the annotator's page say the same (they said "asked every pair",
    "confidently below the floor" and "your ranking is complete" of one annotator)."""
    return (
        "An annotator whose transitivity kappa is below the floor with "
        f"{PairScheduler.STOP_LEVEL:.1%} confidence (a one-sided bound on the triplets so far) "
        "is asked no more pairs: their session ends early and they are flagged. Sessions "
        "started before the adaptive scheduler instead ask every remaining pair."
    )


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
    audit_rule : {1, 2}, default 1
        How an audit is chosen (see the module docstring): 1, uniformly among every implied
        pair that closes a triplet of asked pairs, listed (their number grows with the square
        of the questions per item, e.g. when every answer is a tie); 2, drawn in O(1).

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
    .. [3] Feige, U., Raghavan, P., Peleg, D., & Upfal, E. (1994). Computing with noisy
       information. SIAM Journal on Computing, 23(5), 1001-1018.

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

    #: Draws per audit under audit rule 2.
    AUDIT_DRAWS = 8
    #: Adaptive mode: prior of :meth:`error_rate`, ``PRIOR_FAILURES`` failed checks in
    #: ``PRIOR_CHECKS`` (a first guess of 5 %).
    PRIOR_FAILURES = 0.5
    PRIOR_CHECKS = 10.0
    #: Adaptive mode: a sort answer that bounds the inserted item is re-asked when the expected
    #: displacement it risks, error rate x width / 4 chain positions, is at least this.
    VERIFY_GAIN = 0.03
    #: Adaptive mode: audits come at ``audit_rate`` while the error rate is at least this, and
    #: proportionally rarer below it.
    AUDIT_FULL_RATE = 0.05
    #: Adaptive mode: asks of one pair at most while verifying it, and the accepted probability
    #: that the verified outcome is wrong (:meth:`_lead_needed`).
    MAX_ASKS = 7
    VERIFY_RISK = 0.05
    #: Adaptive mode: confidence that kappa is below the floor before the session stops.
    STOP_LEVEL = 0.995
    #: Adaptive mode: estimated error rate from which the manager is warned.
    NOISY_ERROR_RATE = 0.2
    #: Adaptive mode: weight, in sort steps, of the prior guess of re-asks per sort step in
    #: :meth:`remaining_estimate`.
    ESTIMATE_PRIOR_STEPS = 50

    def __init__(
        self,
        items: Sequence[Hashable],
        *,
        strict: bool = False,
        calibration_triplets: int = 0,
        audit_rate: float = 0.0,
        seed: int | str | None = None,
        audit_rule: Literal[1, 2] = 1,
        adaptive: bool = False,
    ) -> None:
        self.items: tuple[Hashable, ...] = tuple(items)
        n = len(self.items)
        if len(set(self.items)) != n:
            raise ValueError("items must be unique")
        if not 0 <= calibration_triplets <= math.comb(n, 3):
            raise ValueError(
                f"calibration_triplets must be in [0, C({n}, 3) = {math.comb(n, 3)}];"
                f" got {calibration_triplets}"
            )
        if not 0 <= audit_rate < 1:
            raise ValueError(f"audit_rate must be in [0, 1); got {audit_rate}")
        if audit_rule not in (1, 2):
            raise ValueError(f"audit_rule must be 1 or 2; got {audit_rule!r}")
        self.strict = strict
        self.audit_rate = audit_rate
        self.audit_rule = audit_rule
        self.adaptive = adaptive
        # Whether the annotator's reliability is measured at all (else every answer is trusted).
        self._measured = calibration_triplets > 0 or audit_rate > 0
        self.judgements: list[ScheduledJudgement] = []
        self.contradictions: list[ClosureContradiction] = []
        self._seed = seed
        self._rng = random.Random(seed)
        # The closure's generating edges: _down[x] holds the items x was judged at least as good
        # as (directly, or through a tie), _up[x] those judged at least as good as x.
        self._down: defaultdict[int, set[int]] = defaultdict(set)
        self._up: defaultdict[int, set[int]] = defaultdict(set)
        self._asked: set[tuple[int, int]] = set()  # (smaller code, larger code)
        self._triplets = TripletCounter()
        # Audit rule 1: the pairs never asked whose two items were both asked with a third one
        # (asking them completes a triplet of asked pairs), the preferred audits.
        self._closing: set[tuple[int, int]] = set()
        # Audit rule 2: the pairs asked while pruning, in order, and each item's partners.
        self._asked_codes: list[tuple[int, int]] = []
        self._neighbours: defaultdict[int, list[int]] = defaultdict(list)
        self._calibration = self._plan_calibration(calibration_triplets)
        self._calibration_pos = 0
        entry_order = list(range(n))
        self._rng.shuffle(entry_order)
        self._entry_order = np.array(entry_order, dtype=np.intp)
        self._entry_rank = np.argsort(self._entry_order)
        self._next_entry = 0  # entry_order[:_next_entry] holds no unplaced item without an edge
        self._chain: list[_Group] = []
        self._group_of: dict[int, _Group] = {}
        self._placed: list[int] = []  # in the order placed
        self._linked: set[int] = set()  # unplaced items with an edge
        self._bounds_cache: dict[int, tuple[int, int]] | None = None
        self._pending: tuple[int, int, Kind] | None = None
        self._exhaustive: ExhaustiveOrder | None = None
        self._stopped_at: int | None = None
        self._exhaustive_position = 0  # every pair before it in the order was asked
        self._codes: dict[Hashable, int] | None = None  # item -> code, built when pruning stops
        # Adaptive mode: the item being inserted, its sort answers (pivot -> _Pivot), the pair
        # under verification, and the verification tallies.
        self._current: int | None = None
        self._pivots: dict[int, _Pivot] = {}
        self._verifying: int | None = None  # the pivot whose answer is being re-asked
        self._verify_checks = 0
        self._verify_disagreements = 0
        self._stopped_early = False
        self._pending_width = 0
        self._kinds: dict[Kind, int] = dict.fromkeys(("calibration", "sort", "audit", "verify"), 0)
        self._sort_steps_at_start = math.lgamma(n + 1) / math.log(2)  # log2 n!, as in the estimate

    @classmethod
    def from_judgements(
        cls,
        items: Sequence[Hashable],
        judgements: Sequence[Sequence[object]],
        *,
        strict: bool = False,
        calibration_triplets: int = 0,
        audit_rate: float = 0.0,
        seed: int | str | None = None,
        audit_rule: Literal[1, 2] = 1,
        adaptive: bool = False,
        pruning_stopped_at: int | None = None,
    ) -> PairScheduler:
        """Rebuild a scheduler by replaying stored judgements.

        Parameters
        ----------
        items, strict, calibration_triplets, audit_rate, seed, audit_rule, adaptive
            Exactly as given to the original scheduler.
        judgements : iterable of (item_a, item_b, outcome[, kind])
            The stored answers in order; a trailing kind is ignored (it is recomputed).
        pruning_stopped_at : int, optional
            Number of judgements after which :meth:`stop_pruning` was called.

        Returns
        -------
        PairScheduler
            In the state of the original after these answers: ``next_pair()`` returns the pair
            the original would hand out next.

        Raises
        ------
        ValueError
            If a stored judgement is not the pair the scheduler hands out at that step (the
            history was produced with other settings or another seed), or, after pruning
            stopped, a pair asked before.

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
            audit_rule=audit_rule,
            adaptive=adaptive,
        )
        scheduler.replay(judgements, pruning_stopped_at=pruning_stopped_at)
        return scheduler

    def replay(
        self, judgements: Sequence[Sequence[object]], *, pruning_stopped_at: int | None = None
    ) -> None:
        """Bring the scheduler up to a longer history: record the judgements it has not seen.

        ``judgements`` is the whole history, whose first ``len(self.judgements)`` must be the
        judgements already recorded (checked in O(1) each); see :meth:`from_judgements`. Costs
        O(new judgements) steps, so a scheduler kept between requests (:class:`ReplayCache`)
        replays only what was stored since.

        Raises
        ------
        ValueError
            As :meth:`from_judgements`; if the history does not extend the judgements recorded
            or pruning stopped earlier than this scheduler's history.
        """
        stop = pruning_stopped_at
        if len(judgements) < len(self.judgements) or not (self.pruning or stop == self._stopped_at):
            raise ValueError("the history does not extend the judgements recorded")
        for step, (item_a, item_b, outcome, *_) in enumerate(judgements):
            if step < len(self.judgements):
                known = self.judgements[step]
                if (item_a, item_b, outcome) not in (
                    (known.item_a, known.item_b, known.outcome),
                    (known.item_b, known.item_a, -known.outcome),
                ):
                    raise ValueError(
                        f"stored judgement {step} differs from the one this scheduler recorded"
                    )
                continue
            if step == stop:
                self.stop_pruning()
            elif stop is not None and step > stop and self.pruning:
                raise ValueError(f"pruning stopped after {stop} judgements, not {step}")
            pair = self.next_pair()
            if self.pruning and (pair is None or {item_a, item_b} != set(pair)):
                raise ValueError(
                    f"stored judgement {step} ({item_a!r}, {item_b!r}) is not the pair the"
                    f" scheduler hands out at that step ({pair!r}); were the items, settings"
                    " and seed the same?"
                )
            self.record(item_a, item_b, outcome)
        if stop is not None and self.pruning:
            if stop != len(self.judgements):
                raise ValueError(
                    f"pruning stopped after {stop} judgements, not {len(self.judgements)}"
                )
            self.stop_pruning()

    def stop_pruning(self) -> None:
        """Ask every pair never asked from now on (answers too inconsistent to prune with).

        :meth:`next_pair` then hands out the pairs never asked in the seeded order of
        :class:`ExhaustiveOrder` (seed ``f"{seed}-exhaustive"``), and :meth:`record` accepts
        any pair never asked, stores it as an ``"audit"`` and leaves the closure as it was: no
        contradiction is looked for (transitivity kappa over the triplets, now all complete,
        measures the annotator's consistency).
        """
        if not self.pruning:
            return
        if self.adaptive:
            self._stopped_early = True
        else:
            self._exhaustive = ExhaustiveOrder(len(self.items), seed=f"{self._seed}-exhaustive")
        self._stopped_at = len(self.judgements)
        self._pending = None

    @property
    def pruning(self) -> bool:
        """False once :meth:`stop_pruning` was called."""
        return self._exhaustive is None and not self._stopped_early

    @property
    def stopped_early(self) -> bool:
        """Adaptive mode: the session ended early, the annotator's answers looking random."""
        return self._stopped_early

    def error_rate(self) -> float:
        """Estimated share of this annotator's answers that are wrong (adaptive mode's guide).

        The posterior mean of the failure rate of the checks so far: a complete calibration or
        audit triplet fails when it is intransitive (one wrong answer in three makes about one
        triplet in three intransitive, so the rate is about the per-answer error rate); a
        verification re-ask fails, counting one half, when it disagrees with the first answer
        (two chances to err). The prior, :attr:`PRIOR_FAILURES` in :attr:`PRIOR_CHECKS`,
        is the first guess before any check. Without calibration and audits nothing is
        measured and every answer is trusted: 0.

        .. math:: \\hat\varepsilon = \frac{(n_C - n_T) + d / 2 + a}{n_C + v + b}

        for :math:`n_T` transitive of :math:`n_C` complete triplets, :math:`d` disagreements
        in :math:`v` re-asks and the prior :math:`a / b`.
        """
        if not self._measured:
            return 0.0
        n_transitive, n_complete = self.triplets
        failures = n_complete - n_transitive + self._verify_disagreements / 2
        return (failures + self.PRIOR_FAILURES) / (
            n_complete + self._verify_checks + self.PRIOR_CHECKS
        )

    def check_floor(self, kappa_floor: float) -> bool:
        """Stop (:meth:`stop_pruning`) if the annotator fell below the floor; True if stopped now.

        Checked after every answer once calibration is over (after each sort, audit or
        verification answer, or when calibration alone settled the order): the rule the
        services apply after each stored judgement, and that ``pruning_stopped_at`` records.
        """
        if not self.pruning or not self.judgements:
            return False
        if self.judgements[-1].kind == "calibration" and self.next_pair() is not None:
            return False
        if not self.below_floor(kappa_floor):
            return False
        self.stop_pruning()
        return True

    def flagged(self, kappa_floor: float) -> bool:
        """Whether the manager is warned about this annotator: stopped below the floor, kappa
        below it, or (adaptive mode) an estimated error rate of :attr:`NOISY_ERROR_RATE` or
        more (:meth:`error_rate`)."""
        noisy = self.adaptive and self.error_rate() >= self.NOISY_ERROR_RATE
        return not self.pruning or self.transitivity_kappa() < kappa_floor or noisy

    def below_floor(self, kappa_floor: float) -> bool:
        """Whether to stop for this annotator: pruning stops (legacy) or the session ends.

        Legacy mode: transitivity kappa below the floor. Adaptive mode: the floor is above
        kappa's one-sided 99.5 % upper bound
        (:func:`~analytics.metrics.preferences.transitivity_kappa_upper`), so an annotator
        whose answers only look noisy keeps going (verification spends the extra questions)
        and one indistinguishable from random stops early. False without a complete triplet.
        """
        if not self.adaptive:
            return self.transitivity_kappa() < kappa_floor
        counter = self._triplets
        return (
            transitivity_kappa_upper(
                counter.n_transitive,
                counter.n_complete,
                strict=self.strict,
                tie_rate=counter.tie_rate,
                level=self.STOP_LEVEL,
            )
            < kappa_floor
        )

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

        Once pruning stopped (:meth:`stop_pruning`), any pair never asked is accepted.

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
        if self._pending is None and self.pruning:
            raise ValueError("no pair is pending: call next_pair() first")
        if outcome not in (-1, 0, 1) or isinstance(outcome, bool):
            raise ValueError(f"outcome must be 1, -1 or 0; got {outcome!r}")
        given = (item_a, item_b)
        a, b, kind = self._pending or (0, 0, "audit")
        if self._pending is not None and given == (self.items[b], self.items[a]):
            outcome = -outcome
        elif self._pending is None or given != (self.items[a], self.items[b]):
            if self.pruning:
                raise ValueError(
                    f"({item_a!r}, {item_b!r}) is not the pending pair"
                    f" ({self.items[a]!r}, {self.items[b]!r})"
                )
            a, b = self._never_asked(item_a, item_b)
        if self.strict and outcome == 0:
            raise ValueError("strict mode: ties are not allowed")
        outcome = int(outcome)
        if kind == "verify":
            self._record_verification(a, b, outcome)
        else:
            if self.pruning and not (self.adaptive and kind == "calibration"):
                implied = self._known(a, b)
                if implied is None:
                    self._add(a, b, outcome)
                elif implied != outcome:
                    self.contradictions.append(
                        ClosureContradiction(
                            len(self.judgements), self.items[a], self.items[b], outcome, implied
                        )
                    )
            self._mark_asked(a, b, outcome, kind)
            if kind == "sort" and self.adaptive:
                x, pivot = (a, b) if a == self._current else (b, a)
                self._pivots[pivot] = _Pivot(self._pending_width, outcome if x == a else -outcome)
        self.judgements.append(ScheduledJudgement(self.items[a], self.items[b], outcome, kind))
        self._kinds[kind] += 1
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
        n = len(self.items)
        count = np.ones(n, dtype=np.intp)  # items known to be at most as good, itself included
        representative = np.arange(n)  # first item of the tie group
        bounds = self._bounds()
        sizes = np.array([len(group.items) for group in self._chain], dtype=np.intp)
        below = np.cumsum(sizes[::-1])[::-1]  # below[r]: placed items in groups r, r + 1, ...
        above_unplaced = np.sort([a for a, _ in bounds.values()])  # groups >= each unplaced item
        for group in self._chain:
            tied = [u for u, (a, b) in bounds.items() if a == b == group.rank]
            members = [*group.items, *tied]
            count[members] = below[group.rank] + np.count_nonzero(above_unplaced >= group.rank)
            representative[group.items] = min(members)
        for u, (_, b) in bounds.items():
            lower = [w for w in bounds if w != u and self._ge(u, w)]
            count[u] = 1 + (below[b] if b < len(self._chain) else 0) + len(lower)
            if bounds[u][0] != b:  # not tied with a chain group: tied only with unplaced items
                representative[u] = min([u, *(w for w in lower if self._ge(w, u))])
        order = np.lexsort((np.arange(n), representative, -count))
        groups: dict[int, list[Hashable]] = {}
        for code in order.tolist():
            groups.setdefault(int(representative[code]), []).append(self.items[code])
        if not self.adaptive:
            return list(groups.values())
        refined = refine_ranking(
            list(groups.values()), [(j.item_a, j.item_b, j.outcome) for j in self.judgements]
        )
        position = {item: k for k, item in enumerate(self.items)}
        return [sorted(group, key=position.__getitem__) for group in refined]

    def remaining_estimate(self) -> int:
        """About how many judgements are left.

        Remaining calibration pairs, plus the expected binary-insertion cost of every item
        not yet in the chain, ``log2(w + k + 1)`` for the item with the k-th fewest unknown
        chain positions w (the k items inserted before it may land in its range), scaled by
        ``1 / (1 - p)`` for the expected audits at audit probability p. Adaptive mode also
        multiplies the expected sort steps S by the questions asked per sort step so far
        (sort, audit and verification questions over the fall of S since the sort started),
        shrunk towards the guess ``(1 + 2 e) / (1 - p)`` for error rate e by
        :attr:`ESTIMATE_PRIOR_STEPS` pseudo-steps: a rate that settles as answers come, so the
        estimate falls by about one per answer (monotone in expectation: each answer halves
        the current range, ``log2`` of it down by one) instead of jumping with every change of
        the error rate. Legacy mode, before the sort starts, gives
        ``log2 n!``, which ignores what calibration already established (adaptive mode keeps
        calibration out of the closure, so there is nothing to ignore). Once pruning
        stopped: exactly the number of pairs never asked (legacy), 0 (adaptive).

        Returns
        -------
        int
        """
        if self._exhaustive is not None:
            return self._exhaustive.size - len(self._asked)
        if self._stopped_early:
            return 0
        chain = len(self._chain)
        widths = sorted(0 if a == b else b - a - 1 for a, b in self._bounds().values())
        linked = len(widths)  # each takes a chain position before the free items
        if chain:  # against a non-empty chain, width 0 means placed without a question
            widths = [w for w in widths if w > 0]
        sort_steps = sum(math.log2(w + k + 1) for k, w in enumerate(widths))
        # The items without an edge may go anywhere (width = chain) and come last in the order:
        # sum of log2(chain + k + 1) over their ranks k, in closed form.
        free = len(self.items) - len(self._group_of) - len(self._linked)
        start = chain + linked + 1
        sort_steps += (math.lgamma(start + free) - math.lgamma(start)) / math.log(2)
        calibration_left = len(self._calibration) - self._calibration_pos
        if not self.adaptive:
            return calibration_left + round(sort_steps / (1 - self.audit_rate))
        # Questions per unit of sort_steps: observed so far, shrunk towards the prior guess.
        asked = len(self.judgements) - self._kinds["calibration"]
        consumed = max(0.0, self._sort_steps_at_start - sort_steps)
        guess = (1 + 2 * self.error_rate()) / (1 - self._audit_probability())
        prior = self.ESTIMATE_PRIOR_STEPS
        return calibration_left + round(sort_steps * (asked + prior * guess) / (consumed + prior))

    def transitivity_kappa(self) -> float:
        """Amidei's transitivity kappa over the triplets that test this annotator.

        A triplet counts when a calibration or audit answer completes it (answers its third
        pair). The sort only asks pairs the closure leaves open, so a sort answer completes its
        triplets transitively whatever it says: counting those, even beside one calibration
        answer, pulled a random annotator's kappa up to about 0.5 against a chance level of
        3/4 (0.76 against 13/27). With calibration off and no audit, the result is nan. An
        audit is chosen because two asked pairs imply it, so a random answer keeps its triplet
        transitive with probability 1/3 (strict: 1/2) rather than P(E) = 13/27 (3/4): audits
        make K slightly conservative for careless annotators. The chance level is that of a
        random annotator with this annotator's own tie rate (:meth:`TripletCounter.kappa`), so
        one who never presses "equal" is not rewarded for it.

        Returns
        -------
        float
            K over the counted triplets, nan when there is none.
        """
        return self._triplets.kappa(strict=self.strict)

    @property
    def triplets(self) -> tuple[int, int]:
        """``(n_transitive, n_complete)`` over the triplets kappa counts (kept per answer)."""
        return self._triplets.n_transitive, self._triplets.n_complete

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

    def _bounds(self) -> dict[int, tuple[int, int]]:
        """Chain bounds ``(above, below)`` of every unplaced item with an edge.

        ``above`` is the rank of the lowest chain group known to be at least as good as the
        item (-1 if none), ``below`` the rank of the highest group known to be at most as good
        (the chain's length if none): the item goes between them, and ``above == below`` means
        it is tied with that group. Only paths through unplaced items need following: a path
        through a placed item is implied by that item's rank. Computed by relaxing the edges
        until nothing changes (the values only grow, resp. shrink, towards the path maxima), and
        cached until the closure or the chain changes.
        """
        if self._bounds_cache is None:
            chain = len(self._chain)
            above = dict.fromkeys(self._linked, -1)
            below = dict.fromkeys(self._linked, chain)
            changed = True
            while changed:
                changed = False
                for item in self._linked:
                    high, low = above[item], below[item]
                    for other in self._up[item]:
                        group = self._group_of.get(other)
                        high = max(high, group.rank if group is not None else above[other])
                    for other in self._down[item]:
                        group = self._group_of.get(other)
                        low = min(low, group.rank if group is not None else below[other])
                    if (high, low) != (above[item], below[item]):
                        above[item], below[item] = high, low
                        changed = True
            self._bounds_cache = {item: (above[item], below[item]) for item in self._linked}
        return self._bounds_cache

    def _ge(self, x: int, y: int) -> bool:
        """Whether the closure knows x to be at least as good as y."""
        group_x, group_y = self._group_of.get(x), self._group_of.get(y)
        if group_x is not None and group_y is not None:
            return group_x.rank <= group_y.rank
        bounds = self._bounds()
        if group_x is not None:
            return y in bounds and group_x.rank <= bounds[y][0]
        if group_y is not None:
            return x in bounds and bounds[x][1] <= group_y.rank
        if x not in bounds or y not in bounds:
            return False
        if bounds[x][1] <= bounds[y][0]:  # x >= a group >= y
            return True
        seen, frontier = {x}, [x]  # a path through unplaced items only
        while frontier:
            for other in self._down[frontier.pop()]:
                if other == y:
                    return True
                if other not in seen and other in bounds:
                    seen.add(other)
                    frontier.append(other)
        return False

    def _known(self, a: int, b: int) -> int | None:
        """Outcome of (a, b) implied by the closure: 1, -1, 0 (tie), or None if unknown."""
        a_ge_b, b_ge_a = self._ge(a, b), self._ge(b, a)
        if a_ge_b or b_ge_a:
            return a_ge_b - b_ge_a
        return None

    def _add(self, a: int, b: int, outcome: int) -> None:
        """Add a judgement on an incomparable pair to the closure (one edge per relation)."""
        if outcome == -1:
            a, b = b, a
        self._down[a].add(b)
        self._up[b].add(a)
        if outcome == 0:
            self._down[b].add(a)
            self._up[a].add(b)
        self._linked.update(item for item in (a, b) if item not in self._group_of)
        self._bounds_cache = None

    def _mark_asked(self, a: int, b: int, outcome: int, kind: Kind) -> None:
        """Mark a new pair as asked, count the triplets it completes, note what it closes."""
        partners = self._triplets.partners
        if self.pruning and self.audit_rule == 1:
            for item, other in ((a, b), (b, a)):
                for third in partners[item]:  # third - item - other
                    closed = (min(third, other), max(third, other))
                    if closed not in self._asked:
                        self._closing.add(closed)
        if self.pruning and self.audit_rule == 2:
            self._asked_codes.append((a, b))
            self._neighbours[a].append(b)
            self._neighbours[b].append(a)
        self._triplets.add(a, b, outcome, sort=kind == "sort")
        pair = (min(a, b), max(a, b))
        self._asked.add(pair)
        self._closing.discard(pair)

    def _place(self, item: int, *, above: int, below: int) -> None:
        """Put an item whose chain position is implied into the chain."""
        if above == below:
            group = self._chain[above]
            group.items.append(item)
        else:
            group = _Group([item], above + 1)
            self._chain.insert(above + 1, group)
            for rank in range(above + 2, len(self._chain)):
                self._chain[rank].rank = rank
        self._group_of[item] = group
        self._placed.append(item)
        self._linked.discard(item)
        self._bounds_cache = None

    def _next_insertion(self) -> tuple[int, int, int, int | None] | None:
        """Place every item whose chain position is implied; return the next open insertion.

        Returns ``(item, lo, hi, None)`` for the unplaced item with the fewest unknown positions
        (ties broken by the random entry order), or None when every item is placed: the item
        goes between chain groups ``lo - 1`` and ``hi``. Items without an edge may go anywhere,
        so among them only the first in entry order is a candidate. Adaptive mode: the item
        under insertion stays the candidate until placed, and before it is placed the last
        element is the pivot whose answer to re-ask (:meth:`_verification_pivot`), if any.
        """
        n = len(self.items)
        while True:
            candidates = [
                (0 if above == below else below - above - 1, self._entry_rank[item], item)
                for item, (above, below) in self._bounds().items()
            ]
            while self._next_entry < n:
                item = int(self._entry_order[self._next_entry])
                if item not in self._group_of and item not in self._linked:
                    candidates.append((len(self._chain), self._next_entry, item))
                    break
                self._next_entry += 1
            current = self._current
            if self.adaptive and current is not None and current in self._bounds():
                above, below = self._bounds()[current]
                width = 0 if above == below else below - above - 1
                placed = [c for c in candidates if c[0] == 0 and c[2] != current]
                candidates = placed or [(width, -1, current)]
            if not candidates:
                return None
            width, _, item = min(candidates)
            above, below = self._bounds().get(item, (-1, len(self._chain)))
            if width > 0:
                return item, above + 1, below, None
            if self.adaptive and item == current:
                pivot = self._verification_pivot(above, below)
                if pivot is not None:
                    return item, above + 1, below, pivot
                self._current, self._pivots = None, {}
            self._place(item, above=above, below=below)

    def _verification_pivot(self, above: int, below: int) -> int | None:
        """Adaptive mode: the pivot whose answer to re-ask before placing the current item.

        The item is about to go between chain groups ``above`` and ``below`` (tied with
        ``above`` when equal). Only the answers on those two bounding groups decide that place:
        a single wrong answer during a binary insertion leaves the item right next to the pivot
        it misjudged, all later answers pushing it that way (noisy binary search [1]_). An
        answer given while the item's range was w groups wide displaces it by about w / 4 groups
        when wrong, so it is re-asked when ``error_rate() * w / 4 >= VERIFY_GAIN``: the coarse
        early steps of a long insertion for a noisy annotator, hardly ever for a careful one.

        References
        ----------
        .. [1] Feige, U., Raghavan, P., Peleg, D., & Upfal, E. (1994). Computing with noisy
           information. SIAM Journal on Computing, 23(5), 1001-1018.
        """
        error_rate = self.error_rate()
        for pivot, answer in self._pivots.items():
            if answer.settled:
                continue
            group = self._group_of.get(pivot)
            if group is not None and group.rank in (above, below):
                if error_rate * answer.width / 4 >= self.VERIFY_GAIN:
                    return pivot
                answer.settled = True
        return None

    def _reuse_calibration(self, item: int, pivot: int) -> None:
        """Adaptive mode: take the calibration answer on (item, pivot) as this sort step's answer.

        Calibration answers stay out of the closure in adaptive mode (a wrong one would place
        items without a question, out of reach of verification); when the insertion reaches a
        pivot already asked in calibration, that answer is used as the step's answer, and can
        be verified like one.
        """
        outcome = self._triplets.answer(item, pivot)
        self._add(item, pivot, outcome)
        self._pivots[pivot] = _Pivot(self._pending_width, outcome)

    def _record_verification(self, a: int, b: int, outcome: int) -> None:
        """Adaptive mode: count a re-ask; once settled, move the item if the median disagrees.

        The pair is asked again until one outcome leads every other by two answers (the first
        re-ask settles it when it agrees), or :attr:`MAX_ASKS` times in all; the most frequent
        outcome wins, the median breaking a tie between counts (a sequential majority vote).
        When the winner differs from the first answer the item's edge to the pivot is replaced,
        which reopens its range on the pivot's other side: the insertion backtracks.
        """
        item, pivot = self._current, self._verifying
        assert item is not None
        assert pivot is not None
        answer = self._pivots[pivot]
        oriented = outcome if (a, b) == (item, pivot) else -outcome
        first = answer.outcomes[0]
        self._verify_checks += 1
        if oriented != first:
            self._verify_disagreements += 1
            implied = first if (a, b) == (item, pivot) else -first
            self.contradictions.append(
                ClosureContradiction(
                    len(self.judgements), self.items[a], self.items[b], outcome, implied
                )
            )
        answer.outcomes.append(oriented)
        tally = sorted((answer.outcomes.count(o) for o in (1, 0, -1)), reverse=True)
        if tally[0] - tally[1] >= self._lead_needed() or len(answer.outcomes) >= self.MAX_ASKS:
            answer.settled = True
            self._verifying = None
            median = sorted(answer.outcomes)[len(answer.outcomes) // 2]
            decided = max((1, 0, -1), key=lambda o: (answer.outcomes.count(o), o == median))
            if decided != first:
                for x, y in ((item, pivot), (pivot, item)):
                    self._down[x].discard(y)
                    self._up[y].discard(x)
                self._add(item, pivot, decided)

    def _lead_needed(self) -> int:
        """How many answers the winning outcome of a verified pair must lead by (at least 2).

        Wald's sequential probability ratio test between "the pair is a > b" and "a < b" for
        answers wrong with probability e: after a lead of L answers the odds of the losing
        side are ``(e / (1 - e)) ** L``; the lead is the smallest L bringing that probability
        to :attr:`VERIFY_RISK` or below (2 at e = 5 %, 3 at 20 %, 4 at 30 %).

        References
        ----------
        .. [1] Wald, A. (1945). Sequential tests of statistical hypotheses. The Annals of
           Mathematical Statistics, 16(2), 117-186.
        """
        error_rate = min(self.error_rate(), 0.45)
        if error_rate <= 0:
            return 2
        odds = self.VERIFY_RISK / (1 - self.VERIFY_RISK)
        return max(2, math.ceil(math.log(odds) / math.log(error_rate / (1 - error_rate))))

    def _audit_pair(self) -> tuple[int, int] | None:
        """A never-asked pair the closure implies, preferably one closing an asked triplet."""
        if self.audit_rule == 2:
            return self._audit_pair_drawn()
        candidates = sorted(pair for pair in self._closing if self._known(*pair) is not None)
        if not candidates:
            related = sorted([*self._group_of, *self._linked])  # no other item has a relation
            candidates = [
                (x, y)
                for k, x in enumerate(related)
                for y in related[k + 1 :]
                if (x, y) not in self._asked and self._known(x, y) is not None
            ]
        if not candidates:
            return None
        return candidates[self._rng.randrange(len(candidates))]

    def _audit_pair_drawn(self) -> tuple[int, int] | None:
        """Audit rule 2: draw an audit in O(1) instead of listing every candidate.

        Up to :attr:`AUDIT_DRAWS` draws of an asked pair ``(x, c)`` (a random answer, a random
        side) and a random other pair ``(c, y)`` asked with c: ``(x, y)`` closes their triplet;
        it is taken if never asked and implied. Failing that, up to as many draws of two placed
        items (always implied), taken if never asked.
        """
        rng = self._rng
        for _ in range(self.AUDIT_DRAWS if self._asked_codes else 0):
            x, centre = self._asked_codes[rng.randrange(len(self._asked_codes))]
            if rng.random() < 0.5:
                x, centre = centre, x
            neighbours = self._neighbours[centre]
            y = neighbours[rng.randrange(len(neighbours))]
            pair = (min(x, y), max(x, y))
            if x != y and pair not in self._asked and self._known(x, y) is not None:
                return pair
        for _ in range(self.AUDIT_DRAWS if len(self._placed) > 1 else 0):
            x, y = (
                self._placed[rng.randrange(len(self._placed))],
                self._placed[rng.randrange(len(self._placed))],
            )
            pair = (min(x, y), max(x, y))
            if x != y and pair not in self._asked:
                return pair
        return None

    def _audit_probability(self) -> float:
        """``audit_rate``; adaptive mode: scaled down by ``error_rate() / AUDIT_FULL_RATE``
        below 1, so a careful annotator is audited less the more evidence there is."""
        if not self.adaptive:
            return self.audit_rate
        return self.audit_rate * min(1.0, self.error_rate() / self.AUDIT_FULL_RATE)

    def _never_asked(self, item_a: Hashable, item_b: Hashable) -> tuple[int, int]:
        """Codes of a pair of distinct items never asked (after pruning stopped)."""
        if self._codes is None:
            self._codes = {item: code for code, item in enumerate(self.items)}
        a, b = self._codes.get(item_a), self._codes.get(item_b)
        if a is None or b is None or a == b or (min(a, b), max(a, b)) in self._asked:
            raise ValueError(f"({item_a!r}, {item_b!r}) is not a pair of items never asked")
        return a, b

    def _choose(self) -> tuple[int, int, Kind] | None:
        """Compute the next pending pair (consumes the random stream deterministically)."""
        if self._exhaustive is not None:
            while self._exhaustive_position < self._exhaustive.size:
                a, b = self._exhaustive.pair(self._exhaustive_position)
                if (min(a, b), max(a, b)) not in self._asked:
                    return a, b, "audit"
                self._exhaustive_position += 1
            return None
        if self._stopped_early:
            return None
        if self._calibration_pos < len(self._calibration):
            return (*self._calibration[self._calibration_pos], "calibration")
        kind: Kind
        if self._verifying is not None:  # the third ask of a pair whose re-ask disagreed
            a, b, kind = self._current, self._verifying, "verify"  # type: ignore[assignment]
        elif (insertion := self._next_insertion()) is None:
            return None
        elif insertion[3] is not None:
            a, b, kind = insertion[0], insertion[3], "verify"
            self._verifying = b
        else:
            item, lo, hi, _ = insertion
            a, b, kind = item, self._chain[lo + (hi - lo) // 2].items[0], "sort"
            if self.adaptive and item != self._current:
                self._current, self._pivots = item, {}
            self._pending_width = hi - lo
            if self.adaptive and (min(a, b), max(a, b)) in self._asked:
                self._reuse_calibration(a, b)
                return self._choose()
            if (
                self.audit_rate > 0
                and self._rng.random() < self._audit_probability()
                and (audit := self._audit_pair()) is not None
            ):
                (a, b), kind = audit, "audit"
        if self._rng.random() < 0.5:
            a, b = b, a
        return a, b, kind


def _mix(value: int) -> int:
    """MurmurHash3's 32-bit finaliser: a fast, well-spread hash of a 32-bit integer."""
    value = ((value ^ (value >> 16)) * 0x85EBCA6B) & 0xFFFFFFFF
    value = ((value ^ (value >> 13)) * 0xC2B2AE35) & 0xFFFFFFFF
    return value ^ (value >> 16)


class ExhaustiveOrder:
    """Every pair of n items once, in a seeded random order, without listing the pairs.

    Position t in ``[0, n(n-1)/2)`` maps to pair index ``p(t)``, ``p`` a keyed four-round
    Feistel permutation of the smallest even-bit-width domain holding every index, restricted
    to the pair indices by cycle walking (at most four tries on average) [1]_; index
    ``j(j-1)/2 + i`` is the pair ``i < j``, shown as ``(i, j)`` or ``(j, i)`` by one hashed bit.
    :meth:`pair` and :meth:`position` cost O(1) time and memory, whatever n.

    Parameters
    ----------
    n : int
        Number of items (codes 0 .. n - 1).
    seed : int or str
        Fixes the order and the orientations.

    References
    ----------
    .. [1] Black, J., & Rogaway, P. (2002). Ciphers with arbitrary finite domains. CT-RSA 2002,
       LNCS 2271, 114-130. doi:10.1007/3-540-45760-7_9

    Examples
    --------
    >>> order = ExhaustiveOrder(4, seed=1)
    >>> pairs = [order.pair(t) for t in range(order.size)]
    >>> sorted(tuple(sorted(pair)) for pair in pairs)
    [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    >>> [order.position(*pair) for pair in pairs]
    [0, 1, 2, 3, 4, 5]
    """

    ROUNDS = 4

    def __init__(self, n: int, *, seed: int | str) -> None:
        self.size = n * (n - 1) // 2
        rng = random.Random(seed)
        self._keys = [rng.getrandbits(32) for _ in range(self.ROUNDS + 1)]
        self._half = (max(1, (self.size - 1).bit_length()) + 1) // 2
        self._half_mask = (1 << self._half) - 1

    def _round(self, k: int, value: int) -> int:
        return _mix(self._keys[k] ^ value) & self._half_mask  # half <= 32 bits up to n = 2^32

    def _encrypt(self, value: int) -> int:
        left, right = value >> self._half, value & self._half_mask
        for k in range(self.ROUNDS):
            left, right = right, left ^ self._round(k, right)
        return (left << self._half) | right

    def _decrypt(self, value: int) -> int:
        left, right = value >> self._half, value & self._half_mask
        for k in reversed(range(self.ROUNDS)):
            left, right = right ^ self._round(k, left), left
        return (left << self._half) | right

    def pair(self, position: int) -> tuple[int, int]:
        """The pair at a position of the order, oriented as it is shown."""
        index = self._encrypt(position)
        while index >= self.size:
            index = self._encrypt(index)
        j = (1 + math.isqrt(1 + 8 * index)) // 2
        i = index - j * (j - 1) // 2
        return (j, i) if _mix(self._keys[-1] ^ index & 0xFFFFFFFF) & 1 else (i, j)

    def position(self, a: int, b: int) -> int:
        """Where the pair ``{a, b}`` (either orientation) comes in the order."""
        i, j = min(a, b), max(a, b)
        position = self._decrypt(j * (j - 1) // 2 + i)
        while position >= self.size:
            position = self._decrypt(position)
        return position


class ReplayCache:
    """Replayed schedulers kept between requests, so that a request replays only new answers.

    A thread-safe least-recently-used store, bounded by the total number of items of the
    schedulers it holds (a scheduler's memory is O(items + judgements)). :meth:`take` removes
    the scheduler kept under a key, so two concurrent requests never share one; the caller
    brings it up to date with :meth:`PairScheduler.replay` and gives it back with :meth:`keep`
    once done (and only if what it recorded was stored).

    Parameters
    ----------
    max_items : int
        Least recently used schedulers are dropped beyond this many items in all.
    """

    def __init__(self, *, max_items: int) -> None:
        self.max_items = max_items
        self._schedulers: OrderedDict[Hashable, PairScheduler] = OrderedDict()
        self._items = 0
        self._lock = threading.Lock()

    def take(self, key: Hashable) -> PairScheduler | None:
        """Remove and return the scheduler kept under ``key``, if any."""
        with self._lock:
            scheduler = self._schedulers.pop(key, None)
            if scheduler is not None:
                self._items -= len(scheduler.items)
            return scheduler

    def keep(self, key: Hashable, scheduler: PairScheduler) -> None:
        """Keep a scheduler under ``key`` (replacing any), dropping the least recently used."""
        if len(scheduler.items) > self.max_items:
            return
        with self._lock:
            previous = self._schedulers.pop(key, None)
            if previous is not None:
                self._items -= len(previous.items)
            self._schedulers[key] = scheduler
            self._items += len(scheduler.items)
            while self._items > self.max_items:
                _, dropped = self._schedulers.popitem(last=False)
                self._items -= len(dropped.items)

    def clear(self) -> None:
        """Forget every scheduler."""
        with self._lock:
            self._schedulers.clear()
            self._items = 0


def _looked_up(pool: np.ndarray, found: Mapping[int, float], missing: float) -> np.ndarray:
    """``found[item]`` for each item of ``pool`` (``missing`` where absent), vectorised: the
    mapping's keys sorted once, the pool looked up by binary search."""
    values = np.full(pool.size, missing, dtype=np.float64)
    if not found:
        return values
    keys = np.fromiter(found.keys(), dtype=np.int64, count=len(found))
    known = np.fromiter(found.values(), dtype=np.float64, count=len(found))
    order = np.argsort(keys, kind="stable")
    keys, known = keys[order], known[order]
    at = np.minimum(np.searchsorted(keys, pool), keys.size - 1)
    hit = keys[at] == pool
    values[hit] = known[at[hit]]
    return values


def _smallest(key: np.ndarray, count: int, tiebreak: np.ndarray) -> np.ndarray:
    """Mask of the ``count`` entries of ``key`` that are smallest, the ties at the threshold
    settled by the smallest ``tiebreak``: two partial sorts, O(len(key))."""
    chosen = np.zeros(key.size, dtype=bool)
    if count <= 0:
        return chosen
    if count >= key.size:
        return ~chosen
    threshold = np.partition(key, count - 1)[count - 1]
    chosen = key < threshold
    tied = np.flatnonzero(key == threshold)
    rest = count - int(chosen.sum())
    if rest < tied.size:
        tied = tied[np.argpartition(tiebreak[tied], rest - 1)[:rest]]
    chosen[tied] = True
    return chosen


def batch_draw(
    items: Sequence[int],
    *,
    size: int,
    coverage: Mapping[int, float],
    uncertainty: Mapping[int, float],
    rng: np.random.Generator,
) -> list[int]:
    """The items one annotator ranks of a question whose pool is larger than a batch.

    Parameters
    ----------
    items : sequence of int
        The annotator's items (their round-1 assignments), in queue order.
    size : int
        Batch size; all of ``items`` when there are no more.
    coverage : mapping item -> int
        In how many annotators' batches each item already is (missing: 0).
    uncertainty : mapping item -> float
        How uncertain each item's pooled position is: the standard error of its pooled
        Bradley-Terry log-strength (missing or nan: never compared, infinitely uncertain).
        :func:`apps.preferences.selectors.batch_uncertainty` gives the stored pooled fit's,
        or :math:`1 / \\sqrt{d_i}` of the judgements :math:`d_i` an item is in before any fit.
    rng : numpy.random.Generator
        Breaks the remaining ties, so that batches drawn in one round differ.

    Returns
    -------
    list of int
        ``size`` items, in queue order.

    Notes
    -----
    Items are taken in order of least coverage first, so every item is in
    ``floor(k size / n)`` or one more of the first k batches (balanced); among items equally
    covered, the largest uncertainty first. A Bradley-Terry standard error is the square root
    of the diagonal of the inverse information (:func:`~analytics.metrics.preferences.
    bradley_terry`), about :math:`1 / \\sqrt{\\sum_j w_j p_{ij} (1 - p_{ij})}` over an
    item's comparisons j of weight :math:`w_j`: it grows with fewer comparisons, with
    comparisons from annotators of low reliability weight, and with lopsided ones (against
    far weaker or stronger items, :math:`p_{ij}` near 0 or 1), so the draw favours the items
    whose pooled position the judgements so far pin down least. Once every item is in a
    batch, the next batches straddle the earlier ones, which joins the batches' rankings into
    one comparison graph. Cost O(items) (partial sorts: ``np.partition``,
    ``np.argpartition``) plus O(m log m) for the m entries of the mappings.
    """
    pool = np.asarray(items, dtype=np.int64)
    if size >= pool.size:
        return [int(item) for item in pool]
    covered = _looked_up(pool, coverage, 0.0)
    spread = np.nan_to_num(_looked_up(pool, uncertainty, np.inf), nan=np.inf, posinf=np.inf)
    tiebreak = rng.random(pool.size)
    threshold = np.partition(covered, size - 1)[size - 1]  # the coverage the batch ends at
    chosen = covered < threshold
    level = np.flatnonzero(covered == threshold)  # the rest comes from these, least certain first
    chosen[level[_smallest(-spread[level], size - int(chosen.sum()), tiebreak[level])]] = True
    return [int(item) for item in pool[chosen]]
