"""Indicator intervals: computed by the quality processing at most every
``QUALITY_INTERVAL_SECONDS``, carried forward in between, stated in flags."""

from __future__ import annotations

import datetime as dt
import time
import uuid

import numpy as np
import pytest
from django.urls import reverse
from scipy import stats as scipy_stats

from analytics.intervals import (
    IntervalSet,
    evidence_text,
    freshness,
    interval_text,
    intervals_compute,
    intervals_refresh_sweep,
)
from analytics.models import Flag, QualitySnapshot
from analytics.pipeline import quality_sweep
from analytics.publishing import quality_publish
from apps.annotations.exporting import provenance
from apps.annotations.models import Annotation, Assignment
from apps.annotations.services import annotations_submit
from apps.categorical.quality import quality_process_pending
from tests.factories import running_study

LABELS = ["negative", "neutral", "positive"]


def _answer(
    study, annotators, *, random_last: bool, seed: int = 0, varied_times: bool = False
) -> None:
    """Everyone labels the truth with 5 % noise; the last annotator at random if asked.
    Every answer takes 1.5 s, or (``varied_times``) a skewed draw with every fifth untimed."""
    question = study.questions.get()
    rng = np.random.default_rng(seed)
    truth = {pk: int(rng.integers(3)) for pk in study.items.values_list("pk", flat=True)}
    for user in annotators:
        at_random = random_last and user == annotators[-1]
        for assignment in Assignment.objects.filter(annotator=user, round=1):
            code = truth[assignment.item_id]
            if at_random or rng.random() < 0.05:
                code = int(rng.integers(3))
            annotations_submit(
                annotator=user,
                assignment=assignment,
                answers={question: LABELS[code]},
                idempotency_key=uuid.uuid4(),
                time_spent_ms=_time_spent(rng) if varied_times else 1500,
            )
    quality_process_pending(question_id=question.pk)  # its publish waits for a commit
    quality_publish(question_id=question.pk)


def _time_spent(rng: np.random.Generator) -> int | None:
    return None if rng.random() < 0.2 else int(rng.gamma(2.0, 1500.0))


@pytest.fixture
def answered(db, settings):
    settings.QUALITY_INTERVAL_SECONDS = 120
    settings.QUALITY_MIN_EVIDENCE = 20
    settings.QUALITY_MIN_OVERLAP = 10
    study, annotators = running_study(n_items=40, n_annotators=5)
    _answer(study, annotators, random_last=True)
    return study, study.questions.get(), annotators


def test_intervals_appear_after_processing_and_are_carried_forward(answered):
    _, question, _ = answered
    snapshot = QualitySnapshot.objects.filter(question=question).latest("updated_at")
    stored = snapshot.indicators
    kappa = stored["intervals"]["kappa"]
    assert len(kappa) == len(stored["annotators"]) == 5
    for estimate, low, high, n in kappa:
        assert low < estimate < high
        assert n == 40
    meta = stored["study"]["intervals"]
    assert meta["n_answers"] == 200
    low, high = meta["study"]["alpha"][1:3]
    assert low < stored["study"]["alpha"] < high
    assert freshness(stored["study"]) == "intervals from just now, 200 answers"
    # within QUALITY_INTERVAL_SECONDS the next publish carries the set instead of recomputing
    again = quality_publish(question_id=question.pk)
    assert again.indicators["intervals"] == stored["intervals"]
    assert again.indicators["study"]["intervals"]["computed_at"] == meta["computed_at"]


def test_intervals_are_recomputed_once_due(answered, settings):
    _, question, _ = answered
    snapshot = QualitySnapshot.objects.filter(question=question).latest("updated_at")
    old = dt.datetime.fromisoformat(snapshot.indicators["study"]["intervals"]["computed_at"])
    snapshot.indicators["study"]["intervals"]["computed_at"] = (
        old - dt.timedelta(seconds=121)
    ).isoformat()
    snapshot.save(update_fields=["indicators"])
    again = quality_publish(question_id=question.pk)
    assert dt.datetime.fromisoformat(again.indicators["study"]["intervals"]["computed_at"]) > old


