"""Adaptive overlap's measures (AAD-RMSE, Dawid-Skene posterior entropy, trace kappa_SDA
spread), validated per question kind, and the rule read with the question the submit loads."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from apps.adjudication.aggregation import posterior_entropy
from apps.adjudication.models import OverlapRule
from apps.adjudication.selectors import overlap_rule, question_aggregates
from apps.adjudication.services import overlap_rule_set
from apps.annotations.forms import queue_questions
from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
from apps.annotations.models import Assignment
from apps.annotations.services import annotations_submit
from apps.continuous.services import trace_finish
from apps.studies.models import Membership, Study
from apps.studies.services import membership_add
from tests.apps.annotations.test_views import HTMX, answer, queue_url
from tests.apps.continuous.conftest import AUDIO_SECONDS, make_trace_study
from tests.factories import UserFactory, running_study

pytestmark = pytest.mark.django_db
ENTROPY = OverlapRule.Measure.DS_ENTROPY
SPREAD = OverlapRule.Measure.KAPPA_SDA_SPREAD


def _answer(question, user, item, label: str) -> None:
    annotations_submit(
        annotator=user,
        assignment=Assignment.objects.get(item=item, annotator=user, round=1),
        answers={question: label},
        idempotency_key=uuid.uuid4(),
    )


def _categorical(measure: str, threshold: float):
    """Four annotators, two per item; the first 24 items answered in agreement (so Dawid-Skene
    finds them all competent), then the rule; items 24 and 25 are left to answer."""
    study, _ = running_study(n_items=26, n_annotators=4, overlap=2)
    question = study.questions.get()
    keys = ["negative", "positive"]
    records = [
        FinishedAnnotation(item.external_id, a.annotator.username, "sentiment", keys[n % 2])
        for n, item in enumerate(study.items.order_by("position")[:24])
        for a in Assignment.objects.filter(item=item).select_related("annotator")
    ]
    annotations_import_finished(study=study, records=records)
    overlap_rule_set(
        manager=study.created_by,
        question=question,
        base_k=2,
        k_max=3,
        threshold=threshold,
        measure=measure,
    )
    return study, question


def _pair(study, position: int):
    item = study.items.order_by("position")[position]
    users = [a.annotator for a in Assignment.objects.filter(item=item).order_by("annotator_id")]
    return item, users


def test_the_posterior_entropy_rule_extends_a_split_item_not_an_agreed_one():
    # Who shares which items follows the queue fill's seed (the study's id, so the tests run
    # before this one): the split item's entropy was 0.09-0.82 over such arrangements, the
    # agreed one's at most 0.0001 (a threshold of 0.1 failed on one of them).
    study, question = _categorical(ENTROPY, 0.02)
    agreed, (a, b) = _pair(study, 24)
    _answer(question, a, agreed, "positive")
    _answer(question, b, agreed, "positive")
    assert not Assignment.objects.filter(extra=True).exists()
    split, (c, d) = _pair(study, 25)
    _answer(question, c, split, "negative")
    _answer(question, d, split, "positive")
    found = question_aggregates(question=question)
    entropy = posterior_entropy(found.aggregates.posteriors)
    assert entropy[found.row(split.pk)] > 0.02 > entropy[found.row(agreed.pk)]
    assert list(Assignment.objects.filter(extra=True).values_list("item", flat=True)) == [split.pk]


def test_a_higher_entropy_threshold_leaves_the_same_split_alone():
    study, question = _categorical(ENTROPY, 1.5)  # log2(3) = 1.58: only a three-way tie
    split, (c, d) = _pair(study, 25)
    _answer(question, c, split, "negative")
    _answer(question, d, split, "positive")
    assert not Assignment.objects.filter(extra=True).exists()


@pytest.mark.parametrize(
    ("measure", "threshold", "field"),
    [
        (SPREAD, 0.5, "measure"),  # a trace measure on a categorical question
        (ENTROPY, 1.6, "threshold"),  # above log2(3): never reached
        ("variance", 0.5, "measure"),
    ],
)
def test_a_categorical_rule_is_validated(measure, threshold, field):
    study, _ = running_study(n_items=2, n_annotators=3)
    with pytest.raises(ValidationError) as caught:
        overlap_rule_set(
            manager=study.created_by,
            question=study.questions.get(),
            base_k=2,
            k_max=3,
            threshold=threshold,
            measure=measure,
        )
    assert field in caught.value.message_dict
    assert not OverlapRule.objects.exists()


def test_the_page_offers_the_kinds_measures_and_refuses_others(client):
    study, _ = running_study(n_items=2, n_annotators=3)
    client.force_login(study.created_by)
    page = client.get(reverse("adjudication:page", args=[study.pk, "sentiment"])).content.decode()
    assert 'value="ds_entropy"' in page
    assert 'value="kappa_sda_spread"' not in page
    url = reverse("adjudication:overlap", args=[study.pk, "sentiment"])
    data = {"base_k": "2", "k_max": "3", "threshold": "0.5", "measure": "kappa_sda_spread"}
    response = client.post(url, data, follow=True)
    assert "measure" in response.content.decode()
    assert not OverlapRule.objects.exists()
    client.post(url, {**data, "measure": "ds_entropy"})
    assert OverlapRule.objects.get().measure == ENTROPY


# ---------- Traces ----------


def _trace(ts, annotator, item, values) -> None:
    """Record ``values`` over the whole audio item at 10 Hz and finish the recording."""
    rec = uuid.uuid4()
    times = np.round(np.arange(0, AUDIO_SECONDS + 0.05, 0.1), 6)
    levels = np.interp(times, np.linspace(0, AUDIO_SECONDS, len(values)), values)
    for sequence, start in enumerate(range(0, times.size, 50)):
        ts.send(
            annotator, item, rec, sequence, times[start : start + 50], levels[start : start + 50]
        )
    trace_finish(annotator=annotator, recording_uuid=rec)


@pytest.fixture
def traced():
    """Two annotators trace every item (overlap 2); a third joins with nothing assigned."""
    ts = make_trace_study(n_annotators=2)
    Study.objects.filter(pk=ts.study.pk).update(overlap=2)
    ts.study.refresh_from_db()
    third = UserFactory()
    membership_add(study=ts.study, user=third, role=Membership.Role.ANNOTATOR)
    overlap_rule_set(
        manager=ts.study.created_by,
        question=ts.question,
        base_k=2,
        k_max=3,
        threshold=1.0,
        measure=SPREAD,
    )
    return ts, third


RISE_FALL = [0.1, 0.4, 0.8, 0.5, 0.2, 0.6, 0.9, 0.3]


def test_traces_that_move_opposite_ways_reach_a_third_annotator(traced):
    ts, third = traced
    first, second = ts.annotators
    _trace(ts, first, ts.audio_item, RISE_FALL)
    assert not Assignment.objects.filter(extra=True).exists()
    _trace(ts, second, ts.audio_item, [1 - v for v in RISE_FALL])
    extra = Assignment.objects.get(extra=True)
    assert (extra.item, extra.annotator) == (ts.audio_item, third)


def test_traces_that_move_together_keep_their_k(traced):
    ts, _ = traced
    first, second = ts.annotators
    _trace(ts, first, ts.audio_item, RISE_FALL)
    _trace(ts, second, ts.audio_item, [v * 0.8 + 0.1 for v in RISE_FALL])
    assert not Assignment.objects.filter(extra=True).exists()


def test_a_trace_rule_measures_the_kappa_sda_spread_only(traced):
    ts, _ = traced
    for measure, threshold in ((OverlapRule.Measure.AAD_RMSE, 0.5), (SPREAD, 2.0)):
        with pytest.raises(ValidationError):
            overlap_rule_set(
                manager=ts.study.created_by,
                question=ts.question,
                base_k=2,
                k_max=3,
                threshold=threshold,
                measure=measure,
            )
    assert OverlapRule.objects.get().measure == SPREAD


# ---------- The rule is read with the question ----------


@pytest.mark.parametrize("with_rule", [False, True])
def test_the_queue_questions_carry_their_rule(django_assert_num_queries, with_rule):
    study, _ = running_study(n_items=2, n_annotators=2)
    if with_rule:
        overlap_rule_set(
            manager=study.created_by, question=study.questions.get(), base_k=2, k_max=3, threshold=1
        )
    (entry,) = queue_questions(study=study)
    with django_assert_num_queries(0):
        rule = overlap_rule(question=entry.question)
    assert (rule is not None) == with_rule


def test_a_categorical_submit_does_not_look_the_rule_up(client):
    """The queue's POST reads the rule with the questions it loads: no query of its own."""
    study, (annotator, *_) = running_study(n_items=3, n_annotators=2)
    client.force_login(annotator)
    data = answer(client, study, "positive")
    with CaptureQueriesContext(connection) as queries:
        assert client.post(queue_url(study), data, **HTMX).status_code == 200
    assert Assignment.objects.filter(completed_at__isnull=False).count() == 1
    rule_reads = [q["sql"] for q in queries.captured_queries if "overlaprule" in q["sql"]]
    # at most the join of the questions' load (none when the study's questions are cached
    # from the page's GET), never a lookup per submit
    assert len(rule_reads) <= 1
    assert all("JOIN" in sql for sql in rule_reads)


