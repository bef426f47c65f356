"""Confidence intervals of a question's indicators: computed off the live path, carried forward.

The estimators (:mod:`analytics.metrics.intervals`) take seconds on a large question (a
categorical 50 x 2,000 item bootstrap up to 3 s, traces 20 x 20 x 3,000 about 4 s), far too slow
for every answer. :func:`publish_intervals` runs in :func:`analytics.publishing.quality_publish`
(the background quality processing in the served modes): it asks the question's kind for its
:class:`IntervalSet` (:meth:`apps.studies.kinds.QuestionKind.intervals`) at most every
``QUALITY_INTERVAL_SECONDS`` per question (and on rebuild), and otherwise carries the last set
forward from the previous snapshot. Every set is stored with the time it was computed and the
number of answers it rests on, so the dashboard can say how fresh it is.

Stored form (JSON, in the snapshot's ``indicators``): ``intervals[key]`` is one
``[estimate, low, high, n]`` per annotator (``None`` where undefined), ``key`` an
:attr:`Indicator.interval <analytics.indicators.Indicator.interval>`;
``study["intervals"]`` holds ``{"computed_at", "n_answers", "study": {key: [estimate, low,
high, n]}}``. A figure resting on serially correlated samples (traces) has two more
elements, ``[..., n_effective, samples]``: the independent samples its ``samples`` are worth
(:func:`~analytics.metrics.uncertainty.effective_sample_size`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from django.utils import timezone

from analytics.metrics.uncertainty import Interval

if TYPE_CHECKING:
    from analytics.indicators import Derived, Indicator
    from analytics.models import QualitySnapshot
    from apps.studies.kinds import QuestionKind
    from apps.studies.models import Question

Entry = list[float | int] | None  # [estimate, low, high, n(, n_effective, samples)]
#: ``publish_intervals(found=...)`` not given: compute the set if due (``None`` is a result).
NOT_GIVEN = object()


@dataclass(frozen=True)
class IntervalSet:
    """What a kind's interval estimator returns: per-annotator intervals (arrays on the
    ``annotators`` axis, keyed by :attr:`Indicator.interval`) and study-wide ones (floats).

    ``samples``: for per-annotator intervals with ``n_effective`` (serially correlated
    samples), the samples behind each annotator's figure, when ``n`` counts another unit.
    ``notes``: per indicator key, per annotator id, what was compared in words (put before
    a flag's reason); ``pairs``: findings that flag annotators beyond the indicators' rules
    (copied answers, one finding per annotator of the pair; taking nearly every model
    suggestion), each ``{"annotators": [id, ...], "indicator", "reason", "figures"}``. Both
    are stored and carried with the intervals, so a flag never quotes figures fresher or
    staler than its interval.
    """

    annotators: Sequence[int]
    per_annotator: Mapping[str, Interval]
    study: Mapping[str, Interval]
    samples: Mapping[str, Any] = field(default_factory=dict)
    notes: Mapping[str, Mapping[int, str]] = field(default_factory=dict)
    pairs: Sequence[Mapping[str, Any]] = ()
    #: CPU seconds the estimators took on their thread (set by :func:`intervals_compute`):
    #: not wall seconds, which a thread at a low priority (``QUALITY_SLOW_WORK_NICE``) spends
    #: mostly waiting for a core under load.
    took: float = 0.0


def intervals_compute(kind: QuestionKind, question: Question) -> IntervalSet | None:
    """The kind's intervals of ``question``, with the CPU time they took (``None``: none)."""
    started = time.thread_time()
    found = kind.intervals(question)
    if not isinstance(found, IntervalSet):
        return None
    return dataclasses.replace(found, took=time.thread_time() - started)


def intervals_rest(last: Mapping[str, Any], *, duty: float) -> float:
    """Seconds the stored set ``last`` must age before any recomputation: ``took / duty``, so
    that recomputing the intervals keeps at most ``duty`` of a core busy however large the
    question grows (a bootstrap's cost grows with the answers: 0.3 s at 100, 4.2 s at 1,600)."""
    from analytics.config import duty_rest

    return duty_rest(float(last.get("took", 0.0)), duty)


def _age(last: Mapping[str, Any], now: dt.datetime) -> float:
    """Seconds since the stored set ``last`` was computed."""
    return (now - dt.datetime.fromisoformat(last["computed_at"])).total_seconds()


def in_evidence_units(
    found: Mapping[str, Interval],
    indicators: Sequence[Indicator],
    evidence: Mapping[str, Sequence[int]],
) -> dict[str, Interval]:
    """``found`` with the ``n`` of each indicator's interval replaced by the indicator's own
    evidence count (:attr:`Derived.evidence`, e.g. traces where the estimator counts trace
    steps, triplets where it counts items), so that flags judge the minimum evidence and the
    dashboard states it in the indicator's unit."""
    unit = {spec.interval: spec.evidence for spec in indicators if spec.interval}
    return {
        key: interval._replace(n=np.asarray(evidence[unit[key]], dtype=np.int64))
        if unit.get(key) in evidence
        else interval
        for key, interval in found.items()
    }


def _entry(
    estimate: float,
    low: float,
    high: float,
    n: float,
    n_effective: float | None = None,
    samples: float | None = None,
) -> Entry:
    """One interval as stored; ``None`` when its estimate is undefined."""
    if not math.isfinite(estimate):
        return None

    def r(x: float) -> float | None:
        return round(float(x), 6) if math.isfinite(x) else None

    entry = [r(estimate), r(low), r(high), int(n)]
    if n_effective is not None and samples is not None and math.isfinite(n_effective):
        entry += [round(float(n_effective), 1), int(samples)]
    return entry  # type: ignore[return-value]


def _notes_json(notes: Mapping[str, Mapping[int, str]]) -> dict[str, dict[str, str]]:
    """Notes keyed by indicator and annotator id as stored (JSON object keys are strings)."""
    return {key: {str(a): text for a, text in texts.items()} for key, texts in notes.items()}


def _study_entry(interval: Interval) -> Entry:
    """A study-wide interval as stored (its ``n`` are the samples when it has
    ``n_effective``)."""
    effective = None if interval.n_effective is None else float(interval.n_effective)
    estimate, low, high, n = (float(part) for part in interval[:4])
    return _entry(estimate, low, high, n, n_effective=effective, samples=n)


def interval_entries(found: IntervalSet, annotators: Sequence[int]) -> dict[str, list[Entry]]:
    """The per-annotator intervals of ``found`` on the axis ``annotators`` (the snapshot's)."""
    row = {a: k for k, a in enumerate(found.annotators)}
    out: dict[str, list[Entry]] = {}
    for key, interval in found.per_annotator.items():
        values = [np.asarray(part, dtype=float) for part in interval[:4]]
        extra = (
            [np.asarray(interval.n_effective, dtype=float), np.asarray(found.samples[key])]
            if interval.n_effective is not None and key in found.samples
            else []
        )
        out[key] = [
            _entry(*(float(part[row[a]]) for part in [*values, *extra])) if a in row else None
            for a in annotators
        ]
    return out


def evidence_text(entry: Entry, unit: str) -> str:
    """What a stored interval rests on: "40 items", or for serially correlated samples
    "2 traces; about 7 independent samples of 265"."""
    if entry is None:
        return ""
    unit = unit.replace("_", " ")
    unit = unit[:-1] if entry[3] == 1 and unit.endswith("s") else unit  # "1 triplet"
    text = f"{entry[3]:,} {unit}"
    if len(entry) > 4:
        text += f"; about {entry[4]:,.0f} independent samples of {entry[5]:,}"
    return text


def interval_text(entry: Entry, fmt: str = "{:.2f}") -> str:
    """``0.59 [0.48, 0.69]`` (an en dash for an unknown bound)."""
    if entry is None:
        return "–"
    estimate, low, high = (("–" if x is None else fmt.format(x)) for x in entry[:3])
    return f"{estimate} [{low}, {high}]"


#: The pipeline job (:data:`analytics.pipeline.JOBS`) that republishes a question so that
#: its intervals are recomputed.
INTERVALS_JOB = "quality.intervals"


def intervals_refresh_sweep() -> list[int]:
    """Schedule a republish of every question whose intervals are older than
    ``QUALITY_INTERVAL_SECONDS`` and rest on fewer answers than it has; returns their ids.

    Intervals are recomputed when a publish finds them due, and a publish follows answers:
    when answers stop arriving before the next computation was due, the last set stayed
    ("intervals from 8 min ago, 65 answers" with 90 present) and flag reasons quoted it. This
    :data:`analytics.pipeline.SWEEP_HOOKS` hook closes that gap: no set is older than its
    answers by more than the schedule plus one ``QUALITY_SWEEP_INTERVAL``.
    """
    from analytics.config import quality_config
    from analytics.pipeline import job_schedule
    from analytics.selectors import latest_interval_records

    config = quality_config()
    if config.interval_seconds <= 0:
        return []
    now = timezone.now()
    stale = sorted(
        question_id
        for question_id, n_answers, last in latest_interval_records()
        if last
        and n_answers > last["n_answers"]
        and _age(last, now)
        >= max(config.interval_seconds, intervals_rest(last, duty=config.interval_duty))
    )
    for question_id in stale:
        job_schedule(job=INTERVALS_JOB, key=question_id)
    return stale


def _due(
    previous: QualitySnapshot | None, seconds: float, now: dt.datetime, n_answers: int
) -> bool:
    """Whether the last set is older than ``seconds`` or rests on fewer than half the answers
    now counted (early sets are cheap and outgrown fast: recomputed at 1, 2, 4, ... answers),
    and in either case has rested :func:`intervals_rest` (``QUALITY_INTERVAL_DUTY``)."""
    from analytics.config import quality_config

    last = _stored(previous)
    if last is None:
        return True
    age = _age(last, now)
    if age < intervals_rest(last, duty=quality_config().interval_duty):
        return False
    return age >= seconds or n_answers >= 2 * last["n_answers"]


def publish_intervals(
    derived: Derived,
    *,
    kind: QuestionKind,
    question: Question,
    previous: QualitySnapshot | None,
    seconds: float,
    force: bool,
    found: IntervalSet | object | None = NOT_GIVEN,
    apart: bool = False,
) -> bool:
    """Put the question's intervals into ``derived``: ``found`` when given (computed apart by
    :func:`intervals_publish`), else computed now when due (``force``, ``seconds`` since the
    last computation, or twice the answers it rests on; never with ``seconds <= 0``), else
    carried from ``previous`` onto the current annotator axis. Intervals already in
    ``derived`` (computed live by the kind's ``publish_extras``: the Wilson interval of
    attention-check accuracy) are kept. Called before the publish's transaction (the bootstrap
    takes seconds on a large question: 50 Dawid-Skene refits, 2.7 s for 96 annotators x 2,000
    items).

    ``apart`` (the quality worker): a set due by age or by the answers is not computed here
    but carried, and ``True`` returned: the caller asks :func:`intervals_request` for it once
    its snapshot is written, so a bootstrap never holds the other questions' live updates.
    """
    now = timezone.now()
    n_answers = int(derived.study.get("n_ratings", 0))
    given = found is not NOT_GIVEN
    if given or (seconds > 0 and (force or _due(previous, seconds, now, n_answers))):
        if not given and apart and not force:
            intervals_carry(derived, kind=kind, previous=previous)
            return True
        result = found if given else intervals_compute(kind, question)
        if not isinstance(result, IntervalSet):
            return False
        derived.intervals = {**derived.intervals, **interval_entries(result, derived.annotators)}
        derived.study["intervals"] = {
            "computed_at": now.isoformat(),
            "n_answers": n_answers,
            "took": round(result.took, 3),
            "study": {key: _study_entry(interval) for key, interval in result.study.items()},
            **({"notes": _notes_json(result.notes)} if result.notes else {}),
            **({"pairs": list(result.pairs)} if result.pairs else {}),
        }
        _values_of_interval_figures(derived, kind.indicators)
        return False
    intervals_carry(derived, kind=kind, previous=previous)
    return False


def intervals_carry(
    derived: Derived, *, kind: QuestionKind, previous: QualitySnapshot | None
) -> None:
    """Carry ``previous``'s intervals into ``derived`` onto its annotator axis (the intervals
    ``derived`` computed live win)."""
    if previous is None or "intervals" not in previous.indicators:
        return
    old = previous.indicators
    where = {a: k for k, a in enumerate(old["annotators"])}
    carried = {
        key: [entries[where[a]] if a in where else None for a in derived.annotators]
        for key, entries in old["intervals"].items()
    }
    derived.intervals = {**carried, **derived.intervals}
    if "intervals" in old.get("study", {}):
        derived.study["intervals"] = old["study"]["intervals"]
    _values_of_interval_figures(derived, kind.indicators)


def _stored(snapshot: QualitySnapshot | None) -> dict[str, Any] | None:
    """The snapshot's record of its intervals (``computed_at``, ``n_answers``, ...), if any."""
    study = snapshot.indicators.get("study", {}) if snapshot is not None else {}
    return study.get("intervals")


def computed_at(snapshot: QualitySnapshot | None) -> str | None:
    """When the snapshot's intervals were computed (``None``: it has none)."""
    last = _stored(snapshot)
    return None if last is None else last.get("computed_at")


def intervals_request(question_id: int) -> None:
    """Compute the question's intervals on this process's background thread and publish them
    (:func:`intervals_publish`); asked once however often before it has run (every pass finds
    the set due until it is published). Not waited for at exit: a set left undone is due again
    at the next publish or sweep."""
    from analytics import background

    background.enqueue(question_id, intervals_publish, queue=INTERVALS_JOB, drain=False, once=True)


def intervals_publish(question_id: int, attempts: int = 3) -> None:
    """Compute the question's intervals (seconds on a large question), then publish them with
    the newest state: again, up to ``attempts`` times, while a live publish of a newer state
    overtakes this one (each try costs a derive, not a bootstrap)."""
    from analytics.publishing import quality_publish_with
    from apps.studies.kinds import question_kinds
    from apps.studies.models import Question

    question = Question.objects.filter(pk=question_id).first()
    spec = question_kinds().get(question.kind) if question is not None else None
    if question is None or spec is None:
        return
    found = intervals_compute(spec, question)
    for _ in range(attempts):
        if quality_publish_with(question_id=question_id, intervals=found):
            return


def _values_of_interval_figures(derived: Derived, indicators: Sequence[Indicator]) -> None:
    """The value of each indicator computed with the intervals only (``live=False``): its
    stored interval's estimate per annotator (``None`` where undefined)."""
    for spec in indicators:
        entries = derived.intervals.get(spec.interval) if spec.interval and not spec.live else None
        if entries is not None:
            derived.indicators[spec.key] = [entry[0] if entry else None for entry in entries]


def freshness(study: Mapping[str, Any], now: dt.datetime | None = None) -> str | None:
    """ "intervals from 2 min ago, 1,234 answers" (``None`` before the first computation)."""
    meta = study.get("intervals")
    if not meta:
        return None
    age = (now or timezone.now()) - dt.datetime.fromisoformat(meta["computed_at"])
    minutes = int(age.total_seconds() // 60)
    when = "just now" if minutes < 1 else f"{minutes} min ago"
    return f"intervals from {when}, {meta['n_answers']:,} answers"


def _figure(
    entry: Entry, value: Any, evidence: int | None, unit: str, *, live: bool = True
) -> dict[str, Any]:
    low, high = (entry[1], entry[2]) if entry else (None, None)
    n = entry[3] if entry else evidence
    figure = {"value": value, "low": low, "high": high, "evidence": n, "unit": unit}
    if entry and len(entry) > 4:
        figure.update(effective_samples=entry[4], samples=entry[5])
    if not live:
        figure["computed_with"] = "intervals"
    return figure


def quality_record(snapshot: QualitySnapshot, kind: QuestionKind) -> dict[str, Any]:
    """A question's latest figures for the API and exports: per annotator (user id) each
    indicator's ``value``, its 95 % interval ``low``/``high`` (``None`` until computed) and the
    ``evidence`` (count, ``unit``) it rests on; the study figures alike; ``intervals``: when
    they were computed and on how many answers (``None`` before the first computation).
    A figure computed with the intervals only (:attr:`Indicator.live` false) says so:
    ``computed_with`` "intervals" (its value is the interval's estimate, as of
    ``intervals.computed_at``). Study figures carry their ``label`` too (the dataset card
    prints them); one without a stored interval (none computed yet) states the answers it
    counts (``unit`` "answers"), not a count in its own unit it does not have."""
    stored = snapshot.indicators
    values, evidence = stored.get("values", {}), stored.get("evidence", {})
    intervals, study = stored.get("intervals", {}), stored.get("study", {})
    meta = study.get("intervals")
    per_study = (meta or {}).get("study", {})
    annotators = []
    for k, user_id in enumerate(stored.get("annotators", [])):
        figures = {}
        for spec in kind.indicators:
            if spec.key not in values:
                continue
            entry = intervals.get(spec.interval, [None] * (k + 1))[k] if spec.interval else None
            counts = evidence.get(spec.evidence)
            figures[spec.key] = _figure(
                entry,
                values[spec.key][k],
                counts[k] if counts else None,
                spec.evidence,
                live=spec.live,
            )
        annotators.append({"annotator": user_id, "indicators": figures})
    return {
        "updated_at": snapshot.updated_at.isoformat(),
        "n_annotations": snapshot.n_annotations,
        "intervals": None
        if meta is None
        else {"computed_at": meta["computed_at"], "n_answers": meta["n_answers"]},
        "annotators": annotators,
        "study": {
            figure.key: {
                "label": figure.title(study),
                **_figure(
                    per_study.get(figure.key),
                    study[figure.key] if figure.key in study else per_study[figure.key][0],
                    study.get("n_ratings"),
                    figure.evidence if per_study.get(figure.key) else "answers",
                ),
            }
            for figure in kind.study_figures
            if figure.key in study or per_study.get(figure.key)
        },
        "flags": snapshot.flags,
    }


def study_quality(*, study: Any, name: Callable[[str], str]) -> dict[str, Any]:
    """:func:`quality_record` of every question of ``study`` with figures, by question key,
    annotators named by ``name`` (username -> the name an export shows) instead of ids."""
    from django.contrib.auth import get_user_model

    from analytics.selectors import latest_snapshot
    from apps.studies.kinds import question_kinds

    kinds = question_kinds()
    out: dict[str, Any] = {}
    for question in study.questions.filter(kind__in=list(kinds)):
        snapshot = latest_snapshot(question=question)
        if snapshot is None:
            continue
        record = quality_record(snapshot, kinds[question.kind])
        ids = [row["annotator"] for row in record["annotators"]]
        users = dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username"))
        for row in record["annotators"]:
            row["annotator"] = name(users.get(row["annotator"], f"#{row['annotator']}"))
        record.pop("flags")  # the provenance lists the flags itself, with their history
        out[question.key] = record
    return out


def _listed(interval: Interval) -> list[float | None]:
    """``[estimate, low, high]`` rounded, ``None`` where undefined."""
    return [None if not np.isfinite(float(x)) else round(float(x), 6) for x in interval[:3]]


def rows_figures(*, study: Any, left_out: Collection[int] = ()) -> dict[str, Any]:
    """The dashboard's study figures of every categorical question, computed once on the
    round-1 answers an export ships (the annotators ``left_out`` excluded), by question key.

    Each entry names its rows (``annotators``, ``answers``, ``items`` with two or more
    answers) beside Krippendorff's alpha (ordinal on an ordered scale, the dashboard's item
    bootstrap with its replicates and seed) and, on an unordered scale, Fleiss' kappa, as
    ``[estimate, low, high]`` (``None`` where undefined):
    :func:`~analytics.metrics.intervals.rows_agreement`, the function the dashboard calls.
    """
    from analytics.metrics.intervals import item_bootstrap_seed, rows_agreement
    from analytics.selectors import question_ratings
    from apps.annotations.models import Annotation
    from apps.studies.models import Question

    out: dict[str, Any] = {}
    for question in study.questions.filter(kind=Question.Kind.CATEGORICAL).order_by(
        "position", "id"
    ):
        ids = sorted(
            set(
                Annotation.objects.filter(question=question, round=1)
                .exclude(annotator_id__in=list(left_out))
                .values_list("annotator_id", flat=True)
            )
        )
        entry: dict[str, Any] = {"annotators": 0, "answers": 0, "items": 0}
        entry["level"] = "ordinal" if question.ordered else "nominal"
        # no answers in the file: no interval
        alpha: list[float | None] = [None, None, None]
        fleiss_kappa: list[float | None] = [None, None, None]
        if ids:
            keys = list(question.labels.values_list("key", flat=True))
            _, ratings = question_ratings(
                question_id=question.pk, annotator_ids=ids, value_keys=keys
            )
            found = rows_agreement(
                ratings, ordered=question.ordered, seed=item_bootstrap_seed(question.pk)
            )
            entry |= {"annotators": found.annotators, "answers": found.answers}
            entry |= {"items": found.items, "level": found.level}
            alpha, fleiss_kappa = _listed(found.alpha), _listed(found.fleiss_kappa)
        entry["alpha"] = alpha
        if not question.ordered:
            entry["fleiss_kappa"] = fleiss_kappa
        out[question.key] = entry
    return out
