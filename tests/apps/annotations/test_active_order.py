"""The queue's active order (issue 28): entropy or predicted disagreement first, a randomised
share in natural order, clean fall-backs, and every guarantee of the queue kept."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from knox.models import AuthToken
from scipy.stats import entropy as scipy_entropy

from apps.adjudication.models import DisagreementForecast, PredictedDisagreement
from apps.annotations.models import Assignment, QueueOrder
from apps.annotations.ordering import natural_share_drawn, queue_order_apply
from apps.annotations.selectors import assignment_next, queue_next
from apps.annotations.services import assignment_skip
from apps.models_registry.models import ItemPrediction, ModelRun
from apps.models_registry.services import model_run_delete
from apps.studies.services import question_update
from tests.factories import SENTIMENT_LABELS, categorical_question, running_study
from tests.query_plans import sorted_reads

pytestmark = pytest.mark.django_db
KEYS = ["negative", "neutral", "positive"]


@pytest.fixture
def setup():
    """A running 40-item study, two annotators with every item, and a run of its question
    with Dirichlet label probabilities for every item."""
    study, annotators = running_study(n_items=40, n_annotators=2)
    question = study.questions.get()
    run = ModelRun.objects.create(
        study=study, question=question, name="clf", version="1", created_by=study.created_by
    )
    labels = {label.key: label for label in question.labels.all()}
    rng = np.random.default_rng(11)
    probabilities = {}
    for item in study.items.order_by("position", "id"):
        p = rng.dirichlet([0.5, 0.5, 0.5])
        probabilities[item.pk] = p
        ItemPrediction.objects.create(
            run=run,
            item=item,
            label=labels[KEYS[int(np.argmax(p))]],
            probabilities=dict(zip(KEYS, p.tolist(), strict=True)),
        )
    return study, question, annotators, run, probabilities


def _order(question, capture, **settings):
    with capture(execute=True):
        question_update(question=question, settings=settings)
    question.refresh_from_db()


def _served(study, annotator) -> list[int]:
    """The items the queue serves the annotator, one after the other, answering each."""
    served = []
    while (entry := queue_next(annotator=annotator, study=study)) is not None:
        assignment = entry["assignment"]
        served.append(assignment.item_id)
        Assignment.objects.filter(pk=assignment.pk).update(completed_at=timezone.now())
    return served


def _expected(study, question, score: dict[int, float], share: float = 0.2) -> list[int]:
    """The order an oracle derives: items in natural order; the randomised share keeps its
    places, the others fill the remaining places by score, highest first."""
    natural = list(study.items.order_by("position", "id").values_list("id", flat=True))
    kept = {
        i
        for i in natural
        if natural_share_drawn(question_id=question.pk, item_id=i, share=share) or i not in score
    }
    ranked = iter(sorted((i for i in natural if i not in kept), key=lambda i: -score[i]))
    return [i if i in kept else next(ranked) for i in natural]


def test_the_queue_serves_the_highest_entropy_first_except_the_natural_share(
    setup, django_capture_on_commit_callbacks
):
    study, question, (first, second), run, probabilities = setup
    _order(
        question,
        django_capture_on_commit_callbacks,
        queue_order="uncertainty",
        queue_order_run=run.pk,
    )
    entropy = {item: float(scipy_entropy(p)) for item, p in probabilities.items()}
    expected = _expected(study, question, entropy)
    kept = [
        i for i in expected if natural_share_drawn(question_id=question.pk, item_id=i, share=0.2)
    ]
    assert 0 < len(kept) < 20  # the share is drawn, not empty, not everything
    assert _served(study, first) == expected
    assert _served(study, second) == expected  # per item: the same for every annotator
    natural = list(study.items.order_by("position", "id").values_list("id", flat=True))
    assert expected != natural
    ordered = [i for i in expected if i not in kept]
    assert [entropy[i] for i in ordered] == sorted((entropy[i] for i in ordered), reverse=True)
    state = QueueOrder.objects.get(study=study)
    assert (state.mode, state.asked, state.fallback) == ("uncertainty", "uncertainty", "")
    assert (state.n_ordered, state.n_natural) == (40 - len(kept), len(kept))


def test_a_larger_natural_share_keeps_more_items_in_place(
    setup, django_capture_on_commit_callbacks
):
    study, question, (annotator, _), run, probabilities = setup
    _order(
        question,
        django_capture_on_commit_callbacks,
        queue_order="uncertainty",
        queue_order_run=run.pk,
        queue_order_natural_share=0.9,
    )
    entropy = {item: float(scipy_entropy(p)) for item, p in probabilities.items()}
    assert _served(study, annotator) == _expected(study, question, entropy, share=0.9)
    assert QueueOrder.objects.get(study=study).n_natural > 25


def test_predicted_disagreement_order(setup, django_capture_on_commit_callbacks):
    study, question, (annotator, _), _, _ = setup
    forecast = DisagreementForecast.objects.create(
        question=question, n_train=30, folds=5, cv_mse=0.1, cv_accuracy=0.5,
        baseline_mse=0.2, baseline_accuracy=0.4, fingerprint="x",
    )  # fmt: skip
    rng = np.random.default_rng(3)
    items = list(study.items.order_by("position", "id").values_list("id", flat=True))
    predicted = {i: float(v) for i, v in zip(items[:30], rng.random(30), strict=True)}
    PredictedDisagreement.objects.bulk_create(
        PredictedDisagreement(forecast=forecast, item_id=i, value=v) for i, v in predicted.items()
    )
    _order(question, django_capture_on_commit_callbacks, queue_order="disagreement")
    assert _served(study, annotator) == _expected(study, question, predicted)
    state = QueueOrder.objects.get(study=study)
    assert state.mode == "disagreement"
    assert state.n_unscored == 10  # no forecast for them: natural places


def test_without_probabilities_the_queue_falls_back_to_natural_order(
    setup, django_capture_on_commit_callbacks
):
    study, question, (annotator, _), run, _ = setup
    ItemPrediction.objects.update(probabilities=None)
    _order(
        question,
        django_capture_on_commit_callbacks,
        queue_order="uncertainty",
        queue_order_run=run.pk,
    )
    state = QueueOrder.objects.get(study=study)
    assert (state.asked, state.mode) == ("uncertainty", "natural")
    assert state.fallback == "model run clf 1 has no label probabilities yet"
    natural = list(study.items.order_by("position", "id").values_list("id", flat=True))
    assert _served(study, annotator) == natural


def test_without_a_forecast_the_disagreement_order_falls_back(
    setup, django_capture_on_commit_callbacks
):
    study, question, (_annotator, _), _, _ = setup
    _order(question, django_capture_on_commit_callbacks, queue_order="disagreement")
    state = QueueOrder.objects.get(study=study)
    assert state.mode == "natural"
    assert state.fallback.startswith("no disagreement forecast yet")


def test_deleting_the_run_or_the_setting_restores_the_natural_order(
    setup, django_capture_on_commit_callbacks
):
    study, question, (_annotator, _other), run, _ = setup
    natural = dict(Assignment.objects.values_list("pk", "position"))
    _order(
        question,
        django_capture_on_commit_callbacks,
        queue_order="uncertainty",
        queue_order_run=run.pk,
    )
    assert Assignment.objects.filter(natural_position__isnull=False).exists()
    with django_capture_on_commit_callbacks(execute=True):
        model_run_delete(run=run)
    assert dict(Assignment.objects.values_list("pk", "position")) == natural
    assert not Assignment.objects.filter(natural_position__isnull=False).exists()
    state = QueueOrder.objects.get(study=study)
    assert state.mode == "natural"
    assert "no longer exists" in state.fallback
    _order(question, django_capture_on_commit_callbacks)  # the setting removed
    assert QueueOrder.objects.get(study=study).asked == "natural"


def test_skipped_items_stay_last_and_repeats_and_packages_keep_their_places(
    setup, django_capture_on_commit_callbacks
):
    study, question, (annotator, _), run, probabilities = setup
    # the repeat of an ordered item the order moves late (the lowest entropy), queued 5 places
    # after its test
    calm = min(
        (
            i
            for i in probabilities
            if not natural_share_drawn(question_id=question.pk, item_id=i, share=0.2)
        ),
        key=lambda i: scipy_entropy(probabilities[i]),
    )
    repeat = Assignment.objects.get(annotator=annotator, item_id=calm)
    Assignment.objects.create(
        study=study, item=repeat.item, annotator=annotator, round=2, position=repeat.position + 5
    )
    from tests.factories import UserFactory

    ordered = sorted(  # the ordered items, the highest entropy first
        (
            i
            for i in probabilities
            if not natural_share_drawn(question_id=question.pk, item_id=i, share=0.2)
        ),
        key=lambda i: -scipy_entropy(probabilities[i]),
    )
    helper = UserFactory()  # ten items of their own, and the most uncertain one as an extra
    for n, item_id in enumerate(ordered[1:11]):
        Assignment.objects.create(study=study, item_id=item_id, annotator=helper, position=n)
    extra_of = study.items.get(pk=ordered[0])
    extra = Assignment.objects.create(
        study=study, item=extra_of, annotator=helper, position=extra_of.position + 10, extra=True
    )
    _order(
        question,
        django_capture_on_commit_callbacks,
        queue_order="uncertainty",
        queue_order_run=run.pk,
    )
    extra.refresh_from_db()
    assert (extra.position, extra.natural_position) == (extra_of.position + 10, None)
    retest = Assignment.objects.get(round=2)
    test = Assignment.objects.get(round=1, annotator=annotator, item=repeat.item)
    assert retest.position - test.position == 5  # moved with its test, the gap kept
    first = assignment_next(annotator=annotator, study=study)
    assignment_skip(annotator=annotator, assignment=first)
    served = _served(study, annotator)
    assert served[-1] == first.item_id  # skipped: behind every unskipped item
    assert served.count(repeat.item_id) == 2
    test.refresh_from_db()
    retest.refresh_from_db()
    assert test.completed_at < retest.completed_at  # the retest comes after its test


def test_recruited_packages_are_not_reordered(setup, django_capture_on_commit_callbacks):
    from apps.recruitment.models import Participant
    from tests.factories import UserFactory

    study, question, _, run, _ = setup
    worker = UserFactory()
    from apps.studies.models import Membership
    from apps.studies.services import membership_add

    Participant.objects.create(study=study, user=worker, platform="prolific", platform_id="p1")
    membership_add(study=study, user=worker, role=Membership.Role.ANNOTATOR)
    assert not Assignment.objects.filter(annotator=worker).exists()  # packages, not a fill
    package = [
        Assignment.objects.create(study=study, item_id=i, annotator=worker, position=n)
        for n, i in enumerate(study.items.order_by("-position").values_list("id", flat=True)[:10])
    ]
    _order(
        question,
        django_capture_on_commit_callbacks,
        queue_order="uncertainty",
        queue_order_run=run.pk,
    )
    assert [a.position for a in package] == list(
        Assignment.objects.filter(annotator=worker)
        .order_by("id")
        .values_list("position", flat=True)
    )


def test_the_next_item_is_still_one_indexed_read(setup, django_capture_on_commit_callbacks):
    study, question, (annotator, _), run, _ = setup
    _order(
        question,
        django_capture_on_commit_callbacks,
        queue_order="uncertainty",
        queue_order_run=run.pk,
    )
    with CaptureQueriesContext(connection) as queries:
        assignment_next(annotator=annotator, study=study, questions=[question])
    assert len(queries) == 1
    assert sorted_reads(queries.captured_queries) == []


def test_new_assignments_are_placed_after_the_commit(setup, django_capture_on_commit_callbacks):
    """A fill's new assignments stand at their natural places until the order is applied
    again (after the fill's commit), then join the order."""
    from apps.annotations.services import assignments_fill
    from tests.factories import ItemFactory

    study, question, (annotator, _), run, _ = setup
    _order(
        question,
        django_capture_on_commit_callbacks,
        queue_order="uncertainty",
        queue_order_run=run.pk,
    )
    item = ItemFactory(study=study)
    ItemPrediction.objects.create(
        run=run,
        item=item,
        label=question.labels.get(key="neutral"),
        probabilities={"negative": 1 / 3, "neutral": 1 / 3, "positive": 1 / 3},  # the most
    )
    with django_capture_on_commit_callbacks(execute=True):
        assignments_fill(study=study)
    assert QueueOrder.objects.get(study=study).requested_at is None

    def kept(i: int) -> bool:
        return natural_share_drawn(question_id=question.pk, item_id=i, share=0.2)

    # the most uncertain item takes the first place not kept by the natural share (the first
    # places may be kept: the draw depends on the ids, so on the test order)
    ordered = [i for i in _served(study, annotator) if not kept(i)]
    assert item.pk in ordered or kept(item.pk)
    if not kept(item.pk):
        assert ordered[0] == item.pk


@pytest.mark.parametrize(
    ("given", "field", "message"),
    [
        ({"queue_order": "loud"}, "queue_order", "'loud' is not a queue order"),
        ({"queue_order": "uncertainty"}, "queue_order_run", "needs the id of a model run"),
        (
            {"queue_order": "disagreement", "queue_order_run": 3},
            "queue_order_run",
            "Only the uncertainty order reads a model run",
        ),
        (
            {"queue_order": "disagreement", "queue_order_natural_share": 0.0},
            "queue_order_natural_share",
            "between 0.05 and 0.95",
        ),
        (
            {"queue_order": "disagreement", "queue_order_natural_share": "half"},
            "queue_order_natural_share",
            "is a number",
        ),
        ({"queue_order_natural_share": 0.5}, "queue_order_natural_share", "Only an active"),
        (
            {"queue_order": "uncertainty", "queue_order_run": 999999},
            "queue_order_run",
            "not registered for this question",
        ),
    ],
)
def test_settings_are_validated_with_field_messages(setup, given, field, message):
    _, question, _, _, _ = setup
    with pytest.raises(ValidationError) as caught:
        question_update(question=question, settings=given)
    assert message in " ".join(caught.value.message_dict[field])


def test_one_question_orders_the_queue(setup, django_capture_on_commit_callbacks):
    study, question, _, run, _ = setup
    _order(
        question,
        django_capture_on_commit_callbacks,
        queue_order="uncertainty",
        queue_order_run=run.pk,
    )
    other = categorical_question(study, key="topic")
    with pytest.raises(ValidationError) as caught:
        question_update(question=other, settings={"queue_order": "disagreement"})
    assert caught.value.message_dict["queue_order"] == [
        "Question 'sentiment' already orders this study's queue."
    ]


def _token_client(api_client, user):
    _, token = AuthToken.objects.create(user=user)
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return api_client


def test_the_api_sets_the_order_and_answers_400_with_field_messages(
    setup, api_client, django_capture_on_commit_callbacks
):
    study, question, (annotator, _), run, _ = setup
    url = f"/api/studies/{study.pk}/questions/{question.pk}/"
    client = _token_client(api_client, study.created_by)
    bad = {"settings": {"queue_order": "uncertainty", "queue_order_natural_share": 2}}
    response = client.patch(url, bad, format="json")
    assert response.status_code == 400
    body = response.json()
    assert "queue_order_run" in str(body)
    assert "queue_order_natural_share" in str(body)
    good = {"settings": {"queue_order": "uncertainty", "queue_order_run": run.pk}}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.patch(url, good, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["settings"]["queue_order_natural_share"] == 0.2
    assert QueueOrder.objects.get(study=study).mode == "uncertainty"
    annotator_api = _token_client(type(api_client)(), annotator)
    assert annotator_api.patch(url, good, format="json").status_code == 403


def test_the_manager_sees_the_order_in_force_and_annotators_do_not(
    setup, client, django_capture_on_commit_callbacks
):
    study, question, (annotator, _), run, _ = setup
    ItemPrediction.objects.update(probabilities=None)
    _order(
        question,
        django_capture_on_commit_callbacks,
        queue_order="uncertainty",
        queue_order_run=run.pk,
    )
    url = f"/studies/{study.pk}/quality/?question={question.pk}"
    client.force_login(study.created_by)
    page = client.get(url).content.decode()
    assert "In force: Natural order" in page
    assert "falls back to its natural order: model run clf 1 has no label probabilities" in page
    ItemPrediction.objects.update(probabilities={"negative": 0.5, "neutral": 0.5, "positive": 0})
    queue_order_apply(study_id=study.pk)
    page = client.get(url).content.decode()
    assert "In force: Model uncertainty (entropy), highest first" in page
    assert "kept in natural order, drawn at random" in page
    client.force_login(annotator)
    assert client.get(url).status_code in (403, 404)


def test_the_question_editor_sets_the_order_and_names_problems_at_their_fields(
    setup, client, django_capture_on_commit_callbacks
):
    from tests.apps.studies.test_question_editor import field_errors, page, posted

    study, question, _, run, _ = setup
    client.force_login(study.created_by)
    editor = client.get(page(study, question)).content.decode()
    assert 'name="settings-queue_order"' in editor
    assert "Share kept in natural order" in editor
    rows = [
        {name: str(label[name]) for name in ("key", "name", "shortcut", "valence", "arousal")}
        for label in SENTIMENT_LABELS
    ]  # the scale as it is (a label removed would take its predictions with it)
    base = posted(key="sentiment", rows=rows) | {"settings-queue_order_natural_share": "0.2"}
    bad = base | {"settings-queue_order": "uncertainty", "settings-queue_order_natural_share": "2"}
    response = client.post(page(study, question), bad)
    assert response.status_code == 422
    assert "0.95" in field_errors(response, "settings-queue_order_natural_share")
    response = client.post(page(study, question), base | {"settings-queue_order": "uncertainty"})
    assert response.status_code == 422
    assert "needs the id of a model run" in field_errors(response, "settings-queue_order_run")
    good = base | {"settings-queue_order": "uncertainty", "settings-queue_order_run": str(run.pk)}
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(page(study, question), good).status_code == 302
    question.refresh_from_db()
    assert question.settings == {
        "queue_order": "uncertainty",
        "queue_order_run": run.pk,
        "queue_order_natural_share": 0.2,
    }
    assert QueueOrder.objects.get(study=study).mode == "uncertainty"
    with django_capture_on_commit_callbacks(execute=True):  # back to natural: the default share
        assert client.post(page(study, question), base).status_code == 302
    question.refresh_from_db()
    assert question.settings == {}
    assert QueueOrder.objects.get(study=study).mode == "natural"
    assert not Assignment.objects.filter(natural_position__isnull=False).exists()


def test_inputs_ask_again_only_for_the_order_they_feed(setup, django_capture_on_commit_callbacks):
    from apps.annotations.ordering import queue_order_follow

    study, question, _, run, _ = setup
    assert not queue_order_follow(study_id=study.pk)  # nothing asked: no request
    assert not QueueOrder.objects.exists()
    _order(
        question,
        django_capture_on_commit_callbacks,
        queue_order="uncertainty",
        queue_order_run=run.pk,
    )
    with django_capture_on_commit_callbacks(execute=False) as scheduled:
        assert not queue_order_follow(study_id=study.pk, mode="disagreement")  # a new forecast
        assert queue_order_follow(study_id=study.pk, mode="uncertainty")  # a run's rows
    assert len(scheduled) == 1
    assert QueueOrder.objects.get(study=study).requested_at is not None


def test_the_sweep_applies_an_order_left_waiting(setup, settings):
    """The worker mode: nothing runs after the commit; the sweep finds the outbox."""
    from apps.annotations.ordering import queue_orders_sweep

    settings.QUALITY_UPDATES = "worker"
    study, question, (annotator, _), run, probabilities = setup
    question_update(
        question=question, settings={"queue_order": "uncertainty", "queue_order_run": run.pk}
    )
    assert QueueOrder.objects.get(study=study).applied_at is None  # asked, not applied
    assert queue_orders_sweep() == [study.pk]
    state = QueueOrder.objects.get(study=study)
    assert state.requested_at is None
    assert state.mode == "uncertainty"
    assert queue_orders_sweep() == []
    entropy = {item: float(scipy_entropy(p)) for item, p in probabilities.items()}
    assert _served(study, annotator) == _expected(study, question, entropy)