def test_an_api_submit_does_not_look_the_rule_up():
    _, (annotator, *_) = running_study(n_items=3, n_annotators=2)
    client = APIClient()
    client.force_authenticate(annotator)
    assignment = Assignment.objects.filter(annotator=annotator).order_by("position").first()
    body = {
        "assignment": assignment.pk,
        "answers": {"sentiment": "positive"},
        "idempotency_key": str(uuid.uuid4()),
    }
    with CaptureQueriesContext(connection) as queries:
        assert client.post("/api/annotations/", body, format="json").status_code == 201
    rule_reads = [q["sql"] for q in queries.captured_queries if "overlaprule" in q["sql"]]
    assert len(rule_reads) == 1
    assert "JOIN" in rule_reads[0]


def test_the_traces_page_sets_a_kappa_sda_spread_rule(client):
    ts = make_trace_study(n_annotators=2)
    client.force_login(ts.study.created_by)
    page_url = reverse("continuous:traces", args=[ts.study.pk, "arousal"])
    page = client.get(page_url).content.decode()
    assert 'value="kappa_sda_spread"' in page
    assert 'value="aad_rmse"' not in page
    url = reverse("adjudication:overlap", args=[ts.study.pk, "arousal"])
    data = {"base_k": "2", "k_max": "3", "threshold": "0.8", "measure": "kappa_sda_spread"}
    response = client.post(url, data)
    assert response.url == page_url
    rule = OverlapRule.objects.get(question=ts.question)
    assert (rule.measure, rule.threshold) == (SPREAD, 0.8)
    assert "spread above 0.8" in client.get(page_url).content.decode()
    client.post(url, {**data, "threshold": "2.5"})  # never reached: refused, rule unchanged
    assert OverlapRule.objects.get(question=ts.question).threshold == 0.8
