"""Undo of pairwise judgements (append-only retractions) and the side each item was shown on."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from analytics.models import QualityState
from analytics.pipeline import answers_waiting, quality_sweep
from analytics.sufficient_stats import PAIRWISE_COLUMNS, PairwiseStats
from apps.preferences.models import Judgement, PairSession, Retraction
from apps.preferences.quality import (
    judgements_waiting,
    quality_judgements_process,
    quality_judgements_rebuild,
)
from apps.preferences.selectors import annotator_reports, replays
from apps.preferences.services import judgement_record, judgement_retract, pair_next
from tests.apps.preferences.conftest import answer_all, by_level, make_pairwise_study


def answer(setup, annotator, outcome=1, *, swap=False):
    a, b = pair_next(question=setup.question, annotator=annotator).pending
    if swap:
        a, b, outcome = b, a, -outcome
    judgement, _ = judgement_record(
        question=setup.question,
        annotator=annotator,
        item_a=a,
        item_b=b,
        outcome=outcome,
        idempotency_key=uuid.uuid4(),
    )
    return judgement


class TestRetract:
    def test_undo_brings_the_pair_back_and_keeps_the_judgement(self, pairwise):
        annotator = pairwise.annotators[0]
        first = answer(pairwise, annotator)
        second = answer(pairwise, annotator, -1)
        pending_before = pair_next(question=pairwise.question, annotator=annotator).pending
        undone = judgement_retract(question=pairwise.question, annotator=annotator)
        assert undone == second
        state = pair_next(question=pairwise.question, annotator=annotator)
        assert set(state.pending) == {second.item_a_id, second.item_b_id}
        assert set(state.pending) != set(pending_before)
        assert [j.id for j in state.judgements] == [first.pk]
        assert Judgement.objects.count() == 2  # append-only
        assert Retraction.objects.get().judgement == second

    def test_several_steps_back_then_on_again(self, pairwise):
        annotator = pairwise.annotators[0]
        judgements = [answer(pairwise, annotator) for _ in range(3)]
        for expected in reversed(judgements):
            assert judgement_retract(question=pairwise.question, annotator=annotator) == expected
        state = pair_next(question=pairwise.question, annotator=annotator)
        assert state.judgements == []
        assert set(state.pending) == {judgements[0].item_a_id, judgements[0].item_b_id}
        again = answer(pairwise, annotator, -1)
        assert again.sequence == 4  # sequences keep counting across retractions
        answer(pairwise, annotator)
        with pytest.raises(ValidationError, match="latest"):
            judgement_retract(
                question=pairwise.question, annotator=annotator, judgement_id=again.pk
            )

    def test_a_resent_undo_undoes_one_answer(self, pairwise):
        annotator = pairwise.annotators[0]
        first, second = answer(pairwise, annotator), answer(pairwise, annotator)
        for _ in range(2):
            judgement_retract(
                question=pairwise.question, annotator=annotator, judgement_id=second.pk
            )
        assert list(Retraction.objects.values_list("judgement", flat=True)) == [second.pk]
        assert not hasattr(Judgement.objects.get(pk=first.pk), "retraction")

    def test_nothing_to_undo(self, pairwise):
        with pytest.raises(ValidationError, match="Nothing to undo"):
            judgement_retract(question=pairwise.question, annotator=pairwise.annotators[0])

    def test_undo_reopens_a_completed_ranking(self, pairwise):
        annotator = pairwise.annotators[0]
        levels = {item.pk: k for k, item in enumerate(pairwise.items)}
        asked = answer_all(pairwise.question, annotator, by_level(levels))
        session = PairSession.objects.get(annotator=annotator)
        assert session.completed_at is not None
        open_assignments = pairwise.study.assignments.filter(annotator=annotator, completed_at=None)
        assert not open_assignments.exists()
        judgement_retract(question=pairwise.question, annotator=annotator)
        session.refresh_from_db()
        assert session.completed_at is None
        assert open_assignments.exists()
        assert pair_next(question=pairwise.question, annotator=annotator).pending is not None
        assert answer_all(pairwise.question, annotator, by_level(levels)) == 1
        (report,) = [r for r in annotator_reports(question=pairwise.question) if r.asked]
        assert report.asked == asked

    def test_undoing_the_answer_that_stopped_pruning_resumes_it(self, db, pinned_pair_seed):
        setup = make_pairwise_study(n_items=6, n_annotators=1)
        (annotator,) = setup.annotators
        session = pair_next(question=setup.question, annotator=annotator).session
        # A session started before the adaptive scheduler: once stopped, every pair is asked.
        PairSession.objects.filter(pk=session.pk).update(pruning_stopped_at=0, adaptive=False)
        replays.clear()
        answer(setup, annotator)
        assert PairSession.objects.get(pk=session.pk).pruning_stopped_at == 0
        PairSession.objects.filter(pk=session.pk).update(pruning_stopped_at=1)
        judgement_retract(question=setup.question, annotator=annotator)
        assert PairSession.objects.get(pk=session.pk).pruning_stopped_at is None


class TestSides:
    def test_the_side_item_a_was_shown_on_is_stored(self, pairwise):
        annotator = pairwise.annotators[0]
        shown = answer(pairwise, annotator)
        swapped = answer(pairwise, annotator, swap=True)
        assert shown.side_a == Judgement.Side.A
        assert swapped.side_a == Judgement.Side.B


def test_api_undo(api_client, pairwise):
    annotator = pairwise.annotators[0]
    api_client.force_authenticate(annotator)
    judgement = answer(pairwise, annotator)
    url = f"/api/studies/{pairwise.study.pk}/pairs/{pairwise.question.key}/undo/"
    response = api_client.post(url, {"judgement": judgement.pk}, format="json")
    assert response.status_code == 200
    assert response.json()["id"] == judgement.pk
    assert response.json()["retracted"] is True
    body = api_client.get(f"/api/studies/{pairwise.study.pk}/pairs/{pairwise.question.key}/next/")
    assert {body.json()["item_a"]["id"], body.json()["item_b"]["id"]} == {
        judgement.item_a_id,
        judgement.item_b_id,
    }
    assert api_client.post(url, {}, format="json").status_code == 400  # nothing left
    listed = api_client.get("/api/judgements/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["retracted"] for row in rows] == [True]


def test_page_undo_with_and_without_htmx(client, pairwise):
    annotator = pairwise.annotators[0]
    client.force_login(annotator)
    url = reverse("preferences:undo", args=[pairwise.study.pk, pairwise.question.key])
    compare = reverse("preferences:compare", args=[pairwise.study.pk, pairwise.question.key])
    assert 'data-key="u"' not in client.get(compare).content.decode()  # nothing to undo yet
    first = answer(pairwise, annotator)
    page = client.get(compare).content.decode()
    assert 'data-key="u"' in page
    assert f'name="judgement" value="{first.pk}"' in page
    response = client.post(url, {"judgement": first.pk})
    assert response.status_code == 302
    assert Retraction.objects.filter(judgement=first).exists()
    second = answer(pairwise, annotator)
    response = client.post(url, {"judgement": second.pk}, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "<html" not in response.content.decode()
    response = client.post(url, {"judgement": first.pk}, headers={"HX-Request": "true"})
    assert response.status_code == 200  # already undone: nothing more happens
    assert Retraction.objects.count() == 2
    assert client.get(url).status_code == 405


def _live_stats(question) -> tuple[list[int], PairwiseStats]:
    state = QualityState.objects.get(question=question)
    return state.annotator_ids, PairwiseStats.from_bytes(
        state.stats, n_annotators=len(state.annotator_ids)
    )


def _without_applied(stats: PairwiseStats) -> np.ndarray:
    """The per-annotator counts but the catch-up position (which counts undos too)."""
    return np.delete(stats.per_annotator, PAIRWISE_COLUMNS.index("applied"), axis=1)


def test_an_undone_judgement_leaves_the_live_quality_as_if_it_never_happened(
    pairwise, django_capture_on_commit_callbacks
):
    """Shared pairs and the annotator's own counts: an undo takes the answer out of both,
    whichever annotator's update comes first, and a rebuild agrees."""
    first, second = pairwise.annotators
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(3):
            answer(pairwise, first)
            answer(pairwise, second, -1)
    annotators, before = _live_stats(pairwise.question)
    assert before.pairs.confusion.sum() > 0
    with django_capture_on_commit_callbacks(execute=True):
        answer(pairwise, first, -1)
        answer(pairwise, second, -1)
    with django_capture_on_commit_callbacks(execute=True):
        judgement_retract(question=pairwise.question, annotator=first)
        judgement_retract(question=pairwise.question, annotator=second)
    assert quality_judgements_process(question_id=pairwise.question.pk) == 0
    assert judgements_waiting(pairwise.question.pk) == 0
    ids, live = _live_stats(pairwise.question)
    assert ids == annotators
    assert live.pairs.equals(before.pairs)
    assert np.array_equal(_without_applied(live), _without_applied(before))
    quality_judgements_rebuild(question_id=pairwise.question.pk)
    _, rebuilt = _live_stats(pairwise.question)
    assert rebuilt.pairs.equals(live.pairs)
    assert np.array_equal(rebuilt.per_annotator, live.per_annotator)


def test_the_sweep_catches_up_an_undo_left_waiting(
    settings, pairwise, django_capture_on_commit_callbacks
):
    settings.QUALITY_UPDATES = "inline"
    annotator, question = pairwise.annotators[0], pairwise.question
    with django_capture_on_commit_callbacks(execute=True):
        answer(pairwise, annotator)
        answer(pairwise, annotator)
    judgement_retract(question=question, annotator=annotator)  # its update never ran
    assert answers_waiting(question_id=question.pk, kind=question.kind) == 1
    with django_capture_on_commit_callbacks(execute=True):
        assert quality_sweep() == [question.pk]
    assert answers_waiting(question_id=question.pk, kind=question.kind) == 0
    assert quality_sweep() == []
    _, live = _live_stats(question)
    assert live.column("judgements").tolist() == [1]
