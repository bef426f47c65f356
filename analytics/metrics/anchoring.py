"""The anchoring effect of a model's suggestion on annotators (issue 28).

A question suggests a model's label on a random share of (annotator, item) pairs and holds it
back on the rest. On the **shown** answers, agreement with the model is the *acceptance rate*;
on the **held-out** answers it is how often the annotator reaches the model's label on their
own. The difference is the anchoring effect: how much the suggestion pulls answers towards
the model (Tversky & Kahneman 1974, anchoring, https://doi.org/10.1126/science.185.4157.1124;
for annotation, Beck, Eckman, Ma, Chew & Kreuter 2024, "Order effects in annotation tasks:
further evidence of annotation sensitivity", UncertaiNLP workshop: answers shift with how the
task is presented).
Because the held-out draw is random, the difference estimates the causal effect of showing.

Inputs are per answer: ``agree`` (the answer equals the model's label), ``shown`` (the page
showed the suggestion) and optionally ``seconds`` (time on the item). Pure numpy.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import norm

__all__ = [
    "AnchoringEffect",
    "anchoring_by_annotator",
    "anchoring_effect",
    "anchoring_flag",
    "anchoring_study",
    "newcombe_difference",
]


def wilson_bounds(k: float, n: float, *, confidence: float = 0.95) -> tuple[float, float]:
    r"""Wilson's score interval for a binomial proportion, as two floats (the scalar form
    :func:`newcombe_difference` builds on; :func:`analytics.metrics.wilson_interval` is the
    array form).

    Parameters
    ----------
    k, n : float
        Successes and trials (``0 <= k <= n``).
    confidence : float
        Coverage of the interval, in (0, 1).

    Returns
    -------
    (low, high) : tuple of float
        ``(nan, nan)`` when ``n == 0``.

    Notes
    -----
    With :math:`\hat p = k/n` and :math:`z` the normal quantile of ``(1 + confidence)/2``,

    .. math::

        \frac{\hat p + z^2/(2n) \pm z\sqrt{\hat p(1-\hat p)/n + z^2/(4n^2)}}{1 + z^2/n}.

    References
    ----------
    Wilson, E. B. (1927). Probable inference, the law of succession, and statistical
    inference. JASA 22(158), 209-212. https://doi.org/10.1080/01621459.1927.10502953

    Examples
    --------
    >>> low, high = wilson_bounds(8, 10)
    >>> round(low, 4), round(high, 4)
    (0.4902, 0.9433)
    """
    _check_counts(k, n)
    if n == 0:
        return (float("nan"), float("nan"))
    z = float(norm.ppf(0.5 + confidence / 2))
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    return (float(max(0.0, (centre - half) / scale)), float(min(1.0, (centre + half) / scale)))


def _check_counts(k: float, n: float) -> None:
    if not (0 <= k <= n):
        raise ValueError(f"counts must satisfy 0 <= k <= n, got k={k}, n={n}")


def newcombe_difference(
    k1: float, n1: float, k2: float, n2: float, *, confidence: float = 0.95
) -> tuple[float, float, float]:
    r"""The difference of two independent proportions with Newcombe's hybrid score interval.

    Parameters
    ----------
    k1, n1 : float
        Successes and trials of the first group (shown suggestions).
    k2, n2 : float
        Successes and trials of the second group (held out).
    confidence : float
        Coverage of the interval.

    Returns
    -------
    (difference, low, high) : tuple of float
        :math:`\hat p_1 - \hat p_2` and its interval; all ``nan`` when a group is empty.

    Notes
    -----
    Newcombe's method 10: with Wilson intervals :math:`(l_i, u_i)` of each proportion
    (:func:`wilson_bounds`) and :math:`\hat d = \hat p_1 - \hat p_2`,

    .. math::

        L = \hat d - \sqrt{(\hat p_1 - l_1)^2 + (u_2 - \hat p_2)^2}, \qquad
        U = \hat d + \sqrt{(u_1 - \hat p_1)^2 + (\hat p_2 - l_2)^2}.

    It stays inside [-1, 1], is defined at 0 and n successes, and covers close to its nominal
    level down to small samples, unlike the Wald interval. Equal to
    ``statsmodels.stats.proportion.confint_proportions_2indep(..., method="newcomb")``.

    References
    ----------
    Newcombe, R. G. (1998). Interval estimation for the difference between independent
    proportions: comparison of eleven methods. Statistics in Medicine 17(8), 873-890.
    https://doi.org/10.1002/(SICI)1097-0258(19980430)17:8<873::AID-SIM779>3.0.CO;2-I

    Examples
    --------
    >>> d, low, high = newcombe_difference(56, 70, 48, 80)
    >>> round(d, 4), round(low, 4), round(high, 4)
    (0.2, 0.0524, 0.3339)
    """
    _check_counts(k1, n1)
    _check_counts(k2, n2)
    if n1 == 0 or n2 == 0:
        nan = float("nan")
        return (nan, nan, nan)
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_bounds(k1, n1, confidence=confidence)
    l2, u2 = wilson_bounds(k2, n2, confidence=confidence)
    d = p1 - p2
    low = d - np.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + np.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return (float(d), float(low), float(high))


@dataclass(frozen=True)
class AnchoringEffect:
    """Agreement with the model with and without its suggestion, for one annotator or a study.

    Attributes
    ----------
    n_shown, n_held_out : int
        Answers given with the suggestion shown, and held out.
    agreement_shown, agreement_held_out : float
        Share of those answers equal to the model's label (nan without answers).
    difference, low, high : float
        ``agreement_shown - agreement_held_out`` (the anchoring effect) and its interval.
    acceptance, acceptance_low, acceptance_high : float
        The acceptance rate (= ``agreement_shown``: answers that took the suggestion) and its
        Wilson interval.
    seconds_shown, seconds_held_out : float
        Median seconds per item with and without the suggestion (nan without timed answers).
    """

    n_shown: int
    n_held_out: int
    agreement_shown: float
    agreement_held_out: float
    difference: float
    low: float
    high: float
    acceptance: float
    acceptance_low: float
    acceptance_high: float
    seconds_shown: float
    seconds_held_out: float


def _arrays(
    agree: ArrayLike, shown: ArrayLike, seconds: ArrayLike | None
) -> tuple[NDArray[np.bool_], NDArray[np.bool_], NDArray[np.float64]]:
    a = np.asarray(agree)
    s = np.asarray(shown)
    if a.ndim != 1 or s.shape != a.shape:
        raise ValueError(
            f"agree and shown must be 1-D of the same length, got {a.shape} and {s.shape}"
        )
    t = np.full(a.shape, np.nan) if seconds is None else np.asarray(seconds, dtype=float)
    if t.shape != a.shape:
        raise ValueError(f"seconds must have the shape of agree {a.shape}, got {t.shape}")
    return a.astype(bool), s.astype(bool), t


def _median(values: NDArray[np.float64]) -> float:
    values = values[~np.isnan(values)]
    return float(np.median(values)) if values.size else float("nan")


def _share(k: int, n: int) -> float:
    return k / n if n else float("nan")


def anchoring_effect(
    agree: ArrayLike,
    shown: ArrayLike,
    *,
    seconds: ArrayLike | None = None,
    confidence: float = 0.95,
) -> AnchoringEffect:
    r"""The anchoring effect of one annotator's answers (Newcombe interval).

    Parameters
    ----------
    agree : array_like of bool, shape (n_answers,)
        Whether each answer equals the model's label for its item.
    shown : array_like of bool, shape (n_answers,)
        Whether the suggestion was shown with it (``False``: held out).
    seconds : array_like of float, shape (n_answers,), optional
        Time spent on each item (nan: not timed).
    confidence : float
        Coverage of the intervals.

    Returns
    -------
    AnchoringEffect

    Notes
    -----
    With :math:`k_s` of :math:`n_s` shown answers and :math:`k_h` of :math:`n_h` held-out
    answers equal to the model's label, the effect is
    :math:`\hat\Delta = k_s/n_s - k_h/n_h` with :func:`newcombe_difference`'s interval; the
    acceptance rate is :math:`k_s/n_s` with :func:`wilson_bounds`. Answers of one annotator
    are taken as independent (one answer per item).

    References
    ----------
    Newcombe (1998), see :func:`newcombe_difference`.

    Examples
    --------
    >>> effect = anchoring_effect([1, 1, 1, 1, 0, 1, 0], [1, 1, 1, 1, 1, 0, 0])
    >>> effect.agreement_shown, effect.agreement_held_out, effect.difference
    (0.8, 0.5, 0.30000000000000004)
    """
    a, s, t = _arrays(agree, shown, seconds)
    k1, n1 = int((a & s).sum()), int(s.sum())
    k2, n2 = int((a & ~s).sum()), int((~s).sum())
    d, low, high = newcombe_difference(k1, n1, k2, n2, confidence=confidence)
    acc_low, acc_high = wilson_bounds(k1, n1, confidence=confidence)
    return AnchoringEffect(
        n_shown=n1,
        n_held_out=n2,
        agreement_shown=_share(k1, n1),
        agreement_held_out=_share(k2, n2),
        difference=d,
        low=low,
        high=high,
        acceptance=_share(k1, n1),
        acceptance_low=acc_low,
        acceptance_high=acc_high,
        seconds_shown=_median(t[s]),
        seconds_held_out=_median(t[~s]),
    )


def anchoring_by_annotator(
    annotators: Sequence[Hashable] | ArrayLike,
    agree: ArrayLike,
    shown: ArrayLike,
    *,
    seconds: ArrayLike | None = None,
    confidence: float = 0.95,
) -> dict[Hashable, AnchoringEffect]:
    """:func:`anchoring_effect` of each annotator's answers.

    Parameters
    ----------
    annotators : array_like, shape (n_answers,)
        Who gave each answer.
    agree, shown, seconds, confidence
        As in :func:`anchoring_effect`, one entry per answer.

    Returns
    -------
    dict
        Annotator -> :class:`AnchoringEffect`, in order of first appearance.

    Examples
    --------
    >>> found = anchoring_by_annotator(["a", "a", "b"], [1, 0, 1], [1, 0, 1])
    >>> found["a"].difference, found["b"].n_held_out
    (1.0, 0)
    """
    a, s, t = _arrays(agree, shown, seconds)
    who = np.asarray(annotators, dtype=object)
    if who.shape != a.shape:
        raise ValueError(f"annotators must have the shape of agree {a.shape}, got {who.shape}")
    found: dict[Hashable, AnchoringEffect] = {}
    for name in dict.fromkeys(who.tolist()):
        mine = who == name
        found[name] = anchoring_effect(a[mine], s[mine], seconds=t[mine], confidence=confidence)
    return found


def anchoring_study(
    items: ArrayLike,
    agree: ArrayLike,
    shown: ArrayLike,
    *,
    seconds: ArrayLike | None = None,
    n_boot: int = 2000,
    seed: int | None = 0,
    confidence: float = 0.95,
) -> AnchoringEffect:
    r"""The study's anchoring effect, pooled over annotators, with an item bootstrap.

    Parameters
    ----------
    items : array_like, shape (n_answers,)
        The item of each answer (answers to one item are resampled together).
    agree, shown, seconds
        As in :func:`anchoring_effect`.
    n_boot : int
        Bootstrap replicates.
    seed : int or None
        Seed of the resampling (reproducible figures).
    confidence : float
        Coverage of the percentile interval.

    Returns
    -------
    AnchoringEffect
        ``difference`` is the pooled :math:`\hat\Delta = \sum k_s / \sum n_s - \sum k_h /
        \sum n_h`; ``low``/``high`` its percentile interval over items; the acceptance interval
        is Wilson's on the pooled counts.

    Notes
    -----
    Answers to one item share its difficulty (and the model's label), so they are not
    independent; resampling whole items (a cluster bootstrap; Davison & Hinkley 1997, section
    3.8) keeps that dependence. Each replicate draws ``n_items`` items with replacement and
    recomputes the pooled difference from the drawn items' counts; replicates with an empty
    group are dropped. The percentile interval is the ``(1 -+ confidence)/2`` quantiles.
    When every replicate gives the same difference (no answer varies within its group, e.g.
    none agrees with the model), a percentile interval would have zero width; the pooled
    Newcombe interval (:func:`anchoring_effect`) is returned instead.

    References
    ----------
    Davison, A. C. & Hinkley, D. V. (1997). Bootstrap Methods and their Application.
    Cambridge University Press. https://doi.org/10.1017/CBO9780511802843

    Examples
    --------
    >>> effect = anchoring_study([1, 1, 2, 2, 3, 3], [1, 1, 1, 0, 1, 0], [1, 0, 1, 0, 1, 0])
    >>> effect.difference
    0.6666666666666667
    """
    a, s, t = _arrays(agree, shown, seconds)
    keys = np.asarray(items)
    if keys.shape != a.shape:
        raise ValueError(f"items must have the shape of agree {a.shape}, got {keys.shape}")
    point = anchoring_effect(a, s, seconds=t, confidence=confidence)
    if a.size == 0 or point.n_shown == 0 or point.n_held_out == 0:
        return point
    _, index = np.unique(keys, return_inverse=True)
    n_items = int(index.max()) + 1
    counts = np.stack(
        [
            np.bincount(index, weights=(a & s).astype(float), minlength=n_items),
            np.bincount(index, weights=s.astype(float), minlength=n_items),
            np.bincount(index, weights=(a & ~s).astype(float), minlength=n_items),
            np.bincount(index, weights=(~s).astype(float), minlength=n_items),
        ],
        axis=1,
    )
    rng = np.random.default_rng(seed)
    # multiplicities of each item in each replicate: (n_boot, n_items)
    weights = rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=n_boot)
    sums = weights @ counts
    ok = (sums[:, 1] > 0) & (sums[:, 3] > 0)
    diffs = sums[ok, 0] / sums[ok, 1] - sums[ok, 2] / sums[ok, 3]
    if diffs.size == 0 or np.ptp(diffs) == 0:
        return point  # no spread to resample (e.g. every answer agrees): Newcombe's interval
    tail = (1 - confidence) / 2
    low, high = np.quantile(diffs, [tail, 1 - tail])
    return AnchoringEffect(**{**point.__dict__, "low": float(low), "high": float(high)})


def anchoring_flag(
    effect: AnchoringEffect,
    *,
    acceptance_floor: float = 0.9,
    min_shown: int = 10,
    min_held_out: int = 3,
) -> str | None:
    """A plain reason to look at an annotator who takes nearly every suggestion, faster.

    Parameters
    ----------
    effect : AnchoringEffect
        The annotator's figures.
    acceptance_floor : float
        Flag when the acceptance rate's whole interval lies above it.
    min_shown, min_held_out : int
        Evidence needed: shown and held-out answers.

    Returns
    -------
    str or None
        The reason, e.g. "accepts 98% of suggestions [93%, 100%] and takes 2.1 s per item
        with one against 6.0 s without", or ``None``. It needs both: an acceptance interval
        above the floor and a lower median time with the suggestion than without (an
        annotator who agrees with a good model but still takes their time is not flagged).

    Examples
    --------
    >>> e = anchoring_effect([1] * 40 + [0, 1, 0, 0], [1] * 40 + [0] * 4,
    ...                      seconds=[2.0] * 40 + [6.0] * 4)
    >>> anchoring_flag(e)  # doctest: +ELLIPSIS
    'accepts 100% of suggestions [91%, 100%] and takes 2.0 s per item with one against 6.0 s...'
    """
    if effect.n_shown < min_shown or effect.n_held_out < min_held_out:
        return None
    if not effect.acceptance_low > acceptance_floor:
        return None
    if not effect.seconds_shown < effect.seconds_held_out:
        return None
    return (
        f"accepts {effect.acceptance:.0%} of suggestions [{effect.acceptance_low:.0%}, "
        f"{effect.acceptance_high:.0%}] and takes {effect.seconds_shown:.1f} s per item with "
        f"one against {effect.seconds_held_out:.1f} s without"
    )
