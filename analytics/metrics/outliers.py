"""Annotator outlier flags with robust statistics, heatmap ordering and kappa bands.

A flag needs enough evidence (items, pairs, triplets) and carries a readable reason. Scores
are robust z-scores (median and MAD), so one bad annotator does not hide behind the spread it
creates; per-study floors (a Landis-Koch band for kappa, 0.667 for Krippendorff's alpha, a
transitivity-kappa floor) catch the case where everybody is equally bad.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.cluster.hierarchy import leaves_list, linkage
from scipy.spatial.distance import squareform

from analytics.metrics._validate import as_square

__all__ = [
    "IntervalFlag",
    "OutlierFlag",
    "agglomerative_order",
    "flag_outliers",
    "flag_with_intervals",
    "landis_koch_band",
    "mean_with_others",
    "robust_z",
]

#: Consistency constants: 1.4826 * MAD and 1.2533 * mean absolute deviation estimate the
#: standard deviation of a normal distribution.
_MAD_SCALE = 1.4826
_MEANAD_SCALE = 1.253314

_LANDIS_KOCH = ((0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial"))


def robust_z(values: ArrayLike) -> NDArray[np.float64]:
    r"""Robust z-scores: distance to the median in units of the scaled MAD.

    Parameters
    ----------
    values : array_like, shape (n,)
        Scores; nan entries are ignored and stay nan.

    Returns
    -------
    ndarray, shape (n,)
        :math:`z_i`; when MAD = 0 (more than half the values equal) the scaled mean absolute
        deviation is used instead; when that is 0 too, every value is the median and z = 0.

    Notes
    -----
    .. math:: z_i = \frac{x_i - \operatorname{med}(x)}{1.4826\, \operatorname{MAD}}, \qquad
              \operatorname{MAD} = \operatorname{med}_i |x_i - \operatorname{med}(x)|

    and with MAD = 0, :math:`z_i = (x_i - \operatorname{med}(x)) / (1.2533\,
    \operatorname{mean}_i |x_i - \operatorname{med}(x)|)`.

    References
    ----------
    Iglewicz, B. & Hoaglin, D. C. (1993). How to Detect and Handle Outliers. ASQC Quality Press.

    Leys, C., Ley, C., Klein, O., Bernard, P. & Licata, L. (2013). Detecting outliers: do not
    use standard deviation around the mean, use absolute deviation around the median. Journal
    of Experimental Social Psychology 49(4), 764-766. doi:10.1016/j.jesp.2013.03.013

    Examples
    --------
    >>> robust_z([0.50, 0.52, 0.55, 0.48, 0.05, np.nan]).round(2)
    array([  0.  ,   0.67,   1.69,  -0.67, -15.18,    nan])
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"values must be a non-empty 1-D array; got shape {x.shape}")
    finite = x[~np.isnan(x)]
    if finite.size == 0:
        return np.full(x.shape, np.nan)
    median = np.median(finite)
    deviation = np.abs(finite - median)
    scale = _MAD_SCALE * np.median(deviation)
    if scale == 0:
        scale = _MEANAD_SCALE * deviation.mean()
    if scale == 0:
        return np.where(np.isnan(x), np.nan, 0.0)
    return (x - median) / scale


@dataclass(frozen=True)
class OutlierFlag:
    """One flagged annotator on one indicator.

    Attributes
    ----------
    annotator : int
        Row index of the annotator.
    indicator : str
        Key of the indicator in ``indicators``.
    value, median, z : float
        The annotator's value, the study median (over annotators with enough evidence) and
        the robust z-score.
    evidence : int
        Items (pairs, triplets) behind the value.
    reason : str
        Readable explanation, e.g. "kappa with others 0.05; study median 0.52; robust z -4.1;
        180 items".
    """

    annotator: int
    indicator: str
    value: float
    median: float
    z: float
    evidence: int
    reason: str


