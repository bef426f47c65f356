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
