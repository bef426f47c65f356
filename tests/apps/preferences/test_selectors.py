"""The manager's figures of each annotator's scheduler come from ``PairSession.figures``,
stored with every answer: the results page and the pooled ranking replay no scheduler."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.preferences import selectors
from apps.preferences.models import PairSession
from apps.preferences.scheduling import PairScheduler
from apps.preferences.selectors import annotator_reports, question_scores, replays
from apps.preferences.services import judgement_retract
from tests.apps.preferences.conftest import answer_all, by_level, cycle_maker, make_pairwise_study


@pytest.fixture
def answered(db, pinned_pair_seed):
    """Seven items with calibration: a careless annotator (flagged, failed checks), a careful
    one, and one part of the way (pairs left)."""
    setup = make_pairwise_study(
        n_items=7, n_annotators=3, settings={"calibration_triplets": 5, "audit_rate": 0.3}
    )
    careless, careful, partial = setup.annotators
    levels = {item.pk: k for k, item in enumerate(setup.items)}
    answer_all(setup.question, careless, cycle_maker())
    answer_all(setup.question, careful, by_level(levels))
    with pytest.raises(AssertionError, match="not done"):
        answer_all(setup.question, partial, by_level(levels), limit=4)
    return setup


def _figures(question) -> tuple[list[tuple], list[float]]:
    reports = annotator_reports(question=question)
    rows = [(r.username, r.asked, r.remaining, r.flagged, r.error_rate) for r in reports]
    return rows, question_scores(question=question).weights


def _replayed(question) -> tuple[list[tuple], list[float]]:
    """:func:`_figures` with no figures stored (then stored again as they were)."""
    sessions = list(PairSession.objects.filter(question=question))
    PairSession.objects.filter(question=question).update(figures=None)
    replays.clear()
    try:
        return _figures(question)
    finally:
        PairSession.objects.bulk_update(sessions, ["figures"])


def _no_replay(monkeypatch) -> None:
    replays.clear()  # a restarted process

    def refuse(*args, **kwargs):
        raise RuntimeError("a manager's page replayed a scheduler")

    monkeypatch.setattr(PairScheduler, "from_judgements", refuse)


def test_the_stored_figures_are_the_replayed_ones(answered, monkeypatch):
    with monkeypatch.context() as patched:
        _no_replay(patched)
        stored = _figures(answered.question)
    assert stored == _replayed(answered.question)
    rows, weights = stored
    assert any(flagged for *_, flagged, _ in rows)  # the careless annotator
    assert any(remaining > 0 for _, _, remaining, _, _ in rows)  # the partial one
    assert len(set(weights)) > 1


def test_the_results_page_replays_no_scheduler(answered, client, monkeypatch):
    client.force_login(answered.manager)

    url = reverse("preferences:results", args=[answered.study.pk, answered.question.key])
    _no_replay(monkeypatch)
    response = client.get(url)
    assert response.status_code == 200
    assert 'data-testid="kappa-warning"' in response.content.decode()


def test_an_undo_drops_the_figures_and_the_next_answer_stores_them(answered, monkeypatch):
    careful = answered.annotators[1]
    judgement_retract(question=answered.question, annotator=careful)
    session = PairSession.objects.get(question=answered.question, annotator=careful)
    assert session.figures is None
    replayed = _figures(answered.question)  # the undone annotator's scheduler is replayed
    assert replayed == _replayed(answered.question)
    levels = {item.pk: k for k, item in enumerate(answered.items)}
    answer_all(answered.question, careful, by_level(levels))
    session.refresh_from_db()
    assert session.figures is not None
    with monkeypatch.context() as patched:
        _no_replay(patched)
        stored = _figures(answered.question)
    assert stored == _replayed(answered.question)


def test_figures_of_another_history_are_not_used(answered):
    # figures that name another history (a judgement stored or undone since) are replayed
    session = PairSession.objects.get(question=answered.question, annotator=answered.annotators[2])
    true = selectors.SchedulerFigures(**session.figures)
    session.figures = true._replace(last_id=true.last_id + 1000, remaining=999)._asdict()
    session.save(update_fields=["figures"])
    rows, _ = _figures(answered.question)
    assert 999 not in [remaining for _, _, remaining, _, _ in rows]
    assert true.remaining in [remaining for _, _, remaining, _, _ in rows]