def flag_outliers(
    indicators: Mapping[str, ArrayLike],
    evidence: ArrayLike,
    *,
    min_evidence: int,
    z_threshold: float | Mapping[str, float] = -3.5,
    floors: Mapping[str, float] | None = None,
    names: Mapping[str, str] | None = None,
    evidence_unit: str = "items",
) -> list[OutlierFlag]:
    r"""Flag annotators whose indicators stand out from the study, with a reason.

    Parameters
    ----------
    indicators : mapping of str -> array_like, shape (n_annotators,)
        Per-annotator scores, e.g. ``{"kappa": mean kappa with others, "skew": label_skew}``.
    evidence : array_like, shape (n_annotators,)
        Items (or pairs, triplets) behind each annotator's scores.
    min_evidence : int
        Annotators with less evidence are neither flagged nor counted in the study median.
    z_threshold : float or mapping of str -> float
        Robust z at or beyond which a value is flagged; the sign gives the bad direction:
        negative = low values are bad (kappa, alpha), positive = high values are bad (AAD,
        skew). One number for all indicators or one per indicator (default -3.5).
    floors : mapping of str -> float, optional
        Absolute limits on the bad side, flagged whatever the z-score (e.g. ``{"kappa": 0.2}``
        for "slight" agreement, ``{"alpha": 0.667}``).
    names : mapping of str -> str, optional
        Readable indicator names for the reason text (default the keys).
    evidence_unit : str
        Unit of ``evidence`` in the reason text.

    Returns
    -------
    list of OutlierFlag
        Ordered by annotator, then indicator.

    Notes
    -----
    Annotator :math:`k` is flagged on indicator :math:`j` when :math:`e_k \ge e_{min}` and

    .. math:: z_{kj} \le t_j \ (t_j < 0) \quad\text{or}\quad z_{kj} \ge t_j \ (t_j > 0)
              \quad\text{or } x_{kj} \text{ is beyond the floor } f_j

    with :math:`z_{kj}` from :func:`robust_z` over the annotators with enough evidence.

    References
    ----------
    Iglewicz, B. & Hoaglin, D. C. (1993). How to Detect and Handle Outliers. ASQC Quality Press
    (the 3.5 cut-off of the modified z-score).

    Examples
    --------
    >>> kappa = [0.50, 0.52, 0.55, 0.48, 0.05, 0.51]
    >>> flags = flag_outliers({"kappa": kappa}, [200, 180, 150, 210, 180, 3], min_evidence=20,
    ...                       names={"kappa": "kappa with others"})
    >>> [(f.annotator, f.reason) for f in flags]
    [(4, 'kappa with others 0.05; study median 0.50; robust z -15.2; 180 items')]
    """
    counts = np.asarray(evidence, dtype=np.float64)
    if counts.ndim != 1 or counts.size == 0:
        raise ValueError(f"evidence must be a non-empty 1-D array; got shape {counts.shape}")
    floors = floors or {}
    names = names or {}
    unknown = (set(floors) | set(names)) - set(indicators)
    if isinstance(z_threshold, Mapping):
        unknown |= set(z_threshold) - set(indicators)
    if unknown:
        raise ValueError(
            f"unknown indicator(s) {sorted(unknown)}; indicators are {sorted(indicators)}"
        )
    enough = counts >= min_evidence
    flags = []
    for key, raw in indicators.items():
        values = np.asarray(raw, dtype=np.float64)
        if values.shape != counts.shape:
            raise ValueError(
                f"indicator {key!r} has shape {values.shape}; evidence has shape {counts.shape}"
            )
        threshold = z_threshold[key] if isinstance(z_threshold, Mapping) else z_threshold
        if threshold == 0:
            raise ValueError(f"z_threshold for {key!r} must be non-zero (its sign is the bad side)")
        sign = np.sign(threshold)
        eligible = enough & ~np.isnan(values)
        if not eligible.any():
            continue
        z = np.full(values.shape, np.nan)
        z[eligible] = robust_z(values[eligible])
        median = float(np.median(values[eligible]))
        beyond_floor = sign * (values - floors.get(key, np.inf * sign)) > 0
        hit = eligible & ((sign * z >= abs(threshold)) | beyond_floor)
        for k in np.flatnonzero(hit):
            reason = (
                f"{names.get(key, key)} {values[k]:.2f}; study median {median:.2f}; "
                f"robust z {z[k]:.1f}; {int(counts[k])} {evidence_unit}"
            )
            if beyond_floor[k]:
                side = "below" if sign < 0 else "above"
                reason += f"; {side} the floor {floors[key]:.2f}"
            flags.append(
                OutlierFlag(
                    int(k), key, float(values[k]), median, float(z[k]), int(counts[k]), reason
                )
            )
    order = {key: i for i, key in enumerate(indicators)}
    return sorted(flags, key=lambda f: (f.annotator, order[f.indicator]))


