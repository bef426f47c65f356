"""Indicator specs and the shared arithmetic of every question kind's indicators.

An :class:`Indicator` is declared once, beside the ``derive`` code of its kind that computes
it (``apps/<kind>/quality.py``), and lists everything the rest of the studio needs: its key in
:class:`Derived` and in snapshots, the dashboard's column label and number format, whether
higher or lower is better, the flag rule that judges it, the evidence unit behind it (how many
items, pairs, traces ... stand behind an annotator's value) and, once an interval estimator
exists for it, where its interval is stored. The dashboard, the flags and the exports read the
specs; nothing spells an indicator's key twice.

Nothing here reads the database: the kinds hand over their statistics and get JSON-ready
indicators and matrices for a :class:`~analytics.models.QualitySnapshot`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from analytics.metrics.model_agreement import mds_embedding
from analytics.metrics.outliers import agglomerative_order

Json = dict[str, Any]


@dataclass(frozen=True)
class FlagRule:
    """How an indicator is judged: flagged when its robust z lies more than ``z`` on the bad
    side of the study's median, or past ``floor`` (on the bad side) at any z, or (with an
    interval) when the interval reaches ``reaches`` on the bad side: the figure cannot be
    told from that reference (MACE trust 0: random answering).

    ``name`` is the indicator's readable name in flag reasons; ``reaches_meaning`` says in
    words what ``reaches`` stands for.
    """

    name: str
    z: float = 3.5
    floor: float | None = None
    reaches: float | None = None
    reaches_meaning: str = ""


#: Which way an indicator is good, by its ``direction``.
READINGS: dict[str | None, str] = {
    "higher": "Higher is better.",
    "lower": "Lower is better.",
    None: "Neither good nor bad in itself: it describes the work.",
}
#: What a figure's 95 % interval means, in words (printed once per dashboard).
INTERVAL_MEANING = (
    "95 % intervals in brackets: the range of values that fit the answers so far; "
    "it narrows as answers come in, and a flag needs the whole interval beyond its threshold."
)
#: Landis and Koch's (1977) words for a kappa, as the dashboard prints them.
BAND_MEANING = (
    "Kappa words (Landis and Koch): below 0 poor, to 0.20 slight, to 0.40 fair, "
    "to 0.60 moderate, to 0.80 substantial, above almost perfect."
)


@dataclass(frozen=True)
class Indicator:
    """One per-annotator figure of a question kind.

    Attributes
    ----------
    key : str
        Its key in :attr:`Derived.indicators`, snapshots, flags and exports.
    label : str
        The dashboard's column heading.
    format : str
        ``str.format`` pattern of one value.
    direction : {"higher", "lower"} or None
        Which side is better; ``None`` for neutral counts. A flag rule needs one: its bad side
        is the other.
    rule : FlagRule or None
        How it is flagged; ``None``: never.
    evidence : str
        The evidence unit counted behind each annotator's value (a key of
        :attr:`Derived.evidence`); its minimum is ``QualityConfig.evidence_needed(unit)``.
    interval : str or None
        Key of :attr:`Derived.intervals` holding each annotator's interval of this indicator,
        once an interval estimator fills it; ``None``: no interval.
    explanation : str
        One plain line for a manager: what the figure compares (the dashboard prints it under
        the table with :attr:`reading`, and docs/dashboard.md lists it).
    banded : bool
        An agreement beyond chance (a kappa): its values get Landis and Koch's words
        ("slight", "moderate", ...).
    live : bool
        Whether the kind's live statistics give its value on every answer. ``False``: it is
        computed with the intervals only (off the request path, e.g. the traces' kappa with
        others after the lags are removed): its value is its interval's estimate, as fresh as
        the intervals, and absent before the first set
        (:func:`analytics.intervals.publish_intervals`).
    """

    key: str
    label: str
    format: str = "{:.2f}"
    direction: Literal["higher", "lower"] | None = None
    rule: FlagRule | None = None
    evidence: str = "items"
    interval: str | None = None
    live: bool = True
    explanation: str = ""
    banded: bool = False

    def __post_init__(self) -> None:
        if not self.explanation:
            raise ValueError(f"indicator {self.key!r}: a manager needs its explanation")
        if self.rule is not None and self.direction is None:
            raise ValueError(f"indicator {self.key!r}: a flag rule needs a direction")
        if not self.live and self.interval is None:
            raise ValueError(
                f"indicator {self.key!r}: a figure computed with the intervals needs one"
            )

    @property
    def heading(self) -> str:
        """The dashboard's column heading: the label, marked when the figure is computed with
        the intervals only."""
        return self.label if self.live else f"{self.label} (with the intervals)"

    @property
    def reading(self) -> str:
        """Which way is good, in words."""
        return READINGS[self.direction]

    @property
    def bad_side(self) -> float:
        """-1 when low values are bad (higher is better), +1 when high values are bad."""
        return -1.0 if self.direction == "higher" else 1.0

    @property
    def z_threshold(self) -> float:
        """The signed robust-z threshold of the rule (negative: flagged below the median)."""
        if self.rule is None:
            raise ValueError(f"indicator {self.key!r} has no flag rule")
        return self.bad_side * self.rule.z

    def text(self, value: float | None) -> str:
        """One value as the dashboard prints it (an en dash for unknown)."""
        return "–" if value is None else self.format.format(value)

    def overridden(self, change: Mapping[str, Any]) -> Indicator:
        """This indicator with its rule's ``z`` and ``floor`` replaced by ``change``."""
        if self.rule is None:
            return self
        rule = replace(
            self.rule,
            z=float(change.get("z", self.rule.z)),
            floor=change.get("floor", self.rule.floor),
        )
        return replace(self, rule=rule)


