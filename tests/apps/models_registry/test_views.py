"""Pages of the model registry: managers only (404 otherwise); what they show."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from analytics.metrics import pairwise_kappa
from apps.models_registry.models import ModelRun, ModelRunEvaluation, Prediction
from apps.models_registry.selectors import latest_evaluation, leaderboard
from apps.models_registry.services import Upload
from tests.apps.models_registry.simulation import (
    jsonl,
    prediction_rows,
    register_and_evaluate,
    vector_rows,
    vectors_with_cosine,
)
from tests.apps.models_registry.traces import trace_rows, trace_study
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


def _login(client, user) -> None:
    assert client.login(username=user.username, password=PASSWORD)


def test_pages_are_403_for_annotators_and_404_for_outsiders(client, sim, register):
    run = register("oracle", sim.ratings)
    urls = [
        reverse("models_registry:leaderboard", args=[sim.study.pk, "sentiment"]),
        reverse("models_registry:run", args=[sim.study.pk, run.pk]),
    ]
    annotator = sim.study.memberships.get(role="annotator", user__username=sim.usernames[0]).user
    for user, status in ((annotator, 403), (UserFactory(manager=True), 404)):
        _login(client, user)
        for url in urls:
            assert client.get(url).status_code == status
    client.logout()
    assert client.get(urls[0]).status_code == 302  # to the login page


def test_leaderboard_ranks_runs_and_shows_reference_rows(
    client, sim, register, django_capture_on_commit_callbacks
):
    register("oracle", sim.ratings)
    _login(client, sim.study.created_by)
    url = reverse("models_registry:leaderboard", args=[sim.study.pk, "sentiment"])
    page = client.get(url).content.decode()
    for text in ("oracle 1", "Random (DIC, BAE)", "Consensus (DIC)", "Uniform (BAE)"):
        assert text in page
    with django_capture_on_commit_callbacks(execute=True):
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
    # the oracle reproduces M in every resample: DIC 0 with the interval [0, 0]
    assert 'id="figure-dic">0.000 <span class="mr-interval"' in page
    assert "[0.000, 0.000]</span></dd>" in page
    assert 'id="figure-bae-feature">1.000 <span class="mr-interval"' in page
    assert "&lt;svg" not in page


def test_leaderboard_card_selector_limits_rows(sim, register):
    register("a", sim.ratings)
    register("b", sim.ratings)
    board = leaderboard(question=sim.question, limit=1)
    assert len(board.rows) == 1
    assert len(board.references) == 3


def test_trace_run_page_shows_kappa_sda_and_pearson(client):
    tsim = trace_study()
    run = register_and_evaluate(
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


def _file(name: str, rows: list[dict]) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, jsonl(rows).getvalue())


def test_manager_uploads_a_run_from_the_leaderboard(
    client, sim, django_capture_on_commit_callbacks
):
    """The upload only stores the run; the pages say "evaluating…" and poll until the
    evaluation (after the commit, off the request) is done, then reload to show the figures."""
    _login(client, sim.study.created_by)
    url = reverse("models_registry:upload", args=[sim.study.pk, "sentiment"])
    data = {
        "name": "oracle",
        "version": "2",
        "predictions": _file("p.jsonl", prediction_rows(sim, sim.ratings)),
    }
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(url, data)
    assert response.status_code == 302
    run = ModelRun.objects.get(question=sim.question)
    assert (run.name, run.version, run.created_by) == ("oracle", "2", sim.study.created_by)
    assert run.evaluating
    assert run.evaluations.count() == 0
    page = client.get(response.url).content.decode()
    assert "oracle 2" in page
    assert 'form="compare-form"' in page
    assert 'id="mr-evaluating"' in page
    assert "evaluating…" in page
    run_url = reverse("models_registry:run", args=[sim.study.pk, run.pk])
    run_page = client.get(run_url).content.decode()
    assert 'id="mr-evaluating"' in run_page
    assert 'id="figure-dic"' not in run_page
    poll = {"HTTP_HX_REQUEST": "true"}
    still = client.get(response.url, {"evaluating": "1"}, **poll)
    assert 'id="mr-evaluating"' in still.content.decode()
    assert "HX-Refresh" not in still
    for callback in callbacks:  # the evaluation the commit handed off
        callback()
    assert run.evaluations.count() == 1
    for poll_url in (response.url, run_url):
        done = client.get(poll_url, {"evaluating": "1"}, **poll)
        assert done["HX-Refresh"] == "true"
    page = client.get(response.url).content.decode()
    assert 'id="mr-evaluating"' not in page
    run_page = client.get(run_url).content.decode()
    assert 'id="figure-dic">0.000' in run_page
    assert 'id="mr-evaluating"' not in run_page


@pytest.mark.parametrize(
    ("name", "content", "field", "message"),
    [
        ("p.txt", b"{}", "predictions", "Cannot tell the format"),
        ("p.jsonl", b'{"item": "nope", "annotator": "x", "label": "pos"}\n', "predictions", ""),
        ("p.jsonl", b"", "predictions", ""),
    ],
)
def test_bad_file_is_a_form_error_and_stores_nothing(client, sim, name, content, field, message):
    _login(client, sim.study.created_by)
    url = reverse("models_registry:upload", args=[sim.study.pk, "sentiment"])
    data = {"name": "broken", "version": "1", field: SimpleUploadedFile(name, content)}
    response = client.post(url, data)
    assert response.status_code == 422
    form = response.context["form"]
    assert form.errors[field]
    assert message in " ".join(form.errors[field])
    assert not ModelRun.objects.exists()
    assert not Prediction.objects.exists()


def test_bad_features_store_nothing_of_good_predictions(client, sim):
    _login(client, sim.study.created_by)
    url = reverse("models_registry:upload", args=[sim.study.pk, "sentiment"])
    data = {
        "name": "half",
        "version": "1",
        "predictions": _file("p.jsonl", prediction_rows(sim, sim.ratings)),
        "features": _file("f.jsonl", [{"annotator": "nobody", "vector": [1, 2]}]),
    }
    response = client.post(url, data)
    assert response.status_code == 422
    assert response.context["form"].errors["features"]
    assert not ModelRun.objects.exists()
    assert not Prediction.objects.exists()


def test_upload_over_the_limit_is_refused_unread(client, sim, settings):
    settings.UPLOAD_MAX_MODEL_RUN_BYTES = 100
    _login(client, sim.study.created_by)
    url = reverse("models_registry:upload", args=[sim.study.pk, "sentiment"])
    data = {
        "name": "big",
        "version": "1",
        "predictions": _file("p.jsonl", prediction_rows(sim, sim.ratings)),
    }
    response = client.post(url, data)
    assert response.status_code == 413
    assert "larger than" in " ".join(response.context["form"].errors["predictions"])
    assert not ModelRun.objects.exists()


def test_upload_and_delete_need_the_csrf_token(sim, register):
    run = register("oracle", sim.ratings)
    client = Client(enforce_csrf_checks=True)
    _login(client, sim.study.created_by)
    upload = reverse("models_registry:upload", args=[sim.study.pk, "sentiment"])
    delete = reverse("models_registry:run_delete", args=[sim.study.pk, run.pk])
    assert client.post(upload, {"name": "x", "version": "1"}).status_code == 403
    assert client.post(delete).status_code == 403
    assert ModelRun.objects.count() == 1


def test_manager_deletes_a_run_after_confirming(client, sim, register):
    run = register("oracle", sim.ratings)
    keep = register("other", sim.ratings)
    _login(client, sim.study.created_by)
    url = reverse("models_registry:run_delete", args=[sim.study.pk, run.pk])
    run_page = reverse("models_registry:run", args=[sim.study.pk, run.pk])
    assert f'href="{url}"' in client.get(run_page).content.decode()
    page = client.get(url).content.decode()
    assert "Delete oracle" in page
    assert ModelRun.objects.count() == 2  # GET only asks
    response = client.post(url)
    assert response.status_code == 302
    assert list(ModelRun.objects.all()) == [keep]
    assert not Prediction.objects.filter(run_id=run.pk).exists()
    assert not ModelRunEvaluation.objects.filter(run_id=run.pk).exists()


def test_new_pages_are_403_for_annotators_and_404_for_outsiders(client, sim, register):
    run = register("oracle", sim.ratings)
    other = register("other", sim.ratings)
    delete = reverse("models_registry:run_delete", args=[sim.study.pk, run.pk])
    upload = reverse("models_registry:upload", args=[sim.study.pk, "sentiment"])
    compare = reverse("models_registry:compare", args=[sim.study.pk, "sentiment"])
    compare += f"?run={run.pk}&run={other.pk}"
    annotator = sim.study.memberships.get(role="annotator", user__username=sim.usernames[0]).user
    for user, status in ((annotator, 403), (UserFactory(manager=True), 404)):
        _login(client, user)
        assert client.get(compare).status_code == status
        assert client.get(delete).status_code == status
        assert client.post(delete).status_code == status
        assert client.post(upload, {"name": "x", "version": "1"}).status_code == status
    assert ModelRun.objects.count() == 2


def test_compare_shows_two_runs_side_by_side(client, sim, register, settings):
    truth = pairwise_kappa(sim.ratings.astype(float), min_overlap=settings.QUALITY_MIN_OVERLAP)
    oracle = register("oracle", sim.ratings, features=vector_rows(sim, vectors_with_cosine(truth)))
    shuffled = np.random.default_rng(1).permuted(sim.ratings, axis=1)  # each annotator apart
    other = register("shuffled", shuffled)
    _login(client, sim.study.created_by)
    url = reverse("models_registry:compare", args=[sim.study.pk, "sentiment"])
    response = client.get(url, {"run": [oracle.pk, other.pk]})
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count('class="mr-heatmap"') == 2
    assert page.count('class="mr-map"') == 3  # oracle: features and predictions; other: predictions
    assert "oracle 1" in page
    assert "shuffled 1" in page
    dic = [side["figures"]["dic"] for side in response.context["sides"]]
    assert dic[0] == pytest.approx(0.0)
    assert dic[1] > 0.1


def test_compare_needs_two_runs_of_the_question(client, sim, register):
    run = register("oracle", sim.ratings)
    _login(client, sim.study.created_by)
    url = reverse("models_registry:compare", args=[sim.study.pk, "sentiment"])
    response = client.get(url, {"run": [run.pk]}, follow=True)
    assert "Tick exactly two runs" in response.content.decode()
    assert client.get(url, {"run": [run.pk, 999999]}).status_code == 404


def test_leaderboard_and_run_page_show_intervals_and_evidence(client, sim, register):
    register("oracle", sim.ratings)
    rng = np.random.default_rng(0)
    noisy = np.where(rng.random(sim.ratings.shape) < 0.5, 0, sim.ratings)
    run = register("noisy", noisy)
    _login(client, sim.study.created_by)
    url = reverse("models_registry:leaderboard", args=[sim.study.pk, "sentiment"])
    page = client.get(url).content.decode()
    figures = latest_evaluation(run=run).figures
    low, high = figures["dic_interval"]
    shown = (
        f'{figures["dic"]:.3f} <span class="mr-interval" title="95 % interval (bootstrap over '
        f'items)">[{low:.3f}, {high:.3f}]</span>'
    )
    assert shown in page
    assert '<th scope="col" class="num">Items</th>' in page
    assert f'<td class="num">{sim.ratings.shape[1]}</td>' in page
    # oracle and noisy run were resampled alike: the paired difference decides
    check = leaderboard(question=sim.question).top_two
    assert check.separated
    difference, low, high = check.difference
    assert difference == pytest.approx(-figures["dic"], abs=1e-6)  # oracle's DIC is 0
    assert high < 0
    assert (
        f"The two best runs are distinguishable: DIC difference {difference:.3f} "
        f'<span class="mr-interval">[{low:.3f}, {high:.3f}]</span> (paired bootstrap'
    ) in page
    detail = client.get(
        reverse("models_registry:run", args=[sim.study.pk, run.pk])
    ).content.decode()
    assert shown in detail
    assert (
        f"of the {sim.ratings.shape[1]} items ({sim.ratings.size} annotator–item cells)" in detail
    )


def test_leaderboard_says_when_the_two_best_runs_are_not_distinguishable(client, sim, register):
    # two runs of the same quality (30 % of the labels replaced at random, other draws)
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        swap = rng.random(sim.ratings.shape) < 0.3
        register(f"noisy {seed}", np.where(swap, rng.integers(0, 3, swap.shape), sim.ratings))
    board = leaderboard(question=sim.question)
    (_, best_high), (next_low, _) = (row.dic_interval for row in board.rows)
    assert next_low <= best_high
    check = board.top_two
    assert not check.separated
    assert check.difference[1] < 0 < check.difference[2]
    _login(client, sim.study.created_by)
    url = reverse("models_registry:leaderboard", args=[sim.study.pk, "sentiment"])
    page = client.get(url).content.decode()
    assert "The two best runs are not shown to differ: DIC difference" in page
    assert "so their order may be chance" in page


def test_paired_difference_is_that_of_the_stored_replicates(sim, register):
    from analytics.metrics import paired_difference

    rng = np.random.default_rng(5)
    for name, share in (("good", 0.1), ("worse", 0.4)):
        swap = rng.random(sim.ratings.shape) < share
        register(name, np.where(swap, rng.integers(0, 3, swap.shape), sim.ratings))
    board = leaderboard(question=sim.question)
    a, b = (row.evaluation.figures for row in board.rows)
    assert a["bootstrap_items"] == b["bootstrap_items"]
    expected = paired_difference(
        np.array(a["dic_replicates"], dtype=float),
        np.array(b["dic_replicates"], dtype=float),
        estimate_a=a["dic"],
        estimate_b=b["dic"],
    )
    check = board.top_two
    assert check.difference == pytest.approx((expected.estimate, expected.low, expected.high))
    # pairing removes the shared item variation: narrower than the two intervals' span
    assert expected.high - expected.low < (a["dic_interval"][1] - a["dic_interval"][0]) + (
        b["dic_interval"][1] - b["dic_interval"][0]
    )
    # evaluations on other answers cannot be paired: the two intervals are compared instead
    first = board.rows[0].evaluation
    first.fingerprint = "other answers"
    first.save(update_fields=["fingerprint"])
    unpaired = leaderboard(question=sim.question).top_two
    assert unpaired.difference is None
    assert unpaired.separated == (a["dic_interval"][1] < b["dic_interval"][0])


def test_run_page_says_when_a_figure_lies_outside_its_interval(client, sim, register, settings):
    # vectors whose cosines are the annotators' kappa matrix: BAE 1 on the data, and every
    # resample's noisier kappa matrix lies farther from them, so the interval ends below 1
    truth = pairwise_kappa(sim.ratings.astype(float), min_overlap=settings.QUALITY_MIN_OVERLAP)
    run = register("oracle", sim.ratings, features=vector_rows(sim, vectors_with_cosine(truth)))
    figures = latest_evaluation(run=run).figures
    assert figures["bae_interval"]["feature"][1] < figures["bae"]["feature"]
    assert figures["bae_bias"]["feature"] < 0
    _login(client, sim.study.created_by)
    page = client.get(reverse("models_registry:run", args=[sim.study.pk, run.pk])).content.decode()
    assert "<strong>BAE feature level lies outside its own interval</strong>" in page
    assert "<strong>DIC lies outside" not in page  # the oracle's DIC: 0 in [0, 0]


def test_accuracy_and_fleiss_are_shown_with_their_intervals(client, sim, register):
    """Issue #11: the leaderboard's Accuracy and Fleiss columns, the run page's summary and
    per-annotator table, and the comparison show each figure with its interval."""
    rng = np.random.default_rng(0)
    noisy = np.where(rng.random(sim.ratings.shape) < 0.5, 0, sim.ratings)
    run = register("noisy", noisy)
    other = register("oracle", sim.ratings)
    figures = latest_evaluation(run=run).figures

    def shown(value: float, interval: list[float]) -> str:
        return (
            f'{value:.3f} <span class="mr-interval" title="95 % interval (bootstrap over '
            f'items)">[{interval[0]:.3f}, {interval[1]:.3f}]</span>'
        )

    mean = shown(figures["accuracy_mean"], figures["accuracy_mean_interval"])
    fleiss = shown(figures["fleiss_pred"], figures["fleiss_pred_interval"])
    _login(client, sim.study.created_by)
    url = reverse("models_registry:leaderboard", args=[sim.study.pk, "sentiment"])
    page = client.get(url).content.decode()
    assert f'<td class="num">{mean}</td>' in page
    assert f'<td class="num">{fleiss}</td>' in page
    detail = client.get(reverse("models_registry:run", args=[sim.study.pk, run.pk])).content
    detail = detail.decode()
    assert f'id="figure-accuracy">{mean}</dd>' in detail
    assert f'id="figure-fleiss-pred">{fleiss}</dd>' in detail
    human = shown(figures["fleiss_human"], figures["fleiss_human_interval"])
    assert f'id="figure-fleiss-human">{human}</dd>' in detail
    rows = figures["fleiss_human_rows"]
    assert (
        f'id="figure-fleiss-human-rows">on the answers compared: {rows["annotators"]} '
        f"annotators, {rows['answers']} answers</small>" in detail
    )
    first = shown(figures["accuracy"][0], figures["accuracy_interval"][0])
    assert f'<td class="num">{first}</td><td class="num">{figures["accuracy_n"][0]}</td>' in detail
    compare = client.get(
        reverse("models_registry:compare", args=[sim.study.pk, "sentiment"]),
        {"run": [run.pk, other.pk]},
    ).content.decode()
    assert f'<td class="num">{mean}</td>' in compare
    assert f'<td class="num">{fleiss}</td>' in compare
