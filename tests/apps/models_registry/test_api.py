"""REST API of model runs: permission matrix, registration (201 / 400, nothing stored)."""

from __future__ import annotations

import io

import pytest
from knox.models import AuthToken

from apps.models_registry.models import ModelRun, ModelRunEvaluation
from apps.studies.models import Membership
from apps.studies.services import membership_add
from tests.apps.models_registry.simulation import jsonl, prediction_rows
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _url(study, run=None) -> str:
    base = f"/api/studies/{study.pk}/model-runs/"
    return f"{base}{run.pk}/" if run else base


def _files(sim, codes=None, name: str = "predictions.jsonl") -> dict:
    upload = jsonl(prediction_rows(sim, sim.ratings if codes is None else codes))
    upload.name = name
    return {"question": "sentiment", "name": "qumab", "version": "v1", "predictions": upload}


def _as(api_client, user) -> None:
    _, token = AuthToken.objects.create(user=user)
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {token}")


@pytest.fixture
def run(sim, register):
    return register("oracle", sim.ratings)


def test_anonymous_gets_401(api_client, sim, run):
    assert api_client.get(_url(sim.study)).status_code == 401
    assert api_client.get(_url(sim.study, run)).status_code == 401
    assert api_client.delete(_url(sim.study, run)).status_code == 401
    assert api_client.post(_url(sim.study), _files(sim), format="multipart").status_code == 401


def test_outsider_gets_404(api_client, sim, run):
    _as(api_client, UserFactory(manager=True))
    assert api_client.get(_url(sim.study)).status_code == 404
    assert api_client.get(_url(sim.study, run)).status_code == 404
    assert api_client.delete(_url(sim.study, run)).status_code == 404
    response = api_client.post(_url(sim.study), _files(sim), format="multipart")
    assert response.status_code == 404


def test_annotator_gets_403(api_client, sim, run):
    _as(api_client, sim.study.memberships.get(user__username=sim.usernames[0]).user)
    assert api_client.get(_url(sim.study)).status_code == 403
    assert api_client.get(_url(sim.study, run)).status_code == 403
    assert api_client.delete(_url(sim.study, run)).status_code == 403
    response = api_client.post(_url(sim.study), _files(sim), format="multipart")
    assert response.status_code == 403


def test_manager_of_another_study_sees_nothing_of_this_one(api_client, sim, run, study_setup):
    other_manager = study_setup[0].created_by
    _as(api_client, other_manager)
    assert api_client.get(f"/api/studies/{study_setup[0].pk}/model-runs/").json()["count"] == 0
    assert api_client.get(_url(sim.study, run)).status_code == 404


def test_manager_registers_reads_and_recomputes(
    api_client, sim, run, django_capture_on_commit_callbacks
):
    """Registering and recomputing answer at once with ``evaluating``; the evaluation runs
    after the commit (inline here: the captured callbacks), then the figures are there."""
    co_manager = UserFactory()
    membership_add(study=sim.study, user=co_manager, role=Membership.Role.MANAGER)
    _as(api_client, co_manager)
    data = {**_files(sim), "metadata": '{"lr": 0.001}'}
    with django_capture_on_commit_callbacks() as callbacks:
        response = api_client.post(_url(sim.study), data, format="multipart")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["created_by"] == co_manager.username
    assert body["metadata"] == {"lr": 0.001}
    assert (body["evaluating"], body["evaluation"]) == (True, None)  # not evaluated yet
    assert not ModelRunEvaluation.objects.filter(run_id=body["id"]).exists()
    for callback in callbacks:
        callback()
    body = api_client.get(_url(sim.study, ModelRun.objects.get(pk=body["id"]))).json()
    assert body["evaluating"] is False
    assert body["evaluation"]["dic"] == 0.0
    assert body["evaluation"]["baselines"]["dic_random"] > 0.8
    listed = api_client.get(_url(sim.study)).json()
    assert listed["count"] == 2
    detail = api_client.get(_url(sim.study, run)).json()
    assert detail["evaluation"]["accuracy_mean"] == 1.0
    with django_capture_on_commit_callbacks() as callbacks:
        recomputed = api_client.post(_url(sim.study, run) + "recompute/")
    assert recomputed.status_code == 202
    assert recomputed.json()["evaluating"] is True
    assert recomputed.json()["evaluation"]["id"] == detail["evaluation"]["id"]  # the previous
    assert len(api_client.get(_url(sim.study, run) + "evaluations/").json()) == 1
    for callback in callbacks:
        callback()
    history = api_client.get(_url(sim.study, run) + "evaluations/").json()
    assert len(history) == 2
    assert api_client.get(_url(sim.study, run)).json()["evaluating"] is False


