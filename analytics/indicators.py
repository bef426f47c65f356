"""Per-annotator quality indicators derived from a question's sufficient statistics.

Nothing here reads the database: the callers hand over the statistics kept by
:mod:`analytics.pipeline` (see :mod:`analytics.sufficient_stats`), the axes (annotator ids,
value keys) and the label scale, and get back JSON-ready indicators and matrices for a
:class:`~analytics.models.QualitySnapshot`. Each figure comes from :mod:`analytics.metrics`
applied to the counts, so one annotation never costs a pass over the study.

Other question kinds add a ``derive_<kind>`` here and a :class:`Rule` table, and register
both in :data:`analytics.publishing.KINDS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.spatial.distance import jensenshannon

from analytics.metrics.aad import aad
from analytics.metrics.categorical import kappa_from_confusion
from analytics.metrics.dawid_skene import dawid_skene
from analytics.metrics.krippendorff import alpha_from_coincidences
from analytics.metrics.model_agreement import mds_embedding
from analytics.metrics.outliers import agglomerative_order
from analytics.metrics.preferences import transitivity_kappa_from_counts
from analytics.metrics.traces import kappa_sda_from_counts
from analytics.sufficient_stats import CategoricalStats, ContinuousStats, PairwiseStats

Json = dict[str, Any]


@dataclass(frozen=True)
class LabelScale:
    """The answer scale as the statistics' value codes see it.

    ``points[c]`` places value code ``c`` in the space AAD measures distances in: the labels'
    (valence, arousal) when every label has them, else its rank on an ordered scale, else a
    one-hot corner scaled so that two different nominal labels are 1 apart.
    """

    keys: tuple[str, ...]
    names: tuple[str, ...]
    ranks: NDArray[np.float64]
    points: NDArray[np.float64]
    ordered: bool

    @classmethod
    def from_labels(
        cls, value_keys: Sequence[str], labels: Sequence[Mapping[str, Any]], *, ordered: bool
    ) -> LabelScale:
        """Build the scale from the state's value keys and the question's labels (in order).

        ``labels`` are mappings with ``key``, ``name``, ``valence`` and ``arousal``. A value key
        whose label was deleted keeps its key as name and ranks after the others.
        """
        by_key = {label["key"]: (rank, label) for rank, label in enumerate(labels)}
        known = [by_key.get(key) for key in value_keys]
        ranks = np.array(
            [item[0] if item else len(labels) + i for i, item in enumerate(known)], dtype=float
        )
        names = tuple(
            item[1]["name"] if item else key for item, key in zip(known, value_keys, strict=True)
        )
        has_coordinates = bool(value_keys) and all(
            item and item[1]["valence"] is not None and item[1]["arousal"] is not None
            for item in known
        )
        if has_coordinates:
            points = np.array([[item[1]["valence"], item[1]["arousal"]] for item in known])
        elif ordered:
            points = ranks[:, None]
        else:
            points = np.eye(len(value_keys)) / np.sqrt(2.0)
        return cls(tuple(value_keys), names, ranks, points.reshape(len(value_keys), -1), ordered)

    def distances(self) -> NDArray[np.float64]:
        """``(V, V)`` AAD between every two value codes (Du & Hoste Eqs. 1-2)."""
        v = len(self.keys)
        codes = np.arange(v, dtype=float)
        coordinates = {float(c): tuple(self.points[c]) for c in range(v)}
        grid_x, grid_y = np.repeat(codes, v), np.tile(codes, v)
        return aad(grid_x, grid_y, coordinates=coordinates).reshape(v, v)


@dataclass
class Derived:
    """Indicators (per annotator, plus study figures) and matrices of one question.

    ``indicators`` maps indicator keys to per-annotator lists aligned with ``annotators``;
    ``study`` holds study-wide figures; ``evidence`` maps an evidence key ("items", "repeats")
    to per-annotator counts. All values are JSON-ready (nan becomes ``None``).
    """

    annotators: list[int]
    indicators: dict[str, list[float | None]]
    evidence: dict[str, list[int]]
    study: Json
    matrices: Json = field(default_factory=dict)

    def indicators_json(self) -> Json:
        """What a snapshot's ``indicators`` column stores (small: read for trend lines)."""
        return {
            "annotators": self.annotators,
            "values": self.indicators,
            "evidence": self.evidence,
            "study": self.study,
        }