def _age(snapshot, seconds: float, **meta) -> None:
    """Make the snapshot's intervals ``seconds`` older (and set ``meta`` in their record)."""
    record = snapshot.indicators["study"]["intervals"]
    record.update(meta)
    at = dt.datetime.fromisoformat(record["computed_at"]) - dt.timedelta(seconds=seconds)
    record["computed_at"] = at.isoformat()
    snapshot.save(update_fields=["indicators"])


def test_the_set_records_its_time_and_rests_took_over_duty_before_the_next(answered, settings):
    """Issue 22: a bootstrap's cost grows with the answers (0.3 s at 100, 4.2 s at 1,600), and
    the doubling rule recomputed it back to back under a crowd's load: half the quality
    worker's core. Now a set rests ``took / QUALITY_INTERVAL_DUTY`` first, by either rule."""
    _, question, _ = answered
    settings.QUALITY_INTERVAL_DUTY = 0.1
    snapshot = QualitySnapshot.objects.filter(question=question).latest("updated_at")
    record = snapshot.indicators["study"]["intervals"]
    assert 0 < record["took"] < 60  # the CPU seconds the bootstrap took
    computed = record["computed_at"]

    # answers doubled, and the 120 s passed, but the set took 20 s: it rests 200 s
    snapshot.n_annotations = 400
    snapshot.save(update_fields=["n_annotations"])
    _age(snapshot, 150, took=20.0, n_answers=100)
    held = quality_publish(question_id=question.pk)
    assert held.indicators["study"]["intervals"]["computed_at"] < computed  # carried
    assert intervals_refresh_sweep() == []  # nor does the sweep ask for it

    _age(held, 60)  # 210 s old: rested
    assert intervals_refresh_sweep() == [question.pk]
    again = quality_publish(question_id=question.pk)
    assert again.indicators["study"]["intervals"]["computed_at"] > computed

    # with no rest asked (0) the doubling rule alone decides, as before
    settings.QUALITY_INTERVAL_DUTY = 0
    _age(again, 1, took=20.0, n_answers=50)
    assert (
        quality_publish(question_id=question.pk).indicators["study"]["intervals"]["n_answers"]
        == 200
    )


def test_the_sweep_refreshes_intervals_left_stale_when_answers_stopped(
    answered, settings, django_capture_on_commit_callbacks
):
    """Issue 23: answers that arrive before the next computation is due, then stop, left
    "intervals from 8 min ago, 65 answers" with 90 present, and the flags quoted them."""
    _, question, _ = answered
    settings.QUALITY_UPDATES = "inline"
    snapshot = QualitySnapshot.objects.filter(question=question).latest("updated_at")
    meta = snapshot.indicators["study"]["intervals"]
    # the last answers came in after the set (200 -> 210 answers), then nothing more
    snapshot.n_annotations = 210
    meta["computed_at"] = (
        dt.datetime.fromisoformat(meta["computed_at"]) - dt.timedelta(seconds=600)
    ).isoformat()
    snapshot.save(update_fields=["indicators", "n_annotations"])
    with django_capture_on_commit_callbacks(execute=True):
        assert quality_sweep() == []  # nothing lags in the outbox: the hook republishes
    fresh = QualitySnapshot.objects.filter(question=question).latest("updated_at")
    now_meta = fresh.indicators["study"]["intervals"]
    assert freshness(fresh.indicators["study"]) == "intervals from just now, 200 answers"
    assert now_meta["computed_at"] > meta["computed_at"]
    # a set as fresh as its answers is left alone
    assert intervals_refresh_sweep() == []


def test_no_intervals_with_the_setting_at_zero(db, settings):
    settings.QUALITY_INTERVAL_SECONDS = 0
    study, annotators = running_study(n_items=10, n_annotators=3)
    _answer(study, annotators, random_last=False)
    snapshot = QualitySnapshot.objects.filter(question=study.questions.get()).latest("updated_at")
    assert "intervals" not in snapshot.indicators