def test_invalid_upload_is_a_400_naming_lines_and_nothing_is_stored(api_client, sim):
    _as(api_client, sim.study.created_by)
    bad = io.BytesIO(
        f'{{"item": "{sim.items[0]}", "annotator": "nobody", "label": "neutral"}}\n'.encode()
    )
    bad.name = "p.jsonl"
    features = io.BytesIO(b"annotator,vector\n" + f'{sim.usernames[0]},"[1, NaN]"\n'.encode())
    features.name = "f.csv"
    data = {**_files(sim), "predictions": bad, "features": features}
    response = api_client.post(_url(sim.study), data, format="multipart")
    assert response.status_code == 400
    assert response.json() == {
        "predictions": ["line 1, field annotator: 'nobody' is not an annotator of the study."],
        "features": ["line 2, field vector: Position 1 is nan; give finite numbers."],
    }
    assert not ModelRun.objects.exists()


def test_unknown_extension_and_question_are_400(api_client, sim):
    _as(api_client, sim.study.created_by)
    response = api_client.post(
        _url(sim.study), _files(sim, name="predictions.xlsx"), format="multipart"
    )
    assert response.status_code == 400
    assert "predictions" in response.json()
    response = api_client.post(
        _url(sim.study), {**_files(sim), "question": "nope"}, format="multipart"
    )
    assert response.status_code == 400
    assert "question" in response.json()
    assert not ModelRun.objects.exists()


def test_evaluation_gives_dic_and_bae_intervals_with_the_evidence(api_client, sim, run):
    _as(api_client, sim.study.created_by)
    evaluation = api_client.get(_url(sim.study, run)).json()["evaluation"]
    figures = run.evaluations.get().figures
    assert evaluation["dic"] == 0.0
    assert evaluation["dic_interval"] == figures["dic_interval"] == [0.0, 0.0]
    assert evaluation["n_items"] == sim.ratings.shape[1]
    assert evaluation["n_cells"] == sim.ratings.size
    # no vectors were uploaded: no BAE and no interval
    assert evaluation["bae_feature"] is None
    assert evaluation["bae_feature_interval"] is None
    assert evaluation["bae_region_interval"] is None
    # the traditional metrics carry theirs: Wilson per annotator, item bootstrap for the rest
    n_items = sim.ratings.shape[1]
    assert evaluation["accuracy_n"] == [n_items] * sim.ratings.shape[0]
    assert evaluation["accuracy_interval"] == figures["accuracy_interval"]
    low, high = evaluation["accuracy_interval"][0]
    assert 0.9 < low < high == 1.0  # all right: Wilson's upper end is 1, its lower end below
    assert evaluation["accuracy_mean_interval"] == [1.0, 1.0]
    assert evaluation["fleiss_kappa_interval"] == figures["fleiss_pred_interval"]
    assert evaluation["fleiss_kappa_interval"][0] < evaluation["fleiss_kappa"]
    assert evaluation["fleiss_n_items"] == n_items
    # the history endpoint serialises the same fields
    (past,) = api_client.get(_url(sim.study, run) + "evaluations/").json()
    assert past["dic_interval"] == [0.0, 0.0]
    assert past["fleiss_kappa_interval"] == evaluation["fleiss_kappa_interval"]


def test_manager_deletes_a_run_with_its_evaluations(api_client, sim, run):
    _as(api_client, sim.study.created_by)
    assert ModelRunEvaluation.objects.filter(run=run).exists()
    assert api_client.delete(_url(sim.study, run)).status_code == 204
    assert not ModelRun.objects.filter(pk=run.pk).exists()
    assert not ModelRunEvaluation.objects.filter(run_id=run.pk).exists()
    assert api_client.delete(_url(sim.study, run)).status_code == 404
