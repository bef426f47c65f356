"""The item page shows every kind's answers: pairwise judgements, traces, the green stimulus."""

from __future__ import annotations

import numpy as np
from django.urls import reverse

from apps.preferences.models import Judgement
from apps.preferences.services import judgement_retract
from tests.apps.continuous.conftest import make_trace_study
from tests.apps.preferences.conftest import answer_all, by_level, make_pairwise_study


def test_a_pairwise_item_lists_the_judgements_it_was_in(db, client, django_assert_max_num_queries):
    ps = make_pairwise_study(settings={"calibration_triplets": 0, "audit_rate": 0.0})
    levels = {item.pk: i for i, item in enumerate(ps.items)}
    for annotator in ps.annotators:
        answer_all(ps.question, annotator, by_level(levels))
    judgement_retract(question=ps.question, annotator=ps.annotators[0])
    item = Judgement.objects.get(retraction__isnull=False).item_a
    shown = Judgement.objects.filter(item_a=item) | Judgement.objects.filter(item_b=item)
    assert shown.count() >= 3
    client.force_login(ps.manager)
    with django_assert_max_num_queries(14):
        page = client.get(reverse("items:detail", args=[ps.study.pk, item.pk]))
    html = page.content.decode()
    assert "No answers yet" not in html
    assert html.count("<tr") - 1 == shown.count()  # one row per judgement, and the header
    assert "(retracted)" in html
    kept = shown.filter(retraction__isnull=True)
    won = sum((j.outcome == 1) == (j.item_a_id == item.pk) for j in kept if j.outcome != 0)
    assert f"preferred {won}," in html
    for judgement in shown:
        other = judgement.item_b if judgement.item_a == item else judgement.item_a
        assert reverse("items:detail", args=[ps.study.pk, other.pk]) in html


def test_a_gold_item_shows_the_green_stimulus_and_every_trace_as_a_small_plot(db, client):
    ts = make_trace_study(settings={"allow_redo": True})  # one annotator traces twice
    ts.gold_item.text = "Calibration: a slow wave"
    ts.gold_item.save()
    first, second = ts.annotators
    ts.trace_gold(first, lambda t: np.full(t.size, 0.2))
    # redone: the first trace stays, no longer counting
    ts.trace_gold(first, lambda t: np.full(t.size, 0.8))
    ts.trace_gold(second, lambda t: np.full(t.size, 0.5))
    client.force_login(ts.study.created_by)
    html = client.get(reverse("items:detail", args=[ts.study.pk, ts.gold_item.pk])).content
    html = html.decode()
    assert html.count('class="item-traces__line"') == 3
    assert html.count("· <strong>counts</strong>") == 2
    assert html.count("does not count") == 1
    assert html.count('class="item-traces__truth"') == 3
    # The stimulus as annotators see it: green shades, the caption only as a manager's note.
    assert 'class="green-stimulus__strip"' in html
    shades = {int(s.split(",")[1]) for s in html.split('fill="rgb(')[1:]}
    assert len(shades) > 10
    assert max(shades) > 200
    assert min(shades) < 60
    assert "hidden from annotators" in html
    assert 'class="item__text"' not in html
