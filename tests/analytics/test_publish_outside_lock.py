"""Issue 22: a quality publish computes its statistics before it takes the write lock.

On SQLite a transaction holds the database's one write lock from ``BEGIN``; every answer of
every web process waits for it. The publish computed the Dawid-Skene competence refit, the
indicators (with the MDS map) and, when the answers had doubled, the bootstrap intervals
inside its transaction: under a crowd's first minutes the answers double every few seconds,
and each doubling held every annotator's submit for the length of a bootstrap (seconds on a
large question; 7-10 s measured with 64 annotators x 2,000 items on a loaded machine).
"""

from __future__ import annotations

import uuid

import pytest
from django.db import connection

from analytics.models import QualitySnapshot
from analytics.publishing import quality_publish
from apps.annotations.models import Annotation, Assignment
from apps.annotations.services import annotations_submit
from apps.categorical import indicators as categorical_indicators
from apps.categorical.kind import CategoricalKind
from apps.categorical.quality import quality_process_pending
from tests.factories import running_study

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def spied(monkeypatch, settings):
    """Where each heavy computation ran: ``True`` when inside a transaction."""
    settings.QUALITY_UPDATES = "inline"
    settings.QUALITY_INTERVAL_SECONDS = 120
    settings.QUALITY_MIN_EVIDENCE = 5
    settings.QUALITY_MIN_OVERLAP = 5
    seen: dict[str, list[bool]] = {"intervals": [], "competence": [], "derive": []}

    def spy(name, original):
        def wrapper(*args, **kwargs):
            seen[name].append(connection.in_atomic_block)
            return original(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(CategoricalKind, "intervals", spy("intervals", CategoricalKind.intervals))
    monkeypatch.setattr(CategoricalKind, "derive", spy("derive", CategoricalKind.derive))
    monkeypatch.setattr(
        categorical_indicators,
        "derive_competence",
        spy("competence", categorical_indicators.derive_competence),
    )
    return seen


def _answer(study, annotators, *, items: int) -> None:
    question = study.questions.get()
    for user in annotators:
        for assignment in Assignment.objects.filter(annotator=user, round=1).order_by("pk")[:items]:
            if Annotation.objects.filter(item=assignment.item_id, annotator=user).exists():
                continue
            annotations_submit(
                annotator=user,
                assignment=assignment,
                answers={question: ["negative", "neutral", "positive"][assignment.item_id % 3]},
                idempotency_key=uuid.uuid4(),
                time_spent_ms=1000,
            )


def test_the_statistics_are_computed_before_the_publish_transaction(spied):
    study, annotators = running_study(n_items=24, n_annotators=4)
    question = study.questions.get()
    _answer(study, annotators, items=3)  # the first set: intervals, competence, indicators
    _answer(study, annotators, items=12)  # the answers more than doubled: due again
    quality_process_pending(question_id=question.pk)
    snapshot = quality_publish(question_id=question.pk, refresh_competence=True)
    assert snapshot is not None
    assert snapshot.n_annotations == 48
    assert snapshot.indicators["study"]["intervals"]["n_answers"] == 32  # 48 < 2 x 32
    assert all(spied.values())  # each computed at least once
    inside = {name: sum(calls) for name, calls in spied.items()}
    assert inside == {"intervals": 0, "competence": 0, "derive": 0}


def test_a_publish_never_goes_back_to_an_older_state(spied):
    """What the lock still guards: a publish computed from an older state than the latest
    snapshot's (another worker was faster) leaves that snapshot as it is."""
    study, annotators = running_study(n_items=12, n_annotators=3)
    question = study.questions.get()
    _answer(study, annotators, items=6)
    quality_process_pending(question_id=question.pk)
    newest = quality_publish(question_id=question.pk)
    QualitySnapshot.objects.filter(pk=newest.pk).update(
        state_version=newest.state_version.replace(year=newest.state_version.year + 1)
    )
    again = quality_publish(question_id=question.pk)
    assert again.pk == newest.pk
    assert QualitySnapshot.objects.filter(question=question).count() == 1


def test_the_worker_leaves_due_intervals_to_a_thread_of_their_own(spied, monkeypatch, settings):
    """A bootstrap takes seconds on a large question; on the quality worker's own thread it
    held every other question's live update (and this one's push) for that long. With
    ``QUALITY_SLOW_WORK_APART`` (the worker's setting) the publish carries the last set and a
    background thread computes the new one, then publishes it."""
    import threading

    from analytics import background
    from analytics.intervals import computed_at

    threads: list[str] = []
    original = CategoricalKind.intervals

    def where(self, question):
        threads.append(threading.current_thread().name)
        return original(self, question)

    monkeypatch.setattr(CategoricalKind, "intervals", where)
    study, annotators = running_study(n_items=24, n_annotators=4)
    question = study.questions.get()
    _answer(study, annotators, items=3)
    first = QualitySnapshot.objects.filter(question=question).latest("updated_at")
    assert computed_at(first) is not None
    settings.QUALITY_UPDATES = "worker"  # the answers wait in the outbox...
    _answer(study, annotators, items=12)  # ...and make the intervals due (x4)
    settings.QUALITY_UPDATES = "inline"
    settings.QUALITY_SLOW_WORK_APART = True
    threads.clear()
    quality_process_pending(question_id=question.pk)  # one batch, one publish: it defers
    # (the in-memory test database allows one thread at a time: wait before reading)
    assert background.idle(timeout=60)
    assert threads  # computed, and never on the publishing thread
    assert threading.current_thread().name not in threads
    latest = QualitySnapshot.objects.filter(question=question).latest("updated_at")
    assert latest.n_annotations == 48
    assert computed_at(latest) > computed_at(first)
    assert latest.indicators["study"]["intervals"]["n_answers"] >= 24


def test_intervals_computed_apart_are_not_written_over_a_newer_state(spied):
    from analytics.publishing import quality_publish_with

    study, annotators = running_study(n_items=12, n_annotators=3)
    question = study.questions.get()
    _answer(study, annotators, items=6)
    newest = QualitySnapshot.objects.filter(question=question).latest("updated_at")
    QualitySnapshot.objects.filter(pk=newest.pk).update(
        state_version=newest.state_version.replace(year=newest.state_version.year + 1)
    )
    found = CategoricalKind().intervals(question)
    assert quality_publish_with(question_id=question.pk, intervals=found) is False


def test_a_bootstrap_is_asked_for_once_until_it_has_run(spied, monkeypatch, settings):
    """Every pass of the worker until the background bootstrap has published finds the
    intervals due and asks for them; the ask that came while the bootstrap ran queued a second
    one, run at once after the first, on answers the first had just covered (the forecast's
    retraining had the same double run, issue 22's thirteenth pass)."""
    import threading

    from analytics import background

    started, release = threading.Event(), threading.Event()
    runs: list[str] = []
    original = CategoricalKind.intervals

    def slow(self, question):
        if threading.current_thread().name == "quality-updates":
            runs.append("bootstrap")
            started.set()
            release.wait(timeout=30)  # still running when the next pass comes
        return original(self, question)

    monkeypatch.setattr(CategoricalKind, "intervals", slow)
    study, annotators = running_study(n_items=24, n_annotators=4)
    question = study.questions.get()
    _answer(study, annotators, items=2)
    settings.QUALITY_SLOW_WORK_APART = True
    for answered in (6, 18):  # each pass finds the set due (the answers more than doubled)
        settings.QUALITY_UPDATES = "worker"  # the answers wait in the outbox for the pass
        _answer(study, annotators, items=answered)
        settings.QUALITY_UPDATES = "inline"
        quality_process_pending(question_id=question.pk)
        assert started.wait(timeout=30)
    release.set()
    assert background.idle(timeout=60)
    assert runs == ["bootstrap"]
