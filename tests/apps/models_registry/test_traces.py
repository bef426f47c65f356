"""Model runs on a continuous question: traces predicted per annotator, kappa_SDA matrices."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.exceptions import ValidationError

from apps.models_registry.models import ModelRun, TracePrediction
from apps.models_registry.selectors import latest_evaluation
from apps.models_registry.services import Upload, model_run_register
from tests.apps.models_registry.simulation import jsonl
from tests.apps.models_registry.traces import SECONDS, TraceSimulation, trace_rows, trace_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def tsim(db) -> TraceSimulation:
    return trace_study()


def _register(tsim: TraceSimulation, traces: dict, name: str = "m") -> ModelRun:
    return model_run_register(
        study=tsim.study,
        question=tsim.question,
        name=name,
        version="1",
        created_by=tsim.study.created_by,
        predictions=Upload(jsonl(trace_rows(tsim, traces)), "jsonl"),
    )


def test_a_model_returning_each_annotators_own_trace_has_dic_0(tsim):
    run = _register(tsim, tsim.traces)
    figures = latest_evaluation(run=run).figures
    assert TracePrediction.objects.filter(run=run).count() == len(tsim.traces)
    assert figures["measure"] == "kappa_SDA"
    assert figures["dic"] == pytest.approx(0.0, abs=1e-6)  # float32 storage of both
    assert figures["pearson_mean"] == pytest.approx(1.0, abs=1e-6)
    assert figures["accuracy_mean"] is None
    # M is kappa_SDA pooled over the items: the mirrored groups disagree on every trend
    m = np.array(figures["m_true"], dtype=float)
    assert m[0, 1] > 0.3
    assert m[0, 2] < 0.0
    base = figures["baselines"]
    assert 0.5 < base["dic_random"] < 1.0
    # with two groups tracing mirror images, one trace for everyone is worse than chance
    assert base["dic_consensus"] > base["dic_random"]


def test_consensus_model_lands_on_the_consensus_row(tsim):
    mean = {i: np.mean([tsim.traces[k, i] for k in range(4)], axis=0) for i in range(6)}
    run = _register(tsim, {(k, i): mean[i] for k, i in tsim.traces}, name="consensus")
    figures = latest_evaluation(run=run).figures
    assert figures["dic"] == pytest.approx(figures["baselines"]["dic_consensus"], abs=1e-4)


def test_trace_length_and_values_are_checked(tsim):
    bad = dict(tsim.traces)
    bad[0, 0] = tsim.traces[0, 0][:-3]
    bad[1, 0] = np.append(tsim.traces[1, 0][:-1], np.inf)
    with pytest.raises(ValidationError) as caught:
        _register(tsim, bad)
    assert caught.value.message_dict["predictions"] == [
        f"line 1, field trace: {SECONDS - 2} samples; the annotators' traces of this item have "
        f"{SECONDS + 1} (at 1 Hz).",
        f"line 2, field trace: Position {SECONDS} is inf; give finite numbers.",
    ]
    assert not ModelRun.objects.exists()