def _clean(values: NDArray[np.float64] | float) -> Any:
    """numpy -> JSON: nan and inf become ``None``, floats rounded to 6 decimals."""
    arr = np.asarray(values, dtype=float)
    out = np.where(np.isfinite(arr), np.round(arr, 6), np.nan).astype(object)
    out[~np.isfinite(arr)] = None
    return out.tolist()


def _off_diagonal(pairs: NDArray[np.float64]) -> NDArray[np.float64]:
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


def _with_others(
    kappa: NDArray[np.float64], overlap: NDArray[np.float64], *, min_overlap: float
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The pair matrix with pairs under ``min_overlap`` blanked (nan) and a diagonal of 1, and
    each annotator's overlap-weighted mean of their row (nan without a defined pair)."""
    eye = np.eye(kappa.shape[0], dtype=bool)
    kappa = kappa.copy()
    kappa[(overlap < min_overlap) & ~eye] = np.nan
    kappa[eye] = 1.0
    weight = np.where(~eye & ~np.isnan(kappa), overlap, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return kappa, (weight * np.nan_to_num(kappa)).sum(axis=1) / weight.sum(axis=1)


def _pair_matrices(kappa: NDArray[np.float64], *, with_map: bool) -> Json:
    """Heatmap order and (with ``with_map``) MDS map of a pair matrix, JSON-ready."""
    return {
        "order": agglomerative_order(kappa).tolist() if kappa.shape[0] else [],
        **({"mds": _mds_map(kappa)} if with_map else {}),
    }


def derive_categorical(
    stats: CategoricalStats,
    *,
    annotators: Sequence[int],
    scale: LabelScale,
    min_overlap: int,
    with_map: bool = True,
) -> Derived:
    r"""Indicators of a categorical question from its sufficient statistics.

    Parameters
    ----------
    stats : CategoricalStats
        Arrays over ``M`` annotators and ``V`` value codes.
    annotators : sequence of int, length M
        User ids of the annotator axis.
    scale : LabelScale
        The value codes' labels, ranks and AAD points.
    min_overlap : int
        Pairs sharing fewer items get no kappa (nan) and weigh nothing in "kappa with others".
    with_map : bool
        Compute the MDS map (an iterative fit, the costliest step: callers may reuse an
        earlier map and leave ``matrices["mds"]`` out).

    Returns
    -------
    Derived
        Indicators ``items_done``, ``seconds_per_item`` (mean over timed answers),
        ``kappa`` (overlap-weighted mean of the annotator's pairwise kappa row),
        ``aad`` (mean AAD to the others on shared items), ``skew`` (Jensen-Shannon distance of
        the annotator's label mix to the others' on the same items), ``retest_kappa`` (kappa
        of round 1 against round 2); evidence ``items`` (round-1 items done) and ``repeats``;
        study figures ``alpha`` (Krippendorff, ordinal for ordered scales) and counts;
        matrices ``kappa``, ``overlap``, heatmap ``order``, ``mds`` coordinates and the AAD
        difference histogram of each annotator against the others.

    Notes
    -----
    With pair confusions :math:`C_{klab}`, overlaps :math:`n_{kl} = \sum_{ab} C_{klab}` and
    value distances :math:`d_{ab}`:

    .. math:: \bar\kappa_k = \frac{\sum_{l \ne k} n_{kl} \kappa_{kl}}{\sum_{l \ne k} n_{kl}},
              \qquad
              \overline{D}_k = \frac{\sum_{l \ne k} \sum_{ab} C_{klab} d_{ab}}
                                    {\sum_{l \ne k} n_{kl}}

    the sums running over pairs with :math:`n_{kl} \ge` ``min_overlap`` (kappa) or any overlap
    (AAD). Dawid-Skene competence needs every rating: see :func:`derive_competence`.
    """
    m, v = stats.confusion.shape[0], stats.confusion.shape[2]
    confusion = stats.confusion
    overlap = confusion.sum(axis=(2, 3))
    kappa = np.asarray(kappa_from_confusion(confusion), dtype=float).reshape(m, m)
    kappa, kappa_others = _with_others(kappa, overlap, min_overlap=min_overlap)

    others = _off_diagonal(confusion)
    distances = scale.distances()
    shared = others.sum(axis=(1, 2, 3))
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_aad = np.einsum("klab,ab->k", others, distances) / shared
        seconds = stats.time_ms[:, 0] / stats.time_ms[:, 1] / 1000.0

    own = confusion[np.arange(m), np.arange(m)].sum(axis=-1)  # (M, V) labels used
    theirs = others.sum(axis=(1, 2))  # (M, V) others' labels on the same items
    skew = np.full(m, np.nan)
    ok = (own.sum(axis=1) > 0) & (theirs.sum(axis=1) > 0)
    if ok.any():
        skew[ok] = jensenshannon(own[ok], theirs[ok], base=2, axis=1)

    retest_kappa = np.asarray(kappa_from_confusion(stats.retest), dtype=float).reshape(m)
    order = np.argsort(scale.ranks, kind="stable")
    alpha = (
        alpha_from_coincidences(
            stats.coincidence[np.ix_(order, order)],
            scale.ranks[order],
            level="ordinal" if scale.ordered else "nominal",
        )
        if v
        else float("nan")
    )
    differences, group = np.unique(np.round(distances, 6), return_inverse=True)
    histogram = others.sum(axis=1).reshape(m, v * v) @ np.eye(differences.size)[group.ravel()]
    items_done = np.diagonal(overlap)
    return Derived(
        annotators=list(annotators),
        indicators={
            "items_done": _clean(items_done),
            "seconds_per_item": _clean(seconds),
            "kappa": _clean(kappa_others),
            "aad": _clean(mean_aad),
            "skew": _clean(skew),
            "retest_kappa": _clean(retest_kappa),
        },
        evidence={
            "items": [int(n) for n in items_done],
            "repeats": [int(n) for n in stats.retest.sum(axis=(1, 2))],
        },
        study={
            "alpha": _clean(alpha),
            "alpha_level": "ordinal" if scale.ordered else "nominal",
            "n_ratings": int(items_done.sum()),
            "n_annotators": int((items_done > 0).sum()),
            "labels": list(scale.names),
        },
        matrices={
            "kappa": _clean(kappa),
            "overlap": [[int(n) for n in row] for row in overlap],
            **_pair_matrices(kappa, with_map=with_map),
            "aad_differences": _clean(differences),
            "aad_counts": [[int(n) for n in row] for row in histogram],
        },
    )


def derive_competence(ratings: NDArray[np.float64]) -> list[float | None]:
    """Dawid-Skene competence of each annotator (rows of a round-1 ratings matrix).

    A full-data EM fit, so the publisher runs it on rebuild, on demand and at most every
    ``QUALITY_DS_INTERVAL`` seconds, never per annotation.
    """
    if ratings.size == 0 or np.isnan(ratings).all():
        return [None] * ratings.shape[0]
    return _clean(dawid_skene(ratings).competence)


@dataclass(frozen=True)
class Rule:
    """How one indicator is judged: the robust-z side and threshold, an absolute floor on the
    bad side (optional), the readable name and which evidence counts behind it."""

    name: str
    z: float
    floor: float | None = None
    evidence: str = "items"


#: Flag rules of categorical questions. Kappa floor 0.2: "slight" or worse (Landis & Koch);
#: the study's alpha is judged against 0.667 as a study-wide flag (see analytics.services).
CATEGORICAL_RULES: dict[str, Rule] = {
    "kappa": Rule("kappa with others", z=-3.5, floor=0.2),
    "aad": Rule("mean AAD to others", z=3.5),
    "skew": Rule("label skew", z=3.5),
    "retest_kappa": Rule("test-retest kappa", z=-3.5, floor=0.2, evidence="repeats"),
    "ds_competence": Rule("Dawid-Skene competence", z=-3.5),
}


def _ratio(numerator: NDArray[np.float64], denominator: NDArray[np.float64]) -> NDArray[np.float64]:
    """Elementwise ``numerator / denominator``, nan where the denominator is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / denominator, np.nan)


def derive_pairwise(
    stats: PairwiseStats,
    *,
    annotators: Sequence[int],
    strict: bool,
    min_overlap: int,
    with_map: bool = True,
) -> Derived:
    r"""Indicators of a pairwise-preference question from its sufficient statistics.

    Parameters
    ----------
    stats : PairwiseStats
        Per-annotator counts and the pair-outcome confusion over ``M`` annotators.
    annotators : sequence of int, length M
        User ids of the annotator axis.
    strict : bool
        Strict preferences (chance level 3/4 instead of 13/27 in transitivity kappa).
    min_overlap : int
        Annotator pairs sharing fewer judged pairs get no kappa (nan).
    with_map : bool
        Compute the MDS map of the kappa matrix.

    Returns
    -------
    Derived
        Indicators ``judgements``, ``seconds_per_judgement``, ``transitivity_kappa`` (Amidei,
        over the triplets that test the annotator: see
        :func:`apps.preferences.selectors.consistency`), ``contradiction_rate`` (audits that
        contradicted what earlier answers implied), ``pruning_stopped_at`` (judgements after
        which kappa fell below the floor, ``None`` while pruning), ``kappa`` (overlap-weighted
        Cohen's kappa with the others on the outcomes of shared pairs), ``agreement`` (share of
        shared pairs judged the same way); evidence ``triplets``, ``pairs`` and ``audits``;
        study figure ``pooled_transitivity_kappa`` (summed triplet counts); matrices ``kappa``,
        ``agreement``, ``overlap``, ``order`` and ``mds``.

    Notes
    -----
    With pooled counts :math:`n_T = \sum_k n_{T,k}` and :math:`n_C = \sum_k n_{C,k}`,

    .. math:: K_{pooled} = \frac{n_T / n_C - P(E)}{1 - P(E)}
    """
    m = stats.n_annotators
    confusion = stats.pairs.confusion
    overlap = confusion.sum(axis=(2, 3))
    kappa = np.asarray(kappa_from_confusion(confusion), dtype=float).reshape(m, m)
    kappa, kappa_others = _with_others(kappa, overlap, min_overlap=min_overlap)
    same = np.trace(confusion, axis1=2, axis2=3)
    agreement = _ratio(same, overlap)
    others = ~np.eye(m, dtype=bool)
    agreement_others = _ratio((same * others).sum(axis=1), (overlap * others).sum(axis=1))
    transitive, complete = stats.column("n_transitive"), stats.column("n_complete")
    transitivity = [
        transitivity_kappa_from_counts(int(t), int(c), strict=strict)
        for t, c in zip(transitive, complete, strict=True)
    ]
    judgements = stats.column("judgements")
    stopped = stats.column("pruning_stopped_at")
    return Derived(
        annotators=list(annotators),
        indicators={
            "judgements": _clean(judgements),
            "seconds_per_judgement": _clean(
                _ratio(stats.column("time_ms"), stats.column("timed")) / 1000.0
            ),
            "transitivity_kappa": _clean(np.array(transitivity, dtype=float)),
            "contradiction_rate": _clean(
                _ratio(stats.column("contradictions"), stats.column("audits"))
            ),
            "pruning_stopped_at": _clean(np.where(stopped > 0, stopped, np.nan)),
            "kappa": _clean(kappa_others),
            "agreement": _clean(agreement_others),
        },
        evidence={
            "triplets": [int(n) for n in complete],
            "pairs": [int(n) for n in np.diagonal(overlap)],
            "audits": [int(n) for n in stats.column("audits")],
        },
        study={
            "pooled_transitivity_kappa": _clean(
                transitivity_kappa_from_counts(
                    int(transitive.sum()), int(complete.sum()), strict=strict
                )
            ),
            "n_ratings": int(judgements.sum()),
            "n_annotators": int((judgements > 0).sum()),
        },
        matrices={
            "kappa": _clean(kappa),
            "agreement": _clean(agreement),
            "overlap": [[int(n) for n in row] for row in overlap],
            **_pair_matrices(kappa, with_map=with_map),
        },
    )


def derive_continuous(
    stats: ContinuousStats, *, annotators: Sequence[int], with_map: bool = True
) -> Derived:
    r"""Indicators of a continuous (trace) question from its sufficient statistics.

    Parameters
    ----------
    stats : ContinuousStats
        Pooled sign-coincidence tables and per-annotator sums over ``M`` annotators.
    annotators : sequence of int, length M
        User ids of the annotator axis.
    with_map : bool
        Compute the MDS map of the kappa_SDA matrix.

    Returns
    -------
    Derived
        Indicators ``traces_done``, ``kappa`` (kappa_SDA with the others: each pair's tables
        pooled over the items both traced, then the mean over partners weighted by shared
        steps), ``kappa_truth`` (mean over gold items of kappa_SDA of the lag-corrected trace
        against the truth), ``lag`` (mean reaction lag behind the truth, seconds) and
        ``trend_f1`` (mean F1 of rises and falls against the truth); evidence ``traces`` and
        ``gold_items``; study figure ``pooled_kappa_sda`` (every pair's tables summed);
        matrices ``kappa`` (pooled kappa_SDA of each pair), ``overlap`` (shared steps),
        ``order`` and ``mds``.

    Notes
    -----
    With :math:`C_{kl}` the summed sign-coincidence tables of annotators k and l,

    .. math:: \kappa_{kl} = \kappa_{SDA}(C_{kl}), \qquad
              \kappa_{pooled} = \kappa_{SDA}\Big(\sum_{k \ne l} C_{kl}\Big)
    """
    m = stats.n_annotators
    steps = stats.signs.sum(axis=(2, 3))
    kappa = np.asarray(kappa_sda_from_counts(stats.signs), dtype=float).reshape(m, m)
    kappa, kappa_others = _with_others(kappa, steps, min_overlap=1)
    pooled = kappa_sda_from_counts(_off_diagonal(stats.signs).sum(axis=(0, 1)))
    traces = stats.column("traces")

    def mean(name: str) -> Any:
        return _clean(_ratio(stats.column(f"{name}_sum"), stats.column(f"{name}_n")))

    return Derived(
        annotators=list(annotators),
        indicators={
            "traces_done": _clean(traces),
            "kappa": _clean(kappa_others),
            "kappa_truth": mean("kappa_truth"),
            "lag": mean("lag"),
            "trend_f1": mean("f1"),
        },
        evidence={
            "traces": [int(n) for n in traces],
            "gold_items": [int(n) for n in stats.column("gold")],
        },
        study={
            "pooled_kappa_sda": _clean(pooled),
            "n_ratings": int(traces.sum()),
            "n_annotators": int((traces > 0).sum()),
        },
        matrices={
            "kappa": _clean(kappa),
            "overlap": [[int(n) for n in row] for row in steps],
            **_pair_matrices(kappa, with_map=with_map),
        },
    )


#: Flag rules of pairwise questions. The transitivity floor is the question's ``kappa_floor``
#: (filled in per question by analytics.quality_kinds); 0.4 is the settings' default.
PAIRWISE_RULES: dict[str, Rule] = {
    "transitivity_kappa": Rule("transitivity kappa", z=-3.5, floor=0.4, evidence="triplets"),
    "kappa": Rule("kappa with others on shared pairs", z=-3.5, evidence="pairs"),
    "contradiction_rate": Rule("audit contradiction rate", z=3.5, evidence="audits"),
}

#: Flag rules of continuous questions: kappa_SDA against the truth below 0.2 ("slight"), a
#: reaction lag above 3 s (about twice the 1.6 s of the shades-of-green study).
CONTINUOUS_RULES: dict[str, Rule] = {
    "kappa": Rule("kappa_SDA with others", z=-3.5, evidence="traces"),
    "kappa_truth": Rule("kappa_SDA vs truth", z=-3.5, floor=0.2, evidence="gold_items"),
    "lag": Rule("lag behind truth (s)", z=3.5, floor=3.0, evidence="gold_items"),
    "trend_f1": Rule("trend F1 vs truth", z=-3.5, evidence="gold_items"),
}