def test_flags_state_the_interval(answered):
    _, question, annotators = answered
    flag = Flag.objects.get(question=question, annotator=annotators[-1], indicator="cohen_kappa")
    snapshot = QualitySnapshot.objects.filter(question=question).latest("updated_at")
    row = snapshot.indicators["annotators"].index(annotators[-1].pk)
    entry = snapshot.indicators["intervals"]["kappa"][row]
    assert flag.reason.startswith(f"kappa with others {interval_text(entry)}")
    assert "40 items" in flag.reason
    assert flag.figures["low"] == pytest.approx(entry[1], abs=1e-4)
    assert flag.figures["high"] == pytest.approx(entry[2], abs=1e-4)
    assert flag.figures["rule"] == "separated"  # 5 annotators: too few for a robust z
    assert not Flag.objects.filter(question=question, annotator__in=annotators[:-1]).exists()


def test_interval_text():
    assert interval_text([0.591, 0.482, 0.6875, 40]) == "0.59 [0.48, 0.69]"
    assert interval_text(None) == "–"


def test_dashboard_shows_intervals_evidence_and_freshness(answered, client):
    study, question, annotators = answered
    snapshot = QualitySnapshot.objects.filter(question=question).latest("updated_at")
    row = snapshot.indicators["annotators"].index(annotators[0].pk)
    client.force_login(study.created_by)
    html = client.get(reverse("analytics:dashboard", args=[study.pk])).content.decode()
    assert interval_text(snapshot.indicators["intervals"]["kappa"][row]) in html
    assert "40 items" in html
    alpha = snapshot.indicators["study"]["intervals"]["study"]["alpha"]
    assert f"{interval_text(alpha)}; 40 items" in html
    assert "intervals from just now, 200 answers" in html


def test_a_judged_figure_below_its_minimum_evidence_is_not_shown_as_a_value(db, client, settings):
    settings.QUALITY_MIN_EVIDENCE = 20
    study, annotators = running_study(n_items=6, n_annotators=3)
    _answer(study, annotators, random_last=False)
    client.force_login(study.created_by)
    html = client.get(reverse("analytics:dashboard", args=[study.pk])).content.decode()
    assert "6 items: too few" in html


def test_api_quality_carries_intervals_and_evidence(answered, client):
    study, question, annotators = answered
    url = f"/api/studies/{study.pk}/questions/{question.pk}/quality/"
    client.force_login(annotators[0])
    assert client.get(url).status_code == 403
    client.force_login(study.created_by)
    body = client.get(url).json()
    assert body["intervals"]["n_answers"] == 200
    last = next(a for a in body["annotators"] if a["annotator"] == annotators[-1].pk)
    kappa = last["indicators"]["cohen_kappa"]
    assert kappa["low"] < kappa["high"]
    assert (kappa["evidence"], kappa["unit"]) == (40, "items")
    alpha = body["study"]["alpha"]
    assert alpha["low"] < alpha["value"] < alpha["high"]
    assert any(f["indicator"] == "cohen_kappa" and "[" in f["reason"] for f in body["flags"])


def test_export_provenance_carries_intervals_and_evidence(answered):
    study, question, annotators = answered
    record = provenance(study=study, curated=False, include_history=False, fmt="csv")
    quality = record["quality"][question.key]
    assert quality["intervals"]["n_answers"] == 200
    last = next(a for a in quality["annotators"] if a["annotator"] == annotators[-1].username)
    kappa = last["indicators"]["cohen_kappa"]
    assert kappa["low"] < kappa["high"]
    assert kappa["evidence"] == 40
    flag = next(f for f in record["open_flags"] if f["indicator"] == "cohen_kappa")
    assert f"[{kappa['low']:.2f}, {kappa['high']:.2f}]" in flag["reason"]


