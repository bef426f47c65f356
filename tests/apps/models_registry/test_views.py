"""Pages of the model registry: managers only (404 otherwise); what they show."""

from __future__ import annotations

import pytest
from django.urls import reverse

from analytics.metrics import pairwise_kappa
from apps.models_registry.selectors import leaderboard
from apps.models_registry.services import Upload, model_run_register
from tests.apps.models_registry.simulation import jsonl, vector_rows, vectors_with_cosine
from tests.apps.models_registry.traces import trace_rows, trace_study
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


def _login(client, user) -> None:
    assert client.login(username=user.username, password=PASSWORD)


def test_pages_are_404_for_annotators_and_outsiders(client, sim, register):
    run = register("oracle", sim.ratings)
    urls = [
        reverse("models_registry:leaderboard", args=[sim.study.pk, "sentiment"]),
        reverse("models_registry:run", args=[sim.study.pk, run.pk]),
    ]
    for user in (sim.study.memberships.get(role="annotator", user__username=sim.usernames[0]).user,
                 UserFactory(manager=True)):  # fmt: skip
        _login(client, user)
        for url in urls:
            assert client.get(url).status_code == 404
    client.logout()
    assert client.get(urls[0]).status_code == 302  # to the login page


def test_leaderboard_ranks_runs_and_shows_reference_rows(client, sim, register):
    register("oracle", sim.ratings)
    _login(client, sim.study.created_by)
    url = reverse("models_registry:leaderboard", args=[sim.study.pk, "sentiment"])
    page = client.get(url).content.decode()
    for text in ("oracle 1", "Random (DIC, BAE)", "Consensus (DIC)", "Uniform (BAE)"):
        assert text in page
    response = client.post(url)
    assert response.status_code == 302
    assert sim.question.model_runs.get().evaluations.count() == 2


def test_run_page_shows_both_heatmaps_and_maps(client, sim, register, settings):
    truth = pairwise_kappa(sim.ratings.astype(float), min_overlap=settings.QUALITY_MIN_OVERLAP)
    vectors = vectors_with_cosine(truth)
    features = vector_rows(sim, vectors)
    run = register("oracle", sim.ratings, features=features)
    _login(client, sim.study.created_by)
    page = client.get(reverse("models_registry:run", args=[sim.study.pk, run.pk])).content.decode()
    assert page.count('class="mr-heatmap"') == 2
    assert page.count('class="mr-map"') == 4  # feature level and predicted labels, two each
    assert 'id="figure-dic">0.000<' in page
    assert 'id="figure-bae-feature">1.000<' in page
    assert "&lt;svg" not in page


def test_leaderboard_card_selector_limits_rows(sim, register):
    register("a", sim.ratings)
    register("b", sim.ratings)
    board = leaderboard(question=sim.question, limit=1)
    assert len(board.rows) == 1
    assert len(board.references) == 3


def test_trace_run_page_shows_kappa_sda_and_pearson(client):
    tsim = trace_study()
    run = model_run_register(
        study=tsim.study,
        question=tsim.question,
        name="tracer",
        version="1",
        created_by=tsim.study.created_by,
        predictions=Upload(jsonl(trace_rows(tsim, tsim.traces)), "jsonl"),
    )
    _login(client, tsim.study.created_by)
    page = client.get(reverse("models_registry:run", args=[tsim.study.pk, run.pk])).content.decode()
    assert page.count('class="mr-heatmap"') == 2
    assert "kappa_SDA (≤ 0 darkest)" in page
    assert "Mean Pearson r" in page
    assert "Mean accuracy" not in page
    board = client.get(reverse("models_registry:leaderboard", args=[tsim.study.pk, "arousal"]))
    assert "tracer 1" in board.content.decode()


def test_the_quality_dashboard_shows_the_questions_model_runs(client, sim, register):
    run = register("oracle", sim.ratings)
    client.force_login(sim.study.created_by)
    html = client.get(
        reverse("analytics:dashboard", args=[sim.study.pk]), {"question": sim.question.pk}
    ).content.decode()
    assert f"model-leaderboard-{sim.question.pk}" in html
    assert reverse("models_registry:run", args=[sim.study.pk, run.pk]) in html