MIN_TEAM_FOR_ROBUST_Z = 8
"""Fewest annotators with enough evidence for the robust-z rule of :func:`flag_with_intervals`
(below it, the MAD's small-sample bias and spread make z-scores meaningless)."""

FlagRule = Literal["floor", "reaches", "robust_z", "separated"]
"""The rules of :func:`flag_with_intervals`."""


@dataclass(frozen=True)
class IntervalFlag:
    """One annotator flagged on one indicator, as a statistical statement.

    Attributes
    ----------
    annotator : int
        Row index of the annotator.
    rule : {"floor", "reaches", "robust_z", "separated"}
        Which rule fired (see :func:`flag_with_intervals`).
    estimate, low, high : float
        The annotator's figure and its interval.
    evidence : int
        Units behind the figure.
    reason : str
        E.g. "kappa with others 0.06 [-0.05, 0.17], below the floor 0.20; 180 items".
    """

    annotator: int
    rule: FlagRule
    estimate: float
    low: float
    high: float
    evidence: int
    reason: str


def flag_with_intervals(
    estimate: ArrayLike,
    low: ArrayLike,
    high: ArrayLike,
    evidence: ArrayLike,
    *,
    min_evidence: int,
    bad_side: Literal["low", "high"] = "low",
    floor: float | None = None,
    reaches: float | None = None,
    reaches_meaning: str = "",
    z_threshold: float = 3.5,
    min_team: int = MIN_TEAM_FOR_ROBUST_Z,
    name: str = "value",
    evidence_unit: str = "items",
    notes: Sequence[str | None] | None = None,
) -> list[IntervalFlag]:
    r"""Flag annotators whose interval says they are bad, with a rule that suits small teams.

    Parameters
    ----------
    estimate, low, high : array_like, shape (n_annotators,)
        Each annotator's figure and its interval (nan estimate = undefined: never flagged;
        nan bounds = no interval, e.g. from a single unit: the value itself is judged, as a
        point interval, and the reason says "(no interval)").
    evidence : array_like, shape (n_annotators,)
        Units behind each figure (items, repeats, triplets, steps).
    min_evidence : int
        Annotators with less evidence are neither flagged nor used as colleagues.
    bad_side : {"low", "high"}
        Low values are bad (kappa, alpha, competence) or high values are (AAD, skew).
    floor : float, optional
        Absolute limit on the bad side (e.g. 0.2 for kappa: "slight" agreement).
    reaches : float, optional
        A value the figure must be told apart from (e.g. 0 for MACE trust: random answering):
        flagged when the interval reaches it on the bad side.
    reaches_meaning : str
        What ``reaches`` stands for, in the reason ("random answering").
    z_threshold : float
        Robust z (positive number) at or beyond which the robust-z rule may fire.
    min_team : int
        Fewest eligible annotators for the robust-z rule; smaller teams use the separation
        rule instead.
    name, evidence_unit : str
        Words of the reason.
    notes : sequence of str or None, optional
        Per annotator, a plain-words sentence put before the reason (what was compared, e.g.
        "agrees with the other annotators' consensus on 9 of 30 items (chance 8)").

    Returns
    -------
    list of IntervalFlag
        At most one per annotator (the first rule that fires, in the order below), by row.

    Notes
    -----
    Writing everything for ``bad_side="low"`` (mirror it for "high"), eligible annotators
    :math:`E = \{k : e_k \ge e_{min}, \hat\theta_k \text{ defined}\}` and
    :math:`\tilde\theta_{-k} = \operatorname{med}_{l \in E, l \ne k} \hat\theta_l`,
    annotator :math:`k \in E` with interval :math:`[L_k, U_k]` is flagged by

    1. **floor**: the whole interval lies beyond the floor, :math:`U_k < f`. A statement
       about the annotator alone, valid for any team size.
    2. **reaches**: the interval reaches the reference value, :math:`L_k \le r`: the figure
       cannot be told from it (e.g. MACE trust 0, random answering). Also about the
       annotator alone; it needs the minimum evidence, since every interval of a handful of
       items reaches the reference.
    3. **robust_z** (:math:`|E| \ge` ``min_team``): :math:`z_k \le -t` (:func:`robust_z`
       over :math:`E`) *and* :math:`U_k < \tilde\theta_{-k}`: extreme among colleagues and
       reliably below the others' median, not merely noisy.
    4. **separated** (:math:`2 \le |E| <` ``min_team``): :math:`U_k < \min_{l \in E, l \ne
       k} L_l`, the interval lies wholly below every colleague's interval: a leave-one-out
       comparison that needs no scale estimate.

    Why not the robust z for small teams: the MAD of 5 values is a median of 5 distances,
    so it can be near 0 when 3 colleagues happen to agree closely, and then any colleague
    gets an enormous z (AAD z = 23.4 on 5 annotators); its small-sample bias needs
    correction factors that differ markedly from 1 up to n = 9 (Rousseeuw & Croux 1993).
    Non-overlap of two 95 % intervals is a conservative test of a difference (Schenker &
    Gentleman 2001: it rejects at well under 5 %), so the separation rule errs towards not
    flagging, which is the right side for a small team.

    References
    ----------
    Iglewicz, B. & Hoaglin, D. C. (1993). How to Detect and Handle Outliers. ASQC Quality
    Press (the 3.5 cut-off of the modified z-score).

    Rousseeuw, P. J. & Croux, C. (1993). Alternatives to the median absolute deviation.
    Journal of the American Statistical Association 88(424), 1273-1283.
    doi:10.1080/01621459.1993.10476408

    Schenker, N. & Gentleman, J. F. (2001). On judging the significance of differences by
    examining the overlap between confidence intervals. The American Statistician 55(3),
    182-186. doi:10.1198/000313001317097960

    Examples
    --------
    >>> flags = flag_with_intervals(
    ...     [0.55, 0.52, 0.06, 0.60, 0.49], [0.45, 0.41, -0.05, 0.50, 0.38],
    ...     [0.65, 0.63, 0.17, 0.70, 0.60], [200, 180, 180, 150, 210],
    ...     min_evidence=20, floor=0.2, name="kappa with others")
    >>> [(f.annotator, f.rule, f.reason) for f in flags]
    [(2, 'floor', 'kappa with others 0.06 [-0.05, 0.17], below the floor 0.20; 180 items')]
    >>> flags = flag_with_intervals(
    ...     [0.9, 0.05], [0.7, 0.0], [1.0, 0.4], [30, 30], min_evidence=20, reaches=0.0,
    ...     reaches_meaning="random answering", name="trust (MACE)",
    ...     notes=[None, "agrees with the others' consensus on 9 of 30 items (chance 8)"])
    >>> flags[0].reason  # doctest: +NORMALIZE_WHITESPACE
    "agrees with the others' consensus on 9 of 30 items (chance 8); trust (MACE) 0.05
    [0.00, 0.40], interval reaches 0.00 (random answering); 30 items"
    """
    if bad_side not in ("low", "high"):
        raise ValueError(f"bad_side must be 'low' or 'high'; got {bad_side!r}")
    if not z_threshold > 0:
        raise ValueError(f"z_threshold must be a positive number; got {z_threshold}")
    arrays = [np.asarray(a, dtype=np.float64) for a in (estimate, low, high, evidence)]
    if any(a.ndim != 1 or a.shape != arrays[0].shape for a in arrays):
        raise ValueError("estimate, low, high and evidence must be 1-D arrays of one length")
    est, lo, hi, counts = arrays
    if notes is not None and len(notes) != est.size:
        raise ValueError(f"notes must hold one entry per annotator ({est.size}); got {len(notes)}")
    # mirror "high is bad" to "low is bad": negate and swap the bounds
    sign = 1.0 if bad_side == "low" else -1.0
    est, lo, hi = sign * est, np.where(sign > 0, lo, -hi), np.where(sign > 0, hi, -lo)
    # a figure without an interval (too few units for one) is judged on its value alone
    pointwise = np.isnan(lo) | np.isnan(hi)
    lo, hi = np.where(pointwise, est, lo), np.where(pointwise, est, hi)
    eligible = (counts >= min_evidence) & ~np.isnan(est)
    team = np.flatnonzero(eligible)
    z = np.full(est.shape, np.nan)
    if team.size:
        z[team] = robust_z(est[team])
    side = "below" if bad_side == "low" else "above"
    flags = []
    for k in team:
        others = team[team != k]
        rule: FlagRule | None = None
        statement = ""
        if floor is not None and hi[k] < sign * floor:
            rule, statement = "floor", f"{side} the floor {floor:.2f}"
        elif reaches is not None and lo[k] <= sign * reaches:
            rule = "reaches"
            statement = f"{'interval reaches' if not pointwise[k] else 'at'} {reaches:.2f}"
            statement += f" ({reaches_meaning})" if reaches_meaning else ""
        elif others.size and team.size >= min_team:
            # the others' median only for an extreme z: a median per annotator was 80 % of a
            # live publish's flag evaluation (128 annotators, 5 figures: 520 medians)
            if z[k] <= -z_threshold and hi[k] < (median := float(np.median(est[others]))):
                rule = "robust_z"
                statement = (
                    f"{side} the others' median {sign * median:.2f}; robust z "
                    f"{sign * z[k]:.1f} among {team.size} annotators"
                )
        elif others.size and hi[k] < np.nanmin(lo[others]):
            rule = "separated"
            statement = f"{side} every colleague's interval ({others.size} colleagues)"
        if rule is None:
            continue
        value, bounds = sign * est[k], sorted((sign * lo[k], sign * hi[k]))
        shown = " (no interval)" if pointwise[k] else f" [{bounds[0]:.2f}, {bounds[1]:.2f}]"
        reason = f"{name} {value:.2f}{shown}, {statement}; {int(counts[k])} {evidence_unit}"
        note = notes[int(k)] if notes is not None else None
        if note:
            reason = f"{note}; {reason}"
        flags.append(
            IntervalFlag(int(k), rule, float(value), bounds[0], bounds[1], int(counts[k]), reason)
        )
    return flags


