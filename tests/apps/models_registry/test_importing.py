"""Upload validation: every error kind names its file, line and field; nothing is stored."""

from __future__ import annotations

import io

import numpy as np
import pytest
from django.core.exceptions import ValidationError

from apps.models_registry.models import AnnotatorVector, ModelRun, Prediction
from apps.models_registry.services import Upload
from tests.apps.models_registry.simulation import jsonl, register_and_evaluate


def _register(sim, predictions: Upload, **vectors: Upload) -> ModelRun:
    return register_and_evaluate(
        study=sim.study,
        question=sim.question,
        name="m",
        version="1",
        created_by=sim.study.created_by,
        predictions=predictions,
        **vectors,
    )


def _errors(sim, predictions: Upload, **vectors: Upload) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        _register(sim, predictions, **vectors)
    assert not ModelRun.objects.exists()
    assert not Prediction.objects.exists()
    assert not AnnotatorVector.objects.exists()
    return caught.value.message_dict


def _good(sim, n: int = 2) -> list[dict]:
    return [
        {"item": sim.items[i], "annotator": sim.usernames[0], "label": "neutral"} for i in range(n)
    ]


def test_prediction_errors_name_line_and_field(sim):
    rows = [
        *_good(sim),
        {"item": "nope", "annotator": sim.usernames[0], "label": "neutral"},
        {"item": sim.items[0], "annotator": "stranger", "label": "neutral"},
        {"item": sim.items[1], "annotator": sim.usernames[1], "label": "furious"},
        {"item": sim.items[0], "annotator": sim.usernames[0], "label": "positive"},
        {"annotator": sim.usernames[1], "label": "neutral"},
    ]
    errors = _errors(sim, Upload(jsonl(rows), "jsonl"))["predictions"]
    assert errors == [
        "line 3, field item: Unknown item 'nope'.",
        "line 4, field annotator: 'stranger' is not an annotator of the study.",
        "line 5, field label: 'furious' is not a label of 'sentiment'; choose from "
        "negative, neutral, positive.",
        "line 6: Duplicate of line 1; predict each item and annotator once.",
        "line 7, field item: Give the item's external_id.",
    ]


def test_csv_predictions_count_the_header_as_line_one(sim):
    text = (
        "item,annotator,label\n"
        f"{sim.items[0]},{sim.usernames[0]},neutral\n"
        f"{sim.items[1]},{sim.usernames[0]},bogus\n"
    )
    errors = _errors(sim, Upload(io.BytesIO(text.encode()), "csv"))["predictions"]
    assert errors[0].startswith("line 3, field label: 'bogus' is not a label")


def test_csv_without_a_required_column(sim):
    errors = _errors(sim, Upload(io.BytesIO(b"item,who,label\nx,y,z\n"), "csv"))["predictions"]
    assert errors == ["line 1, field annotator: The header row needs this column."]


def test_broken_json_and_empty_file(sim):
    errors = _errors(sim, Upload(io.BytesIO(b'{"item": 1,\n'), "jsonl"))["predictions"]
    assert errors[0].startswith("line 1: Not valid JSON")
    errors = _errors(sim, Upload(io.BytesIO(b""), "jsonl"))["predictions"]
    assert errors == ["line 1: The file holds no prediction."]