@dataclass(frozen=True)
class CardFigure:
    """A figure of one of a kind's extra dashboard cards (not an annotator-table column),
    with its plain explanation.

    Attributes
    ----------
    card : str
        The card's heading ("Model suggestions"), which the figure guide names.
    label : str
        The figure's heading in the card.
    direction : {"higher", "lower"} or None
        Which side is better (``None``: it describes the work).
    explanation : str
        One plain line for a manager; the card prints it in its legend.
    """

    card: str
    label: str
    direction: Literal["higher", "lower"] | None = None
    explanation: str = ""

    def __post_init__(self) -> None:
        if not self.explanation:
            raise ValueError(f"card figure {self.label!r}: a manager needs its explanation")

    @property
    def reading(self) -> str:
        """Which way is good, in words."""
        return READINGS[self.direction]


@dataclass(frozen=True)
class StudyFigure:
    """A study-wide figure of a kind (a key of :attr:`Derived.study`), how it is shown and
    judged.

    Attributes
    ----------
    key, label, format
        Its key in :attr:`Derived.study`, its name and ``str.format`` pattern.
    qualifier : str or None
        Key of :attr:`Derived.study` holding a word shown in parentheses after the label (the
        level of Krippendorff's alpha).
    floor : float or None
        Below it (with at least the minimum evidence of "items" in ``n_ratings``) the question
        gets a study-wide flag.
    headline : bool
        Shown first with its Landis-Koch band and a trend line.
    evidence : str
        The unit its interval's ``n`` counts ("items"; "samples" for a trace figure).
    explanation : str
        One plain line for a manager: what it compares and which way is good.
    """

    key: str
    label: str
    format: str = "{:.2f}"
    qualifier: str | None = None
    floor: float | None = None
    headline: bool = False
    evidence: str = "items"
    explanation: str = ""

    def __post_init__(self) -> None:
        if not self.explanation:
            raise ValueError(f"study figure {self.key!r}: a manager needs its explanation")

    def title(self, study: Mapping[str, Any]) -> str:
        """The label with its qualifier, e.g. "Krippendorff alpha (ordinal)"."""
        word = study.get(self.qualifier) if self.qualifier else None
        return f"{self.label} ({word})" if word else self.label


def with_overrides(
    indicators: tuple[Indicator, ...], question_settings: Mapping[str, Any]
) -> tuple[Indicator, ...]:
    """The indicators with the question's ``settings["quality"]["rules"]`` applied."""
    changes = question_settings.get("quality", {}).get("rules", {})
    return tuple(
        spec.overridden(changes[spec.key]) if spec.key in changes else spec for spec in indicators
    )


@dataclass
class Derived:
    """Indicators (per annotator, plus study figures) and matrices of one question.

    ``indicators`` maps indicator keys to per-annotator lists aligned with ``annotators``;
    ``study`` holds study-wide figures; ``evidence`` maps an evidence key ("items", "repeats")
    to per-annotator counts; ``intervals`` maps an :attr:`Indicator.interval` key to
    per-annotator ``[estimate, low, high, n]`` (``None``: undefined; see
    :mod:`analytics.intervals`). All values are JSON-ready (nan becomes ``None``).

    Findings computed with the intervals (``study["intervals"]``, see
    :mod:`analytics.intervals`) may hold ``notes`` (per indicator key, per annotator id: what
    was compared, in words, put before the flag reason) and ``pairs`` (pair findings such as
    copied answers: ``{"annotators": [id, id], "indicator", "reason", "figures"}``, flagging
    both annotators).
    """

    annotators: list[int]
    indicators: dict[str, list[float | None]]
    evidence: dict[str, list[int]]
    study: Json
    matrices: Json = field(default_factory=dict)
    intervals: dict[str, list[list[float | int] | None]] = field(default_factory=dict)

    def indicators_json(self) -> Json:
        """What a snapshot's ``indicators`` column stores (small: read for trend lines)."""
        return {
            "annotators": self.annotators,
            "values": self.indicators,
            "evidence": self.evidence,
            "study": self.study,
            **({"intervals": self.intervals} if self.intervals else {}),
        }


def json_ready(values: NDArray[np.float64] | float) -> Any:
    """numpy -> JSON: nan and inf become ``None``, floats rounded to 6 decimals."""
    arr = np.asarray(values, dtype=float)
    out = np.where(np.isfinite(arr), np.round(arr, 6), np.nan).astype(object)
    out[~np.isfinite(arr)] = None
    return out.tolist()