def mean_with_others(matrix: ArrayLike) -> NDArray[np.float64]:
    r"""Each annotator's mean agreement with the others (e.g. "kappa with others").

    Parameters
    ----------
    matrix : array_like, shape (n_annotators, n_annotators)
        Pairwise agreement (``pairwise_kappa``, ``pairwise_aad`` ...); nan = undefined pair.

    Returns
    -------
    ndarray, shape (n_annotators,)
        Mean of the defined off-diagonal entries of each row; nan where there is none.

    Notes
    -----
    .. math:: \bar a_k = \frac{1}{|L_k|} \sum_{l \in L_k} a_{kl}, \quad
              L_k = \{l \ne k : a_{kl} \text{ defined}\}

    Examples
    --------
    >>> mean_with_others([[1, 0.5, np.nan], [0.5, 1, 0.1], [np.nan, 0.1, 1]])
    array([0.5, 0.3, 0.1])
    """
    a = as_square(matrix, name="matrix")
    off = np.where(np.eye(a.shape[0], dtype=bool), np.nan, a)
    defined = ~np.isnan(off)
    with np.errstate(invalid="ignore"):
        return np.where(defined, off, 0.0).sum(axis=1) / defined.sum(axis=1)


def agglomerative_order(matrix: ArrayLike) -> NDArray[np.intp]:
    r"""Row order that puts similar annotators next to each other (for heatmaps).

    Parameters
    ----------
    matrix : array_like, shape (n_annotators, n_annotators)
        Agreement matrix (kappa, alpha, cosine; at most 1); nan = unknown.

    Returns
    -------
    ndarray of int, shape (n_annotators,)
        Leaf order of an average-linkage tree on :math:`d = 1 - a` (symmetrised, clipped at 0;
        unknown distances set to the largest known one), with optimal leaf ordering.

    Notes
    -----
    .. math:: d_{kl} = \max\left(0,\ 1 - \tfrac12 (a_{kl} + a_{lk})\right)

    References
    ----------
    Bar-Joseph, Z., Gifford, D. K. & Jaakkola, T. S. (2001). Fast optimal leaf ordering for
    hierarchical clustering. Bioinformatics 17(suppl. 1), S22-S29.
    doi:10.1093/bioinformatics/17.suppl_1.S22

    Examples
    --------
    >>> a = [[1, 0.1, 0.9, 0.2], [0.1, 1, 0.2, 0.8], [0.9, 0.2, 1, np.nan], [0.2, 0.8, np.nan, 1]]
    >>> agglomerative_order(a).tolist()
    [0, 2, 1, 3]
    """
    a = as_square(matrix, name="matrix")
    if a.shape[0] < 3:
        return np.arange(a.shape[0])
    distance = np.clip(1.0 - (a + a.T) / 2.0, 0.0, None)
    known = distance[~np.isnan(distance)]
    distance[np.isnan(distance)] = known.max() if known.size else 1.0
    np.fill_diagonal(distance, 0.0)
    tree = linkage(squareform(distance, checks=False), method="average", optimal_ordering=True)
    return leaves_list(tree)


