"""What happens below the transitivity floor is said the same way on every page (issue 24).

Of one random annotator, the question editor said "is asked every pair", the annotator's page
"Thank you, your ranking is complete!" after 31 judgements, and the results page "confidently
below the floor" beside a dashboard interval reaching above it.
"""

from __future__ import annotations

import random

from django.urls import reverse
from django.utils.html import escape

from apps.preferences.models import PairSession
from apps.preferences.scheduling import floor_rule
from tests.apps.preferences.conftest import answer_all, make_pairwise_study


def test_every_page_states_the_floor_rule_and_the_stopped_annotator_is_told_so(
    client, db, pinned_pair_seed
):
    setup = make_pairwise_study(n_items=40, n_annotators=1)
    (annotator,) = setup.annotators
    rng = random.Random(3)
    answer_all(setup.question, annotator, lambda a, b: rng.choice((1, 0, -1)))
    assert PairSession.objects.get(annotator=annotator).pruning_stopped_at is not None
    rule = escape(floor_rule())
    assert "asked no more pairs" in floor_rule()
    study, key = setup.question.study, setup.question.key
    client.force_login(study.created_by)
    editor = client.get(reverse("studies:question_edit", args=[study.pk, setup.question.pk]))
    assert rule in editor.content.decode()
    results = client.get(reverse("preferences:results", args=[study.pk, key])).content.decode()
    assert rule in results
    assert "99.5 % confidence" in results  # which bound stopped them, not "confidently"
    assert "every pair" not in results.split("Unreliable answers")[1].split("</ul>")[0]
    client.force_login(annotator)
    page = client.get(reverse("preferences:compare", args=[study.pk, key])).content.decode()
    assert "that is all we need from you" in page
    assert "ranking is complete" not in page
