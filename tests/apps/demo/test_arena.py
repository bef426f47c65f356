"""The arena demo builds a running study with votes, only once, quickly."""

from __future__ import annotations

import time

from apps.arena.selectors import arena_results, question_votes
from apps.demo.arena import ARENA_NAME, STRENGTH, load_arena_demo
from apps.studies.models import Study
from tests.factories import UserFactory


def test_demo_is_built_once_and_ranks_the_models(db):
    manager = UserFactory(manager=True)
    annotators = [UserFactory() for _ in range(3)]
    started = time.perf_counter()
    summary = load_arena_demo(manager=manager, annotators=annotators)
    seconds = time.perf_counter() - started
    study = Study.objects.get(name=ARENA_NAME)
    assert study.is_running
    assert f"study {study.pk}" in summary
    question = study.questions.get()
    votes = question_votes(question=question)
    by_annotator = {annotator.pk: 0 for annotator in annotators}
    for vote in votes:
        by_annotator[vote.annotator] += 1
    # the careful and the noisy annotator judged every pair of every prompt; the third none
    assert list(by_annotator.values()) == [18, 18, 0]
    best = max(STRENGTH, key=STRENGTH.get)
    assert arena_results(question=question, n_boot=0).rows[0].model == best
    assert "already there" in load_arena_demo(manager=manager, annotators=annotators)
    assert len(question_votes(question=question)) == len(votes)
    print(f"arena demo built in {seconds:.2f} s")