def assert_mean_t_interval(stored: dict, key: str, unit: str, k: int, seconds: list[float]) -> None:
    """Annotator ``k``'s stored ``key`` is the mean of ``seconds`` with scipy's t interval,
    ``n`` the count of ``seconds`` in the evidence ``unit``."""
    mean, sem = np.mean(seconds), scipy_stats.sem(seconds)
    low, high = scipy_stats.t.interval(0.95, len(seconds) - 1, mean, sem)
    entry = stored["intervals"][key][k]
    assert stored["values"][key][k] == pytest.approx(mean, abs=1e-4)
    assert entry[:3] == [pytest.approx(x, abs=1e-4) for x in (mean, low, high)]
    assert entry[3] == stored["evidence"][unit][k] == len(seconds)


def test_seconds_per_item_has_a_t_interval_of_the_timed_answers(db, settings, client):
    """The mean time per answer gets Student's t interval over the annotator's timed answers
    (scipy as the oracle), ``n`` in timed answers; the API carries it."""
    settings.QUALITY_INTERVAL_SECONDS = 120
    settings.QUALITY_MIN_EVIDENCE = 1
    study, annotators = running_study(n_items=15, n_annotators=3)
    _answer(study, annotators, random_last=False, varied_times=True)
    question = study.questions.get()
    stored = QualitySnapshot.objects.filter(question=question).latest("updated_at").indicators
    for k, user in enumerate(stored["annotators"]):
        seconds = [
            ms / 1000.0
            for ms in Annotation.objects.filter(question=question, annotator_id=user)
            .exclude(current_revision__time_spent_ms=None)
            .values_list("current_revision__time_spent_ms", flat=True)
        ]
        assert_mean_t_interval(stored, "seconds_per_item", "timed_answers", k, seconds)
        assert len(seconds) < 15
    client.force_login(study.created_by)
    body = client.get(f"/api/studies/{study.pk}/questions/{question.pk}/quality/").json()
    figure = body["annotators"][0]["indicators"]["seconds_per_item"]
    assert figure["unit"] == "timed_answers"
    assert figure["low"] <= figure["value"] <= figure["high"]


def test_label_skew_has_an_item_bootstrap_interval(answered):
    """Label skew gets the item bootstrap of :func:`label_skew_bootstrap`, its estimate the
    live figure, ``n`` in items."""
    _, question, _ = answered
    stored = QualitySnapshot.objects.filter(question=question).latest("updated_at").indicators
    for k, entry in enumerate(stored["intervals"]["skew"]):
        assert entry[0] == pytest.approx(stored["values"]["skew"][k], abs=1e-6)
        assert 0 <= entry[1] <= entry[2] <= 1
        assert entry[3] == stored["evidence"]["items"][k] == 40


def test_study_figure_before_its_interval_counts_answers_not_items(db, client):
    """Before the first interval set (``QUALITY_INTERVAL_SECONDS`` 0 in the tests) the API and
    the export give a study figure's evidence as the answers it counts: 3 x 12 = 36 answers
    are not 36 items."""
    study, annotators = running_study(n_items=12, n_annotators=3)
    _answer(study, annotators, random_last=False)
    question = study.questions.get()
    client.force_login(study.created_by)
    url = f"/api/studies/{study.pk}/questions/{question.pk}/quality/"
    alpha = client.get(url).json()["study"]["alpha"]
    assert (alpha["low"], alpha["high"]) == (None, None)
    assert (alpha["evidence"], alpha["unit"]) == (36, "answers")
    record = provenance(study=study, curated=False, include_history=False, fmt="csv")
    assert record["quality"][question.key]["study"]["alpha"]["unit"] == "answers"


