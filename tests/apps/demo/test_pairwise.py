"""The pairwise demo builds a running study with judgements, and only once."""

from __future__ import annotations

from apps.demo.pairwise import PAIRWISE_NAME, load_pairwise_demo
from apps.preferences.models import Judgement, PairSession
from apps.studies.models import Study
from tests.factories import UserFactory


def test_demo_is_built_once(db):
    manager = UserFactory(manager=True)
    annotators = [UserFactory() for _ in range(3)]
    summary = load_pairwise_demo(manager=manager, annotators=annotators)
    study = Study.objects.get(name=PAIRWISE_NAME)
    assert study.is_running
    assert f"study {study.pk}" in summary
    careful = PairSession.objects.get(annotator=annotators[0])
    assert careful.completed_at is not None
    assert careful.pruning_stopped_at is None
    assert PairSession.objects.get(annotator=annotators[1]).completed_at is not None
    assert not PairSession.objects.filter(annotator=annotators[2]).exists()
    count = Judgement.objects.count()
    assert "already there" in load_pairwise_demo(manager=manager, annotators=annotators)
    assert Judgement.objects.count() == count


def _judgements(study: Study) -> list[tuple[int, str, str, int]]:
    """The study's judgements in order, by annotator position and item external id."""
    rows = Judgement.objects.filter(question__study=study).order_by("pk")
    order = {}
    return [
        (
            order.setdefault(j.annotator_id, len(order)),
            j.item_a.external_id,
            j.item_b.external_id,
            j.outcome,
        )
        for j in rows.select_related("item_a", "item_b")
    ]


def test_demo_is_the_same_on_every_database(db):
    """Two builds with other ids (another manager's copy) judge the same pairs the same way:
    the sessions' seeds and the simulated answers do not depend on ids or on chance."""
    first, second = UserFactory(manager=True), UserFactory(manager=True)
    load_pairwise_demo(manager=first, annotators=[UserFactory(), UserFactory()])
    UserFactory.create_batch(3)  # other ids for the second copy's accounts
    load_pairwise_demo(manager=second, annotators=[UserFactory(), UserFactory()])
    one, two = (Study.objects.get(name=PAIRWISE_NAME, created_by=m) for m in (first, second))
    assert _judgements(one) == _judgements(two)
    assert len(_judgements(one)) > 20
