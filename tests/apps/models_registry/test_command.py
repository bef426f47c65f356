"""``manage.py register_model_run``: success prints DIC/BAE; errors exit 2 and store nothing."""

from __future__ import annotations

import csv
import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from apps.models_registry.models import ModelRun
from tests.apps.models_registry.simulation import LABELS, prediction_rows

pytestmark = pytest.mark.django_db


def _write_csv(path, rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _args(sim, predictions, *extra: str) -> list[str]:
    return [
        "register_model_run",
        "--study", str(sim.study.pk),
        "--question", "sentiment",
        "--name", "qumab",
        "--version", "v1",
        "--predictions", str(predictions),
        *extra,
    ]  # fmt: skip


def test_registers_and_prints_dic_and_bae(sim, tmp_path):
    predictions = tmp_path / "predictions.csv"
    _write_csv(predictions, prediction_rows(sim, sim.ratings))
    features = tmp_path / "features.npz"
    np.savez(
        features,
        annotator=np.array(sim.usernames),
        vector=np.eye(len(sim.usernames)),
    )
    out = StringIO()
    call_command(
        *_args(sim, predictions, "--features", str(features), "--metadata", '{"seed": 1}'),
        stdout=out,
    )
    run = ModelRun.objects.get()
    assert run.metadata == {"seed": 1}
    assert out.getvalue().startswith(f"registered run {run.pk} (qumab v1): DIC 0.000, BAE feature")


def test_errors_exit_2_with_line_numbers_on_stderr(sim, tmp_path):
    predictions = tmp_path / "predictions.jsonl"
    rows = prediction_rows(sim, sim.ratings)[:3]
    rows[1]["label"] = "furious"
    rows[2]["annotator"] = "nobody"
    predictions.write_text("".join(json.dumps(row) + "\n" for row in rows))
    err = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command(*_args(sim, predictions), stderr=err)
    assert caught.value.returncode == 2
    assert str(caught.value) == "2 error(s); nothing was registered."
    assert err.getvalue().splitlines() == [
        f"predictions: line 2, field label: 'furious' is not a label of 'sentiment'; "
        f"choose from {', '.join(LABELS)}.",
        "predictions: line 3, field annotator: 'nobody' is not an annotator of the study.",
    ]
    assert not ModelRun.objects.exists()


def test_bad_metadata_or_extension_exit_2(sim, tmp_path):
    predictions = tmp_path / "predictions.txt"
    predictions.write_text("x")
    with pytest.raises(CommandError) as caught:
        call_command(*_args(sim, predictions))
    assert caught.value.returncode == 2
    with pytest.raises(CommandError) as caught:
        call_command(*_args(sim, predictions, "--metadata", "[1]"))
    assert caught.value.returncode == 2
    assert not ModelRun.objects.exists()