def json_counts(counts: NDArray[np.float64]) -> Any:
    """numpy counts -> JSON integers (nested lists), as ``int(n)`` of each, without a Python
    loop over the ``M x M`` cells (57 ms at 512 annotators as a loop)."""
    return np.asarray(counts).astype(np.int64).tolist()


def pair_totals(pairs: NDArray[np.float64]) -> NDArray[np.float64]:
    """The ``(M, M)`` totals of an ``(M, M, V, V)`` pair array (each pair's overlap).

    ``einsum``, not ``ndarray.sum(axis=(2, 3))``: NumPy's reduction over short trailing axes
    took 3x longer (6.7 against 2.1 ms at 512 annotators, on every quality pass)."""
    return np.einsum("klab->kl", pairs)


def off_diagonal(pairs: NDArray[np.float64]) -> NDArray[np.float64]:
    """A copy of an ``(M, M, ...)`` pair array with the ``k == l`` entries zeroed."""
    out = pairs.copy()
    idx = np.arange(pairs.shape[0])
    out[idx, idx] = 0.0
    return out


def _mds_map(kappa: NDArray[np.float64]) -> list[list[float] | None] | None:
    """2-D MDS map of the annotators that share a defined kappa with someone (the others get
    ``None`` coordinates); ``None`` with fewer than 3 such annotators."""
    m = kappa.shape[0]
    off = np.where(np.eye(m, dtype=bool), np.nan, kappa)
    placed = np.flatnonzero(~np.isnan(off).all(axis=1))
    if placed.size < 3:
        return None
    sub = kappa[np.ix_(placed, placed)]
    known = sub[~np.isnan(sub) & ~np.eye(placed.size, dtype=bool)]
    xy = mds_embedding(np.where(np.isnan(sub), np.median(known), sub))
    coords: list[list[float] | None] = [None] * m
    for k, point in zip(placed, xy, strict=True):
        coords[k] = [round(float(point[0]), 5), round(float(point[1]), 5)]
    return coords


def with_others(
    kappa: NDArray[np.float64], overlap: NDArray[np.float64], *, min_overlap: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The pair matrix with pairs under ``min_overlap`` blanked (nan), a diagonal of 1 for the
    annotators with evidence (``overlap[k, k] > 0``) and nan for members without any, and each
    annotator's overlap-weighted mean of their row (nan without a defined pair)."""
    eye = np.eye(kappa.shape[0], dtype=bool)
    kappa = kappa.copy()
    kappa[(overlap < min_overlap) & ~eye] = np.nan
    kappa[eye] = np.where(np.diag(overlap) > 0, 1.0, np.nan)
    weight = np.where(~eye & ~np.isnan(kappa), overlap, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return kappa, (weight * np.nan_to_num(kappa)).sum(axis=1) / weight.sum(axis=1)


#: Within a snapshot window a kept layout (heatmap order and map) is fitted again only once
#: the annotators number this many times those it was fitted for: in a crowd's arrival that
#: is a fit at 100, 125, 156, ... annotators, not one per pass (issue 22: the order's
#: clustering took 198 ms at 512 annotators, the map's 1.3 s).
LAYOUT_REFIT_GROWTH = 1.25

#: A layout never fitted (``fitted_for`` beyond any study): the order in annotator order and
#: no map, for callers that want the evidence only.
NO_LAYOUT: Json = {"order": [], "mds": None, "fitted_for": 2**62}


def pair_matrices(kappa: NDArray[np.float64], *, keep: Mapping[str, Any] | None = None) -> Json:
    """Heatmap order and MDS map of a pair matrix, JSON-ready: fitted, or kept from ``keep``.

    ``keep`` is an earlier layout of the same question within the snapshot window (what this
    function returned then). While the annotators number fewer than
    :data:`LAYOUT_REFIT_GROWTH` times its ``fitted_for``, it is kept: its order with the
    annotators no longer present dropped and newcomers appended at the end, its map as it was
    (newcomers join the map at the next fit). Else, or without ``keep``, both are fitted. The
    order lists only the annotators with a defined diagonal: members without any answer have
    no row in the heatmap.
    """
    m = kappa.shape[0]
    present = np.flatnonzero(~np.isnan(np.diag(kappa)))
    if keep is not None and m < LAYOUT_REFIT_GROWTH * keep["fitted_for"]:
        here = set(present.tolist())
        order = [k for k in keep["order"] if k in here]
        placed = set(order)
        order += [int(k) for k in present if k not in placed]
        return {"order": order, "mds": keep["mds"], "fitted_for": keep["fitted_for"]}
    sub = kappa[np.ix_(present, present)]
    return {
        "order": present[agglomerative_order(sub)].tolist() if present.size else [],
        "mds": _mds_map(kappa),
        "fitted_for": m,
    }


def ratio(numerator: NDArray[np.float64], denominator: NDArray[np.float64]) -> NDArray[np.float64]:
    """Elementwise ``numerator / denominator``, nan where the denominator is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / denominator, np.nan)