def landis_koch_band(kappa: float) -> str:
    r"""Landis & Koch (1977) name of a kappa value.

    Parameters
    ----------
    kappa : float
        A kappa (or alpha) value.

    Returns
    -------
    str
        "poor" (< 0), "slight" (0-0.20), "fair" (0.21-0.40), "moderate" (0.41-0.60),
        "substantial" (0.61-0.80), "almost perfect" (0.81-1.00); "undefined" for nan.

    Notes
    -----
    .. math:: \kappa < 0 < 0.2 < 0.4 < 0.6 < 0.8 < 1

    with each upper bound inclusive (0.2 is "slight").

    References
    ----------
    Landis, J. R. & Koch, G. G. (1977). The measurement of observer agreement for categorical
    data. Biometrics 33(1), 159-174. doi:10.2307/2529310

    Examples
    --------
    >>> [landis_koch_band(k) for k in (-0.1, 0.2, 0.35, 0.6, 0.75, 0.9)]
    ['poor', 'slight', 'fair', 'moderate', 'substantial', 'almost perfect']
    """
    value = float(kappa)
    if np.isnan(value):
        return "undefined"
    if value < 0:
        return "poor"
    for upper, band in _LANDIS_KOCH:
        if value <= upper:
            return band
    return "almost perfect"