def test_over_time_card_gives_the_median_and_alpha_their_intervals(db, settings, client):
    """The "Over time" card's study-wide figures: the annotators' median kappa with its
    order-statistic interval (6 annotators: the smallest and largest value, 96.9 %) and the
    annotators it counts; alpha as in the summary, with its interval and items."""
    settings.QUALITY_INTERVAL_SECONDS = 120
    settings.QUALITY_MIN_EVIDENCE = 1
    study, annotators = running_study(n_items=15, n_annotators=6)
    _answer(study, annotators, random_last=True)
    question = study.questions.get()
    stored = QualitySnapshot.objects.filter(question=question).latest("updated_at").indicators
    kappas = sorted(v for v in stored["values"]["cohen_kappa"] if v is not None)
    assert len(kappas) == 6
    client.force_login(study.created_by)
    html = client.get(reverse("analytics:dashboard", args=[study.pk])).content.decode()
    trends = html[html.index('id="quality-trends"') :]
    median = (kappas[2] + kappas[3]) / 2
    assert f"{median:.2f} [{kappas[0]:.2f}, {kappas[-1]:.2f}]; 6 annotators" in trends
    alpha = stored["study"]["intervals"]["study"]["alpha"]
    assert f"{interval_text(alpha)}; {evidence_text(alpha, 'items')}" in trends


def test_evidence_of_one_is_singular():
    """The card read "[1.00, 1.00]; 1 triplets" (found in a browser check)."""
    assert evidence_text((1.0, 1.0, 1.0, 1), "triplets") == "1 triplet"
    assert evidence_text((0.5, 0.1, 0.9, 3), "gold_checks") == "3 gold checks"


def test_due_intervals_are_computed_before_the_publish_transaction(answered, monkeypatch):
    """The bootstrap takes seconds on a large question; inside the publish's transaction it
    held SQLite's one write lock (from BEGIN) and every answer waited (p99 1.8-2.6 s). It is
    computed before, once, and the publish uses that set."""
    from django.db import connection

    from apps.categorical.kind import CategoricalKind

    _, question, _ = answered
    snapshot = QualitySnapshot.objects.filter(question=question).latest("updated_at")
    old = dt.datetime.fromisoformat(snapshot.indicators["study"]["intervals"]["computed_at"])
    snapshot.indicators["study"]["intervals"]["computed_at"] = (
        old - dt.timedelta(seconds=121)
    ).isoformat()
    snapshot.save(update_fields=["indicators"])
    depth = len(connection.atomic_blocks)  # the test's own transaction
    calls: list[int] = []
    real = CategoricalKind.intervals

    def spy(self, question):
        calls.append(len(connection.atomic_blocks))
        return real(self, question)

    monkeypatch.setattr(CategoricalKind, "intervals", spy)
    again = quality_publish(question_id=question.pk)
    assert calls == [depth]  # once, outside the publish's transaction
    assert dt.datetime.fromisoformat(again.indicators["study"]["intervals"]["computed_at"]) > old
    assert len(again.indicators["intervals"]["kappa"]) == 5
    calls.clear()
    quality_publish(question_id=question.pk)  # not due: nothing computed, before or inside
    assert calls == []


def test_a_set_records_the_cpu_time_it_took_not_the_time_it_waited_for_a_core():
    """The rest before the next set (``took / QUALITY_INTERVAL_DUTY``) bounds the share of a
    core the bootstraps take. Their thread runs at the lowest priority
    (``QUALITY_SLOW_WORK_NICE``), so under load most of its wall time is waiting: a set
    that took 4.5 s of CPU took 14 s of wall time beside 64 annotators, and would have
    rested 140 s instead of 45."""

    class Kind:
        def __init__(self, work) -> None:
            self.work = work

        def intervals(self, question) -> IntervalSet:
            self.work()
            return IntervalSet(annotators=[], per_annotator={}, study={})

    def busy() -> None:
        until = time.thread_time() + 0.2
        while time.thread_time() < until:
            pass

    waited = intervals_compute(Kind(lambda: time.sleep(0.3)), question=None)
    worked = intervals_compute(Kind(busy), question=None)
    assert waited is not None
    assert worked is not None
    assert waited.took < 0.1
    assert 0.2 <= worked.took < 1.0
