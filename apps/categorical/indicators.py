"""Indicators of categorical questions, declared beside the code that computes them.

:func:`derive_categorical` turns the stored :class:`~analytics.sufficient_stats.CategoricalStats`
into per-annotator figures (kappa with others, AAD, label skew, test-retest kappa), the study's
Krippendorff alpha and the heatmap and map matrices; :func:`publish_extras` adds what needs every
rating (Dawid-Skene competence, per-item disagreement) at publish time.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import transaction
from django.utils import timezone
from numpy.typing import NDArray
from scipy.spatial.distance import jensenshannon

from analytics.config import quality_config
from analytics.indicators import (
    Derived,
    FlagRule,
    Indicator,
    Json,
    StudyFigure,
    json_counts,
    json_ready,
    off_diagonal,
    pair_matrices,
    pair_totals,
    with_others,
)
from analytics.intervals import IntervalSet
from analytics.metrics.aad import aad, aad_rmse_per_item
from analytics.metrics.categorical import kappa_from_confusion
from analytics.metrics.crowd import (
    consensus_agreement,
    copier_pairs,
    mace,
    mace_trust,
    spammer_posterior,
)
from analytics.metrics.dawid_skene import dawid_skene
from analytics.metrics.intervals import indicator_intervals_categorical
from analytics.metrics.krippendorff import alpha_from_coincidences
from analytics.metrics.uncertainty import (
    Interval,
    dawid_skene_competence_bootstrap,
    label_skew_bootstrap,
)
from analytics.models import ItemDisagreement, QualitySnapshot, QualityState
from analytics.selectors import question_ratings
from analytics.sufficient_stats import CategoricalStats
from apps.studies.models import Question

#: The Dawid-Skene competence interval: replicates, each a SQUAREM-accelerated EM refit run to
#: convergence (warm-started from the full fit). About 7 s on the Rzhetsky data
#: (8 x 15,521), in the background.
DS_BOOTSTRAP = 50

# Kappa floor 0.2: "slight" or worse (Landis & Koch).
ITEMS_DONE = Indicator(
    "items_done", "Items", "{:.0f}", explanation="Items this annotator has answered."
)
SECONDS_PER_ITEM = Indicator(
    "seconds_per_item",
    "Seconds / item",
    "{:.1f}",
    evidence="timed_answers",
    interval="seconds_per_item",
    explanation=(
        "Typical time spent on one item; far below the others' can mean answering without reading."
    ),
)
COHEN_KAPPA = Indicator(
    "cohen_kappa",
    "Kappa with others",
    direction="higher",
    rule=FlagRule("kappa with others", floor=0.2),
    interval="kappa",
    banded=True,
    explanation=(
        "How often this annotator's labels match each other annotator's on the items both labelled,"
        " corrected for chance (0: chance, 1: always)."
    ),
)
AAD = Indicator(
    "aad",
    "Mean AAD",
    direction="lower",
    rule=FlagRule("mean AAD to others"),
    interval="aad",
    explanation=(
        "Average distance between this annotator's label and the other annotators' labels of "
        "the same item (0: always the same label)."
    ),
)
SKEW = Indicator(
    "skew",
    "Label skew",
    direction="lower",
    rule=FlagRule("label skew"),
    interval="skew",
    explanation=(
        "How far this annotator's mix of labels is from the mix of everyone else (0: the same mix)."
    ),
)
RETEST_KAPPA = Indicator(
    "retest_kappa",
    "Test-retest kappa",
    direction="higher",
    rule=FlagRule("test-retest kappa", floor=0.2),
    evidence="repeats",
    interval="retest_kappa",
    banded=True,
    explanation=(
        "Agreement with their own earlier answer when an item comes back as a repeat, corrected for"
        " chance."
    ),
)
DS_COMPETENCE = Indicator(
    "ds_competence",
    "Dawid-Skene competence",
    direction="higher",
    rule=FlagRule("Dawid-Skene competence"),
    interval="ds_competence",
    explanation=(
        "Estimated chance that this annotator gives the true label (Dawid-Skene model fitted to "
        "every answer)."
    ),
)
MACE_TRUST = Indicator(
    "mace_trust",
    "Trust (MACE)",
    direction="higher",
    # flagged by crowd_figures on the spammer Bayes factor, not on the interval: see there
    interval="mace_trust",
    live=False,
    explanation=(
        "Estimated share of this annotator's answers given knowingly rather than at random (MACE "
        "model; 0: the answers fit random answering)."
    ),
)
CONSENSUS = Indicator(
    "consensus_agreement",
    "Agrees with the others' consensus",
    direction="higher",
    interval="consensus_agreement",
    live=False,
    explanation=(
        "Share of items where this annotator's label is the label most of the other annotators "
        "gave."
    ),
)
#: Bayes factor of random answering against answering like the others beyond which
#: :func:`crowd_figures` flags an annotator (Kass & Raftery 1995: 3-20 is "positive
#: evidence"; 1-3 "not worth more than a bare mention").
SPAM_EVIDENCE = 3.0
#: The flag key of a pair of annotators with near-identical answers (:func:`crowd_figures`).
COPYING = "copying"
INDICATORS = (
    ITEMS_DONE,
    SECONDS_PER_ITEM,
    COHEN_KAPPA,
    AAD,
    SKEW,
    RETEST_KAPPA,
    DS_COMPETENCE,
    MACE_TRUST,
    CONSENSUS,
)
#: Krippendorff (2004): 0.667 is the lowest alpha for tentative conclusions.
ALPHA = StudyFigure(
    "alpha",
    "Krippendorff alpha",
    qualifier="alpha_level",
    floor=0.667,
    headline=True,
    explanation=(
        "Agreement of all annotators on all items beyond chance (1: perfect, 0: chance); 0.667 is "
        "the lowest for tentative conclusions, 0.8 for firm ones."
    ),
)
#: Computed with the intervals only (nominal scales: it has no ordered form).
FLEISS_KAPPA = StudyFigure(
    "fleiss_kappa",
    "Fleiss kappa",
    explanation=(
        "Agreement of all annotators beyond chance, treating labels as unordered categories; higher"
        " is better."
    ),
)


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
        found = [item[1] for item in known if item is not None]
        has_coordinates = (
            bool(value_keys)
            and len(found) == len(known)
            and all(
                label["valence"] is not None and label["arousal"] is not None for label in found
            )
        )
        if has_coordinates:
            points = np.array([[label["valence"], label["arousal"]] for label in found])
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


def derive_categorical(
    stats: CategoricalStats,
    *,
    annotators: Sequence[int],
    scale: LabelScale,
    min_overlap: int,
    layout: Json | None = None,
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
    layout : dict or None
        A layout (heatmap order and MDS map) to keep, as
        :func:`analytics.indicators.pair_matrices` keeps it; ``None`` fits one.

    Returns
    -------
    Derived
        Indicators ``items_done``, ``seconds_per_item`` (mean over timed answers),
        ``cohen_kappa`` (overlap-weighted mean of the annotator's pairwise kappa row),
        ``aad`` (mean AAD to the others on shared items), ``skew`` (Jensen-Shannon distance of
        the annotator's label mix to the others' on the same items), ``retest_kappa`` (kappa
        of round 1 against round 2); evidence ``items`` (round-1 items done), ``repeats`` and
        ``timed_answers`` (answers of both rounds with a time);
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
    overlap = pair_totals(confusion)
    kappa = np.asarray(kappa_from_confusion(confusion), dtype=float).reshape(m, m)
    kappa, kappa_others = with_others(kappa, overlap, min_overlap=min_overlap)

    others = off_diagonal(confusion)
    distances = scale.distances()
    shared = others.sum(axis=(1, 2, 3))
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_aad = np.einsum("klab,ab->k", others, distances) / shared
        seconds = stats.time_ms[:, 0] / stats.time_ms[:, 1] / 1000.0

    own = confusion[np.arange(m), np.arange(m)].sum(axis=-1)  # (M, V) labels used
    # einsum: ndarray.sum over (1, 2) took 4x longer (15 against 3.6 ms at 512 annotators)
    theirs = np.einsum("klab->kb", others)  # (M, V) others' labels on the same items
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
    by_cell = np.einsum("klab->kab", others).reshape(m, v * v)
    histogram = by_cell @ np.eye(differences.size)[group.ravel()]
    items_done = np.diagonal(overlap)
    return Derived(
        annotators=list(annotators),
        indicators={
            ITEMS_DONE.key: json_ready(items_done),
            SECONDS_PER_ITEM.key: json_ready(seconds),
            COHEN_KAPPA.key: json_ready(kappa_others),
            AAD.key: json_ready(mean_aad),
            SKEW.key: json_ready(skew),
            RETEST_KAPPA.key: json_ready(retest_kappa),
        },
        evidence={
            "items": [int(n) for n in items_done],
            "repeats": [int(n) for n in stats.retest.sum(axis=(1, 2))],
            "timed_answers": [int(n) for n in stats.time_ms[:, 1]],
        },
        study={
            ALPHA.key: json_ready(alpha),
            str(ALPHA.qualifier): "ordinal" if scale.ordered else "nominal",
            "n_ratings": int(items_done.sum()),
            "n_annotators": int((items_done > 0).sum()),
            "labels": list(scale.names),
        },
        matrices={
            "kappa": json_ready(kappa),
            "overlap": json_counts(overlap),
            **pair_matrices(kappa, keep=layout),
            "aad_differences": json_ready(differences),
            "aad_counts": json_counts(histogram),
        },
    )


def derive_competence(
    ratings: NDArray[np.float64],
) -> tuple[list[float | None], dict[str, Any]]:
    """Dawid-Skene competence of each annotator (rows of a round-1 ratings matrix).

    A full-data EM fit, so the publisher runs it on rebuild, on demand and at most every
    ``QUALITY_DS_INTERVAL`` seconds, never per annotation.

    Returns
    -------
    competence : list of float or None
        One value per row; None for annotators without ratings.
    fit : dict
        ``ds_iterations`` (EM iterations run) and ``ds_converged`` (whether the parameters
        settled before the iteration cap), shown beside the figures.
    """
    if ratings.size == 0 or np.isnan(ratings).all():
        return [None] * ratings.shape[0], {}
    fit = dawid_skene(ratings)
    return json_ready(fit.competence), {"ds_iterations": fit.n_iter, "ds_converged": fit.converged}


def _times(factor: float) -> str:
    """A Bayes factor as words: "4.2 times", "180 times", "over a million times"."""
    if factor >= 1e6:
        return "over a million times"
    return f"{factor:.1f} times" if factor < 100 else f"{factor:,.0f} times"


def crowd_figures(
    ratings: NDArray[np.float64],
    annotators: Sequence[int],
    names: Mapping[int, str],
    *,
    min_items: int = 20,
) -> tuple[dict[str, Interval], dict[str, dict[int, str]], list[dict[str, Any]]]:
    """The crowd models of a round-1 ratings matrix (rows: ``annotators``), for sparse designs.

    Returns
    -------
    intervals : dict
        ``mace_trust`` (:func:`~analytics.metrics.crowd.mace_trust`: profile-likelihood
        interval) and ``consensus_agreement`` (share of the annotator's items where it gave
        the other annotators' consensus label; Clopper-Pearson interval), ``n`` in compared
        items.
    notes : dict
        ``{"mace_trust": {user id: "agrees with the other annotators' consensus on 9 of 30
        items (chance 8)"}}``: what the trust flag compared, in words.
    pairs : list of dict
        One finding per annotator whose answers fit random answering better than answering
        like the others, with a Bayes factor above :data:`SPAM_EVIDENCE` on at least
        ``min_items`` compared items (:func:`~analytics.metrics.crowd.spammer_posterior`),
        under :data:`MACE_TRUST`'s key; one per pair of
        :func:`~analytics.metrics.crowd.copier_pairs`, flagging both annotators under
        :data:`COPYING` with a reason that names the other (``names``).

    Notes
    -----
    Why not "the trust interval reaches 0": that flags whoever cannot be told from random,
    and in a sparse crowd 20 answers of a 60 %-accurate annotator often cannot (4.7 % of
    good annotators flagged at accuracy 0.6-0.9); the Bayes factor weighs random answering
    against the team's trust on the same answers (1.3 % at the same 90 % catch of the random
    annotator, ``benchmarks/crowd_flags.py``). Holm or Benjamini-Hochberg over the
    annotators would not help: the interval rule flags when a test does *not* reject
    (randomness), so a multiplicity correction, which makes rejections rarer, flags more.
    """
    if np.isnan(ratings).all():
        return {}, {}, []
    fit = mace(ratings)
    trust = mace_trust(ratings, fit=fit)
    agreement = consensus_agreement(ratings, fit=fit)
    spam = spammer_posterior(ratings, fit=fit)
    intervals = {
        MACE_TRUST.key: Interval(trust.estimate, trust.low, trust.high, trust.n),
        CONSENSUS.key: Interval(agreement.rate, agreement.low, agreement.high, agreement.n),
    }
    notes = {
        MACE_TRUST.key: {
            int(a): (
                f"agrees with the other annotators' consensus on {agreement.agree[k]} of "
                f"{agreement.n[k]} items (chance {agreement.chance[k]:.0f})"
            )
            for k, a in enumerate(annotators)
            if agreement.n[k] > 0
        }
    }
    pairs = []
    flagged = (spam.bayes_factor > SPAM_EVIDENCE) & (spam.n >= min_items)
    for k in np.flatnonzero(flagged).tolist():
        pairs.append(
            {
                "annotators": [int(annotators[k])],
                "indicator": MACE_TRUST.key,
                "reason": (
                    f"{notes[MACE_TRUST.key][int(annotators[k])]}; its answers fit random "
                    f"answering {_times(spam.bayes_factor[k])} better than answering like "
                    f"the other annotators (MACE trust {trust.estimate[k]:.2f}; Bayes factor "
                    f"above {SPAM_EVIDENCE:g}, probability of random answering "
                    f"{spam.probability[k]:.2f} at even odds); {spam.n[k]} items"
                ),
                "figures": {
                    "value": round(float(trust.estimate[k]), 4),
                    "bayes_factor": round(float(spam.bayes_factor[k]), 2),
                    "probability": round(float(spam.probability[k]), 4),
                    "evidence": int(spam.n[k]),
                    "unit": "items",
                },
            }
        )
    for pair in copier_pairs(ratings):
        ids = [int(annotators[pair.first]), int(annotators[pair.second])]
        for me, other in (ids, ids[::-1]):
            pairs.append(
                {
                    "annotators": [me],
                    "indicator": COPYING,
                    "reason": (
                        f"gave the same answer as {names.get(other, f'#{other}')} on "
                        f"{pair.same} of {pair.shared} shared items; their agreement with the "
                        f"other annotators predicts {pair.expected:.0f} (exact binomial "
                        f"p = {pair.p_value:.1g}): one may copy the other, or both answer "
                        "from one account or script"
                    ),
                    "figures": {
                        "value": round(pair.same / pair.shared, 4),
                        "expected": round(pair.expected / pair.shared, 4),
                        "evidence": pair.shared,
                        "unit": "items",
                        "p_value": pair.p_value,
                        "with": other,
                    },
                }
            )
    return intervals, notes, pairs


def ratings_intervals(
    matrix: NDArray[np.float64],
    *,
    annotators: Sequence[int],
    scale: LabelScale,
    min_overlap: int,
    seed: int,
    names: Mapping[int, str],
    min_items: int = 20,
) -> IntervalSet:
    """The intervals (and crowd findings) that need only the round-1 ratings ``matrix``
    (value codes; rows ``annotators``): kappa with others, AAD, alpha, Fleiss' kappa
    (:func:`indicator_intervals_categorical`; ordered scales on scale positions), Dawid-Skene
    competence (item bootstrap, :data:`DS_BOOTSTRAP` warm-started refits), label skew and
    :func:`crowd_figures` (its flags need ``min_items`` compared items). The kind adds what
    needs the stored state (test-retest, seconds).
    """
    codes = np.arange(len(scale.keys))
    # ordered: the codes become scale positions (ranks), as the estimators expect
    position = scale.ranks if scale.ordered else codes.astype(float)
    ratings = np.full_like(matrix, np.nan)
    known = ~np.isnan(matrix)
    ratings[known] = position[matrix[known].astype(int)]
    found = indicator_intervals_categorical(
        ratings,
        ordered=scale.ordered,
        weights=None,
        coordinates={float(position[c]): tuple(scale.points[c]) for c in codes},
        min_overlap=min_overlap,
        seed=seed,
    )
    if known.any():
        found[DS_COMPETENCE.key] = dawid_skene_competence_bootstrap(
            matrix, n_boot=DS_BOOTSTRAP, warm=True, seed=seed
        )._replace(replicates=None)
    found[SKEW.key] = label_skew_bootstrap(matrix, n_values=len(scale.keys), seed=seed)._replace(
        replicates=None
    )
    crowd, notes, pairs = crowd_figures(matrix, annotators, names, min_items=min_items)
    found.update(crowd)
    study: dict[str, Interval] = {
        key: found.pop(key) for key in ("alpha", "fleiss_kappa") if key in found
    }
    return IntervalSet(
        annotators=list(annotators), per_annotator=found, study=study, notes=notes, pairs=pairs
    )


def label_scale(question: Question, value_keys: Sequence[str]) -> LabelScale:
    """The question's label scale on the state's value codes."""
    labels = list(question.labels.values("key", "name", "valence", "arousal"))
    return LabelScale.from_labels(value_keys, labels, ordered=question.ordered)


def stored_stats(state: QualityState) -> CategoricalStats:
    """The sufficient statistics stored in a question's state."""
    return CategoricalStats.from_bytes(
        state.stats, n_annotators=len(state.annotator_ids), n_values=len(state.value_keys)
    )


def derive(state: QualityState, question: Question, *, layout: Json | None) -> Derived:
    """:func:`derive_categorical` of a question's stored state."""
    return derive_categorical(
        stored_stats(state),
        annotators=state.annotator_ids,
        scale=label_scale(question, state.value_keys),
        min_overlap=quality_config().min_overlap,
        layout=layout,
    )


class _Ratings:
    """The question's round-1 ratings matrix, read from the database at most once per publish
    (only a rebuild or a Dawid-Skene fit needs all of it)."""

    def __init__(self, question: Question, state: QualityState) -> None:
        self.question, self.state = question, state
        self._all: tuple[NDArray[np.int64], NDArray[np.float64]] | None = None

    def get(
        self, item_ids: Sequence[int] | None = None
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        if item_ids is None and self._all is not None:
            return self._all
        found = question_ratings(
            question_id=self.question.pk,
            annotator_ids=self.state.annotator_ids,
            value_keys=self.state.value_keys,
            item_ids=item_ids,
        )
        if item_ids is None:
            self._all = found
        return found


#: Items a rebuild keeps in ItemDisagreement: the most disputed ones. Touched items are added
#: as they change, so the dashboard's top 10 stays exact while fewer than KEPT - 10 of the kept
#: items have become less disputed than the least disputed item left out.
KEPT_DISAGREEMENTS = 1000


def _update_disagreement(
    question: Question, scale: LabelScale, ratings: _Ratings, item_ids: Sequence[int] | None
) -> None:
    """Recompute AAD-RMSE of the touched items, or on rebuild (``item_ids`` None) replace the
    rows with the :data:`KEPT_DISAGREEMENTS` most disputed items. Computed first, then written
    in one short transaction (the publish runs outside one: issue 22)."""
    items, matrix = ratings.get(item_ids)
    # touched items left without a first-round answer
    gone = set(item_ids) - set(items.tolist()) if item_ids is not None else set()
    rows = []
    if items.size:
        coordinates = {float(c): tuple(point) for c, point in enumerate(scale.points)}
        rmse = aad_rmse_per_item(matrix, coordinates=coordinates)
        counts = (~np.isnan(matrix)).sum(axis=0)
        keep = np.arange(items.size)
        if item_ids is None:
            keep = np.argsort(-np.nan_to_num(rmse, nan=-1.0), kind="stable")[:KEPT_DISAGREEMENTS]
        rows = [
            ItemDisagreement(
                question=question,
                item_id=int(items[i]),
                aad_rmse=None if np.isnan(rmse[i]) else float(rmse[i]),
                n=int(counts[i]),
            )
            for i in keep
        ]
    with transaction.atomic():
        if item_ids is None:
            ItemDisagreement.objects.filter(question=question).delete()
        elif gone:
            ItemDisagreement.objects.filter(question=question, item_id__in=gone).delete()
        ItemDisagreement.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["question", "item"],
            update_fields=["aad_rmse", "n"],
        )


def _competence(
    derived: Derived,
    ratings: _Ratings,
    previous: QualitySnapshot | None,
    *,
    refresh: bool,
) -> None:
    """Add Dawid-Skene competence to ``derived``: fitted now, or carried from the last fit."""
    now = timezone.now()
    interval = quality_config().ds_interval
    last = (previous.indicators.get("study", {}) if previous else {}).get("ds_computed_at")
    due = interval > 0 and (
        last is None or now - dt.datetime.fromisoformat(last) >= dt.timedelta(seconds=interval)
    )
    if refresh or due:
        competence, fit = derive_competence(ratings.get()[1])
        derived.indicators[DS_COMPETENCE.key] = competence
        derived.study.update(fit, ds_computed_at=now.isoformat())
    elif last is not None and previous is not None:
        old = dict(
            zip(
                previous.indicators["annotators"],
                previous.indicators["values"].get(DS_COMPETENCE.key, []),
                strict=False,
            )
        )
        derived.indicators[DS_COMPETENCE.key] = [old.get(a) for a in derived.annotators]
        study = previous.indicators.get("study", {})
        derived.study.update(
            {key: study[key] for key in ("ds_iterations", "ds_converged") if key in study},
            ds_computed_at=last,
        )


def publish_extras(
    derived: Derived,
    *,
    question: Question,
    state: QualityState,
    previous: QualitySnapshot | None,
    item_ids: Sequence[int] | None,
    rebuild: bool,
    refresh: bool,
) -> None:
    """Keep the touched items' disagreement current (every item's on rebuild) and add the
    Dawid-Skene competence (fitted on rebuild or ``refresh``, else carried forward)."""
    ratings = _Ratings(question, state)
    if rebuild or item_ids:
        scale = label_scale(question, state.value_keys)
        _update_disagreement(question, scale, ratings, None if rebuild else item_ids)
    _competence(derived, ratings, previous, refresh=rebuild or refresh)