def test_vector_errors_wrong_length_nan_duplicates_mixed(sim):
    u0, u1, u2 = sim.usernames[:3]
    features = [
        {"annotator": u0, "vector": [1.0, 0.0, 0.0]},
        {"annotator": u1, "vector": [1.0, 0.0]},
        {"annotator": u2, "vector": [1.0, float("nan"), 0.0]},
        {"annotator": u0, "vector": [0.0, 1.0, 0.0]},
        {"annotator": u2, "vector": "[1, 2"},
        {"annotator": u2, "item": sim.items[0], "vector": [1, 2, 3]},
        {"annotator": "ghost", "vector": [1, 2, 3]},
    ]
    upload = Upload(io.BytesIO("\n".join(map(_dumps, features)).encode()), "jsonl")
    errors = _errors(sim, Upload(jsonl(_good(sim)), "jsonl"), features=upload)
    assert "predictions" not in errors
    assert errors["features"] == [
        "line 2, field vector: 2 numbers; the first vector (line 1) has 3.",
        "line 3, field vector: Position 1 is nan; give finite numbers.",
        "line 4: Duplicate of line 1; one vector per annotator.",
        "line 5, field vector: Not a JSON list of numbers: Expecting ',' delimiter.",
        "line 6, field item: Give item on every row (per-item vectors) or on none "
        "(averaged vectors).",
        "line 7, field annotator: 'ghost' is not an annotator of the study.",
    ]


def _dumps(row: dict) -> str:
    import json

    return json.dumps(row)  # nan is written as NaN, which Python's JSON reader accepts


def test_every_file_is_checked_before_answering(sim):
    bad = [{"item": "nope", "annotator": sim.usernames[0], "label": "neutral"}]
    wrong = [{"annotator": sim.usernames[0], "vector": []}]
    errors = _errors(
        sim,
        Upload(jsonl(bad), "jsonl"),
        features=Upload(jsonl(wrong), "jsonl"),
        attention=Upload(jsonl(wrong), "jsonl"),
    )
    assert set(errors) == {"predictions", "features", "attention"}
    assert errors["attention"] == ["line 1, field vector: Give a non-empty list of numbers."]


def test_npz_rows_and_errors(sim):
    buffer = io.BytesIO()
    np.savez(
        buffer,
        item=np.array([sim.items[0], "nope"]),
        annotator=np.array([sim.usernames[0]] * 2),
        label=np.array(["neutral", "neutral"]),
    )
    buffer.seek(0)
    errors = _errors(sim, Upload(buffer, "npz"))["predictions"]
    assert errors == ["line 2, field item: Unknown item 'nope'."]
    buffer = io.BytesIO()
    np.savez(buffer, item=np.array(["a", "b"]), annotator=np.array(["x"]))
    buffer.seek(0)
    errors = _errors(sim, Upload(buffer, "npz"))["predictions"]
    assert errors == [
        "line 1, field label: The archive needs this array.",
        "line 1: The arrays differ in length: annotator 1, item 2.",
    ]
    errors = _errors(sim, Upload(io.BytesIO(b"not a zip"), "npz"))["predictions"]
    assert errors[0].startswith("line 1: Not a readable .npz file")


def test_npz_per_item_vectors_are_averaged(sim):
    rows = [
        {"item": sim.items[i], "annotator": sim.usernames[k], "label": "neutral"}
        for k in range(2)
        for i in range(3)
    ]
    buffer = io.BytesIO()
    np.savez(
        buffer,
        annotator=np.array([sim.usernames[0], sim.usernames[0], sim.usernames[1]]),
        item=np.array(sim.items[:2] + sim.items[:1]),
        vector=np.array([[1.0, 0.0], [3.0, 2.0], [0.5, 0.5]]),
    )
    buffer.seek(0)
    run = _register(sim, Upload(jsonl(rows), "jsonl"), attention=Upload(buffer, "npz"))
    stored = {v.annotator.username: v for v in run.vectors.select_related("annotator")}
    assert stored[sim.usernames[0]].array().tolist() == [2.0, 1.0]
    assert stored[sim.usernames[0]].n_items == 2
    assert stored[sim.usernames[1]].kind == "attention"
    assert run.predictions.count() == 6


def test_question_and_version_are_checked(sim):
    _register(sim, Upload(jsonl(_good(sim)), "jsonl"))
    with pytest.raises(ValidationError) as caught:
        _register(sim, Upload(jsonl(_good(sim)), "jsonl"))
    assert "version" in caught.value.message_dict
    assert ModelRun.objects.count() == 1
