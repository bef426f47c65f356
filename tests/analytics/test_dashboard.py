"""Flags, their services, publishing and the dashboard page and consumer."""

from __future__ import annotations

import datetime as dt
import re
import uuid
from collections import Counter

import numpy as np
import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from analytics import plotting
from analytics.config import quality_config
from analytics.metrics import aad_rmse_per_item
from analytics.models import Flag, FlagEvent, ItemDisagreement, QualitySnapshot
from analytics.publishing import quality_publish
from analytics.selectors import excluded_annotator_ids, top_disagreements
from analytics.services import (
    annotator_exclude,
    annotator_include,
    flag_confirm,
    flag_dismiss,
    flags_evaluate,
)
from analytics.sufficient_stats import CategoricalStats
from annotate_site.routing import websocket_urlpatterns
from apps.annotations.models import Annotation, Assignment
from apps.annotations.services import annotations_submit
from apps.categorical.indicators import INDICATORS, LabelScale, derive_categorical
from apps.categorical.quality import quality_process_pending
from tests.analytics.test_live_push import dashboard_socket
from tests.factories import SENTIMENT_LABELS, UserFactory, running_study

LABELS = ["negative", "neutral", "positive"]


def _crafted(n_items: int, *, n_annotators: int = 8, seed: int = 0, n_random: int = 1):
    """Consistent annotators (5% noise) and ``n_random`` who label at random (the last ones)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(3, size=n_items)
    ratings = np.where(rng.random((n_annotators, n_items)) < 0.05, (truth + 1) % 3, truth)
    ratings[n_annotators - n_random :] = rng.integers(3, size=(n_random, n_items))
    stats = CategoricalStats(n_annotators, 3)
    for i in range(n_items):
        stats.add_item({(k, 1): (int(ratings[k, i]), 2000) for k in range(n_annotators)})
    return stats


def _derive(stats, annotators):
    scale = LabelScale.from_labels(LABELS, SENTIMENT_LABELS, ordered=True)
    return derive_categorical(
        stats, annotators=[u.pk for u in annotators], scale=scale, min_overlap=10
    )


@pytest.fixture
def panel(db):
    study, annotators = running_study(n_items=1, n_annotators=8)
    return study, study.questions.get(), annotators


def test_random_labeller_is_flagged_with_reason(panel):
    _study, question, annotators = panel
    derived = _derive(_crafted(120), annotators)
    hits = flags_evaluate(
        question=question, derived=derived, indicators=INDICATORS, config=quality_config()
    )
    flagged = {(h["annotator"], h["indicator"]) for h in hits}
    assert (annotators[-1].pk, "cohen_kappa") in flagged
    assert {a for a, _ in flagged} == {annotators[-1].pk}
    flag = Flag.objects.get(annotator=annotators[-1], indicator="cohen_kappa")
    assert flag.status == Flag.Status.OPEN
    assert flag.reason.startswith("kappa with others ")
    assert "study median" in flag.reason
    assert "robust z" in flag.reason
    assert "120 items" in flag.reason
    assert "below the floor 0.20" in flag.reason
    assert flag.figures["value"] < 0.2 < flag.figures["median"]
    assert FlagEvent.objects.filter(flag=flag, to_status="open", actor=None).count() == 1


def test_flags_are_written_in_one_statement_per_kind_of_write(panel):
    """The quality worker evaluates the flags on every pass: each flag raised or refreshed was
    one INSERT or UPDATE of its own (34 per pass for a crowd of 64 with a third of them
    flagged: a third of the pass's CPU). Now one statement per kind of write, however many."""
    _, question, annotators = panel

    def writes(n_items):
        derived = _derive(_crafted(n_items, n_random=3, seed=1), annotators)
        with CaptureQueriesContext(connection) as queries:
            flags_evaluate(
                question=question, derived=derived, indicators=INDICATORS, config=quality_config()
            )
        statements = [re.sub(r"^\d+ times: ", "", q["sql"]) for q in queries.captured_queries]
        return Counter(
            (sql.split()[0], sql.split('"')[1])
            for sql in statements
            if sql.startswith(("INSERT", "UPDATE"))
        )

    raised = writes(120)
    assert Flag.objects.filter(active=True).count() >= 6
    assert raised == {("INSERT", "analytics_flag"): 1, ("INSERT", "analytics_flagevent"): 1}
    refreshed = writes(150)  # every flag's figures change; more evidence raises more
    assert refreshed[("UPDATE", "analytics_flag")] == 1
    assert set(refreshed.values()) == {1}
    assert all(f.figures["evidence"] == 150 for f in Flag.objects.exclude(annotator=None))


def test_nobody_flagged_with_too_little_evidence(panel):
    _, question, annotators = panel
    derived = _derive(_crafted(12), annotators)
    hits = flags_evaluate(
        question=question, derived=derived, indicators=INDICATORS, config=quality_config()
    )
    assert hits == []
    assert not Flag.objects.exists()


def test_flag_services_log_and_dismissed_flag_reopens_only_when_worse(panel, settings):
    study, question, annotators = panel
    manager = study.created_by
    settings.QUALITY_REOPEN_MARGIN = 0.1
    derived = _derive(_crafted(120), annotators)
    flags_evaluate(
        question=question, derived=derived, indicators=INDICATORS, config=quality_config()
    )
    flag = Flag.objects.get(annotator=annotators[-1], indicator="cohen_kappa")
    flag_confirm(flag=flag, actor=manager, note="checked a sample")
    flag_dismiss(flag=flag, actor=manager, note="hard items")
    flag.refresh_from_db()
    assert flag.status == Flag.Status.DISMISSED
    value = flag.figures["value"]
    assert flag.figures["dismissed_value"] == value
    events = list(flag.events.values_list("from_status", "to_status", "actor_id", "note"))
    assert events == [
        ("", "open", None, events[0][3]),
        ("open", "confirmed", manager.pk, "checked a sample"),
        ("confirmed", "dismissed", manager.pk, "hard items"),
    ]

    def evaluate_with(kappa_value: float) -> None:
        derived.indicators["cohen_kappa"][-1] = kappa_value
        flags_evaluate(
            question=question, derived=derived, indicators=INDICATORS, config=quality_config()
        )
        flag.refresh_from_db()

    evaluate_with(value - 0.05)  # a little worse: stays dismissed
    assert flag.status == Flag.Status.DISMISSED
    evaluate_with(value - 0.2)  # clearly worse than at the dismissal: reopens, logged
    assert flag.status == Flag.Status.OPEN
    assert flag.events.last().note.startswith("worse since dismissed")


def test_exclusion_is_logged_and_honoured_by_the_selector(panel):
    study, question, annotators = panel
    manager, spammer = study.created_by, annotators[-1]
    flags_evaluate(
        question=question,
        derived=_derive(_crafted(120), annotators),
        indicators=INDICATORS,
        config=quality_config(),
    )
    annotator_exclude(study=study, annotator=spammer, by=manager, reason="random labels")
    assert excluded_annotator_ids(study=study) == {spammer.pk}
    flag = Flag.objects.get(annotator=spammer, indicator="cohen_kappa")
    assert flag.status == Flag.Status.CONFIRMED
    assert flag.events.last().note == "excluded: random labels"
    annotator_include(study=study, annotator=spammer, by=manager)
    assert excluded_annotator_ids(study=study) == set()


def _answer_everything(study, annotators, *, seed: int = 0) -> None:
    question = study.questions.get()
    rng = np.random.default_rng(seed)
    for user in annotators:
        for assignment in Assignment.objects.filter(annotator=user, round=1):
            annotations_submit(
                annotator=user,
                assignment=assignment,
                answers={question: LABELS[rng.integers(3)]},
                idempotency_key=uuid.uuid4(),
                time_spent_ms=1500,
            )


@pytest.mark.django_db
def test_publish_snapshots_debounce_and_item_disagreement(settings):
    settings.QUALITY_SNAPSHOT_INTERVAL = 60
    study, annotators = running_study(n_items=8, n_annotators=4)
    question = study.questions.get()
    _answer_everything(study, annotators)
    quality_process_pending(question_id=question.pk)
    first = quality_publish(
        question_id=question.pk, item_ids=list(study.items.values_list("pk", flat=True))
    )
    assert first.n_annotations == 32
    assert len(first.indicators["annotators"]) == 4
    assert ItemDisagreement.objects.filter(question=question).count() == 8  # touched items
    second = quality_publish(question_id=question.pk)
    assert second.pk == first.pk  # same window: updated in place
    QualitySnapshot.objects.filter(pk=first.pk).update(
        created_at=first.created_at - dt.timedelta(minutes=5)
    )
    third = quality_publish(question_id=question.pk, rebuild=True)
    assert third.pk != first.pk
    assert len(third.indicators["values"]["ds_competence"]) == 4
    assert "ds_computed_at" in third.indicators["study"]
    assert third.indicators["study"]["ds_converged"] is True
    assert third.indicators["study"]["ds_iterations"] >= 1
    fourth = quality_publish(question_id=question.pk)
    assert (
        fourth.indicators["values"]["ds_competence"] == third.indicators["values"]["ds_competence"]
    )
    # the carried fit keeps saying how it was fitted
    for key in ("ds_iterations", "ds_converged", "ds_computed_at"):
        assert fourth.indicators["study"][key] == third.indicators["study"][key]


@pytest.mark.django_db
def test_dashboard_page_for_managers_only(client):
    study, annotators = running_study(n_items=8, n_annotators=4)
    question = study.questions.get()
    _answer_everything(study, annotators)
    quality_process_pending(question_id=question.pk)
    quality_publish(question_id=question.pk, rebuild=True)
    url = reverse("analytics:dashboard", args=[study.pk])
    for user, status in ((UserFactory(manager=True), 404), (annotators[0], 403)):
        client.force_login(user)
        assert client.get(url).status_code == status
    client.force_login(study.created_by)
    response = client.get(url)
    assert response.status_code == 200
    html = response.content.decode()
    for fragment in ("quality-summary", "quality-annotators", "quality-heatmap", "quality-aad"):
        assert f'id="{fragment}"' in html
    assert annotators[0].username in html
    # every heatmap cell states the items its pair shares (4 x 3 pairs, each all 8 items)
    assert html.count("; 8 shared items</title>") == 12
    assert re.search(r"\d+ EM iterations, converged", html)
    partial = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in partial
    assert 'id="quality-items"' in partial


@pytest.mark.django_db
def test_a_crowd_s_dashboard_draws_part_of_the_heatmap_and_says_which(client, monkeypatch):
    """Past ``HEATMAP_MOST`` annotators (3 here) the page draws that many rows, flagged ones
    first, and says how many of how many it shows."""
    study, annotators = running_study(n_items=8, n_annotators=5)
    question = study.questions.get()
    _answer_everything(study, annotators)
    quality_process_pending(question_id=question.pk)
    quality_publish(question_id=question.pk, rebuild=True)
    monkeypatch.setattr(plotting, "HEATMAP_MOST", 3)
    client.force_login(study.created_by)
    html = client.get(reverse("analytics:dashboard", args=[study.pk])).content.decode()
    heatmap = html[html.index('id="quality-heatmap"') :]
    heatmap = heatmap[: heatmap.index("</section>")]
    assert "Showing 3 of 5 annotators: the flagged ones first" in heatmap
    assert heatmap.count("<rect x=") == 9 + 6  # 3 x 3 cells and the legend's 6 stops


def _connect(user, study_id: int):
    async def run():
        communicator = WebsocketCommunicator(
            URLRouter(websocket_urlpatterns), f"/ws/studies/{study_id}/quality/"
        )
        communicator.scope["user"] = user
        connected, _ = await communicator.connect()
        await communicator.disconnect()
        return connected

    return async_to_sync(run)()


@pytest.mark.django_db(transaction=True)
def test_consumer_refuses_anonymous_outsiders_and_annotators():
    study, annotators = running_study(n_items=2, n_annotators=2)
    assert _connect(AnonymousUser(), study.pk) is False
    assert _connect(UserFactory(manager=True), study.pk) is False
    assert _connect(annotators[0], study.pk) is False
    assert _connect(study.created_by, study.pk) is True


@pytest.mark.django_db(transaction=True)
def test_manager_receives_the_fragments_after_a_submission():
    study, annotators = running_study(n_items=3, n_annotators=2)
    question = study.questions.get()
    assignment = Assignment.objects.filter(annotator=annotators[0]).first()

    async def run():
        communicator = await dashboard_socket(study, question)
        # a real commit: on_commit processes inline, publishes and pushes
        await database_sync_to_async(annotations_submit)(
            annotator=annotators[0],
            assignment=assignment,
            answers={question: "positive"},
            idempotency_key=uuid.uuid4(),
        )
        html = await communicator.receive_from(timeout=10)
        await communicator.disconnect()
        return html

    html = async_to_sync(run)()
    assert html.lstrip().startswith('<section class="card quality-summary" id="quality-summary"')
    assert 'id="quality-annotators"' in html
    assert annotators[0].username in html


@pytest.mark.django_db
def test_top_disagreements_match_the_metric_on_every_item(monkeypatch):
    monkeypatch.setattr("apps.categorical.indicators.KEPT_DISAGREEMENTS", 3)
    study, annotators = running_study(n_items=8, n_annotators=4)
    question = study.questions.get()
    _answer_everything(study, annotators, seed=5)
    quality_process_pending(question_id=question.pk)
    quality_publish(question_id=question.pk, rebuild=True)
    assert ItemDisagreement.objects.filter(question=question).count() == 3
    # sentiment labels: valence -1 / 0 / 1 (arousal 0), so AAD is the distance on the scale
    valence = {label["key"]: label["valence"] for label in SENTIMENT_LABELS}
    users = {u.pk: k for k, u in enumerate(annotators)}
    items = {item: i for i, item in enumerate(study.items.values_list("pk", flat=True))}
    ratings = np.full((len(users), len(items)), np.nan)
    for a in Annotation.objects.filter(question=question).select_related("current_revision"):
        ratings[users[a.annotator_id], items[a.item_id]] = valence[
            a.current_revision.value["label"]
        ]
    expected = aad_rmse_per_item(ratings)
    top = list(top_disagreements(question=question, limit=3))
    np.testing.assert_allclose([row.aad_rmse for row in top], np.sort(expected)[::-1][:3])


def test_histograms_bin_many_distinct_distances_and_keep_every_count():
    from apps.categorical.kind import MAX_HISTOGRAM_BARS, aad_histograms

    differences = [round(0.1 * k, 1) for k in range(20)]  # e.g. valence/arousal distances
    counts = [[1] * 20, [0] * 19 + [4]]
    plot = aad_histograms({"aad_differences": differences, "aad_counts": counts}, ["a", "b"])
    assert len(plot["ticks"]) == MAX_HISTOGRAM_BARS
    assert all(len(chart["bars"]) == MAX_HISTOGRAM_BARS for chart in plot["charts"])
    assert plot["charts"][1]["n"] == 4
    assert plot["charts"][1]["bars"][-1]["title"].endswith("100% of shared items")
    few = aad_histograms({"aad_differences": [0.0, 1.0, 2.0], "aad_counts": [[2, 1, 1]]}, ["a"])
    assert [t["label"] for t in few["ticks"]] == ["0", "1", "2"]


def test_a_figure_whose_interval_is_not_shown_says_so_instead_of_dashes():
    """MACE trust keeps its estimate where its interval is not calibrated (sparse designs,
    issue 23); the table showed "0.97 [–, –]", which reads like missing data."""
    from analytics.config import quality_config
    from analytics.dashboard import _cell
    from apps.categorical.indicators import MACE_TRUST

    indicators = {
        "values": {"mace_trust": [0.97]},
        "evidence": {MACE_TRUST.evidence: [35]},
        "intervals": {"mace_trust": [[0.97, None, None, 35]]},
    }
    cell = _cell(MACE_TRUST, 0, indicators, quality_config())
    assert cell["text"] == "0.97 [too few for an interval]"
    assert cell["evidence"] == "35 items"
    indicators["intervals"]["mace_trust"] = [[0.97, 0.9, 1.0, 35]]
    assert _cell(MACE_TRUST, 0, indicators, quality_config())["text"] == "0.97 [0.90, 1.00]"
