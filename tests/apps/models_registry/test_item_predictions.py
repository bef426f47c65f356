"""Per-item predictions with label probabilities (issue 28): a predictions file without an
annotator column, probabilities as one object or p_<label> columns; every bad row is named by
line and field, and nothing is written unless every row is valid."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from knox.models import AuthToken

from apps.models_registry.models import ItemPrediction, ModelRun, Prediction
from apps.models_registry.services import Upload, model_run_register
from tests.apps.models_registry.simulation import jsonl


def _register(sim, predictions: Upload) -> ModelRun:
    return model_run_register(
        study=sim.study,
        question=sim.question,
        name="classifier",
        version="1",
        created_by=sim.study.created_by,
        predictions=predictions,
    )


def _errors(sim, predictions: Upload) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        _register(sim, predictions)
    assert not ModelRun.objects.exists()
    assert not ItemPrediction.objects.exists()
    return caught.value.message_dict["predictions"]


def test_a_probabilities_object_per_item_is_stored_rescaled(sim):
    rows = [
        {"item": sim.items[0], "probabilities": {"negative": 0.2, "neutral": 0.3, "positive": 0.5}},
        {"item": sim.items[1], "probabilities": {"neutral": 0.999}, "label": "neutral"},
        {"item": sim.items[2], "label": "negative"},  # a label without probabilities
    ]
    run = _register(sim, Upload(jsonl(rows), "jsonl"))
    stored = {p.item.external_id: p for p in ItemPrediction.objects.select_related("label", "item")}
    assert not Prediction.objects.exists()  # per item, not per annotator
    assert stored[sim.items[0]].label.key == "positive"  # the most probable when not given
    assert stored[sim.items[0]].probabilities == pytest.approx(
        {"negative": 0.2, "neutral": 0.3, "positive": 0.5}
    )
    second = stored[sim.items[1]].probabilities
    assert sorted(second) == ["negative", "neutral", "positive"]  # every label (jsonb: any order)
    assert second == pytest.approx({"negative": 0.0, "neutral": 1.0, "positive": 0.0})
    assert stored[sim.items[2]].probabilities is None
    assert stored[sim.items[2]].label.key == "negative"
    assert run.item_predictions.count() == 3


def test_csv_p_columns(sim):
    text = (
        "item,p_negative,p_neutral,p_positive\n"
        f"{sim.items[0]},0.1,0.1,0.8\n"
        f"{sim.items[1]},0.333,0.333,0.333\n"
    )
    _register(sim, Upload(io.BytesIO(text.encode()), "csv"))
    probabilities = dict(ItemPrediction.objects.values_list("item__external_id", "probabilities"))
    assert probabilities[sim.items[1]] == pytest.approx(
        dict.fromkeys(probabilities[sim.items[1]], 1 / 3)
    )
    assert probabilities[sim.items[0]]["positive"] == pytest.approx(0.8)


def test_npz_p_arrays(sim):
    buffer = io.BytesIO()
    np.savez(
        buffer,
        item=np.array(sim.items[:2]),
        p_negative=np.array([0.6, 0.0]),
        p_neutral=np.array([0.4, 0.0]),
        p_positive=np.array([0.0, 1.0]),
    )
    buffer.seek(0)
    _register(sim, Upload(buffer, "npz"))
    labels = dict(ItemPrediction.objects.values_list("item__external_id", "label__key"))
    assert labels == {sim.items[0]: "negative", sim.items[1]: "positive"}


def test_bad_rows_are_named_by_line_and_field_and_nothing_is_written(sim):
    good = {"negative": 0.2, "neutral": 0.3, "positive": 0.5}
    rows = [
        {"item": sim.items[0], "probabilities": good},
        {"item": sim.items[1], "probabilities": {"negative": 0.2, "neutral": 0.2}},
        {"item": sim.items[2], "probabilities": {"furious": 0.5, "neutral": 0.5}},
        {"item": sim.items[3], "probabilities": {"negative": 1.5, "neutral": -0.5}},
        {"item": sim.items[4], "probabilities": "not json"},
        {"item": sim.items[0], "probabilities": good},
        {"item": "nope", "probabilities": good},
        {"item": sim.items[5], "probabilities": good, "annotator": sim.usernames[0]},
        {"item": sim.items[6], "probabilities": good, "label": "bogus"},
        {"item": sim.items[7]},
    ]
    errors = _errors(sim, Upload(jsonl(rows), "jsonl"))
    assert errors == [
        "line 2, field probabilities: The probabilities sum to 0.4; they must sum to 1 "
        "(within 0.01).",
        "line 3, field probabilities: 'furious' is not a label of 'sentiment'; choose from "
        "negative, neutral, positive.",
        "line 4, field probabilities: The probability of 'negative' is 1.5; give a number "
        "from 0 to 1.",
        "line 4, field probabilities: The probability of 'neutral' is -0.5; give a number "
        "from 0 to 1.",
        "line 5, field probabilities: Give an object of label key -> probability, e.g. "
        '{"neutral": 0.7, ...}.',
        "line 6: Duplicate of line 1; predict each item once.",
        "line 7, field item: Unknown item 'nope'.",
        "line 8, field annotator: Per-item predictions name no annotator (the file's first "
        "row has none).",
        "line 9, field label: 'bogus' is not a label of 'sentiment'; choose from negative, "
        "neutral, positive.",
        "line 10, field probabilities: Give the label probabilities (or at least the "
        "predicted label).",
    ]


def test_csv_errors_name_the_p_column(sim):
    text = f"item,p_negative,p_neutral,p_angry\n{sim.items[0]},0.5,0.5,0\n{sim.items[1]},x,0.5,\n"
    errors = _errors(sim, Upload(io.BytesIO(text.encode()), "csv"))
    assert errors == [
        "line 2, field p_angry: 'angry' is not a label of 'sentiment'; choose from negative, "
        "neutral, positive.",
        "line 3, field p_negative: The probability of 'negative' is 'x'; give a number from 0 "
        "to 1.",
    ]


def test_a_file_with_annotators_is_still_read_per_annotator(sim):
    rows = [{"item": sim.items[0], "annotator": sim.usernames[0], "label": "neutral"}]
    _register(sim, Upload(jsonl(rows), "jsonl"))
    assert Prediction.objects.count() == 1
    assert not ItemPrediction.objects.exists()


def test_the_api_upload_accepts_item_probabilities(sim, api_client):
    """The registry's upload endpoint: 201 and stored; a bad row: 400 with the line."""
    _, token = AuthToken.objects.create(user=sim.study.created_by)
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    url = f"/api/studies/{sim.study.pk}/model-runs/"
    rows = [{"item": sim.items[0], "probabilities": {"negative": 0.9, "neutral": 0.1}}]
    good = io.BytesIO("\n".join(json.dumps(r) for r in rows).encode())
    good.name = "p.jsonl"
    data = {"question": sim.question.key, "name": "clf", "version": "1", "predictions": good}
    response = api_client.post(url, data, format="multipart")
    assert response.status_code == 201, response.content
    assert ItemPrediction.objects.get().label.key == "negative"
    bad = io.BytesIO(b'{"item": "%s", "probabilities": {"negative": 2}}' % sim.items[1].encode())
    bad.name = "p.jsonl"
    response = api_client.post(
        url, {**data, "version": "2", "predictions": bad}, format="multipart"
    )
    assert response.status_code == 400
    assert "line 1, field probabilities" in json.dumps(response.json())
