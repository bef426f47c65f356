"""Model runs on a continuous question: traces predicted per annotator, kappa_SDA matrices."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.exceptions import ValidationError

from apps.models_registry.models import ModelRun, TracePrediction
from apps.models_registry.selectors import latest_evaluation
from apps.models_registry.services import Upload
from tests.apps.models_registry.simulation import jsonl, register_and_evaluate
from tests.apps.models_registry.traces import SECONDS, TraceSimulation, trace_rows, trace_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def tsim(db) -> TraceSimulation:
    return trace_study()


def _register(tsim: TraceSimulation, traces: dict, name: str = "m") -> ModelRun:
    return register_and_evaluate(
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
    assert 0.9 < base["dic_random"] < 1.2  # no relation reproduced: about 1
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


def _random_traces(rng, n_annotators=4, n_items=12, length=30, missing=0.2) -> dict:
    """Random-walk traces of random (annotator, item) cells, items of their own lengths."""
    lengths = rng.integers(length - 5, length + 5, n_items)
    return {
        (k, i): np.cumsum(rng.normal(size=lengths[i]))
        for k in range(n_annotators)
        for i in range(n_items)
        if rng.random() > missing
    }


def test_trace_bootstrap_replicate_equals_pooled_kappa_sda_of_duplicated_items():
    # the oracle: pooled_kappa_sda of a trace set where item i is written out w_i times
    from analytics.metrics import bootstrap_weights, dic, dic_bae_bootstrap_sda
    from apps.models_registry.evaluation import item_pair_tables, pooled_kappa_sda

    rng = np.random.default_rng(4)
    human = _random_traces(rng)
    model = {cell: trace + rng.normal(0, 1.5, trace.size) for cell, trace in human.items()}
    th, tm = item_pair_tables(human, tol=0.0), item_pair_tables(model, tol=0.0)
    np.testing.assert_array_equal(th.item, tm.item)
    res = dic_bae_bootstrap_sda(
        th.item, th.first, th.second, th.tables, tm.tables,
        traced=th.traced, n_annotators=4, n_boot=4, seed=9,
    )  # fmt: skip
    items = np.unique(th.traced[0])
    assert res.n_items == items.size
    assert res.n_cells == len(human)
    full = dic(
        pooled_kappa_sda(human, n_annotators=4, tol=0.0),
        pooled_kappa_sda(model, n_annotators=4, tol=0.0),
    )
    assert res.dic.estimate == pytest.approx(full, abs=1e-12)
    weights = bootstrap_weights(items.size, n_boot=4, seed=9).astype(int)
    for b in range(4):

        def repeated(traces: dict, w=weights[b]) -> dict:
            position = {item: j for j, item in enumerate(items)}
            return {
                (k, (i, copy)): trace
                for (k, i), trace in traces.items()
                for copy in range(w[position[i]])
            }

        m_true = pooled_kappa_sda(_renumber(repeated(human)), n_annotators=4, tol=0.0)
        m_pred = pooled_kappa_sda(_renumber(repeated(model)), n_annotators=4, tol=0.0)
        assert res.dic.replicates[b] == pytest.approx(dic(m_true, m_pred), abs=1e-12)


def _renumber(traces: dict) -> dict:
    """Cells keyed by (annotator, (item, copy)) -> (annotator, integer item id)."""
    ids = {key: n for n, key in enumerate(sorted({i for _, i in traces}))}
    return {(k, ids[i]): trace for (k, i), trace in traces.items()}


def test_trace_run_carries_dic_interval_and_items(tsim):
    rng = np.random.default_rng(0)
    noisy = {cell: trace + rng.normal(0, 0.05, trace.size) for cell, trace in tsim.traces.items()}
    figures = latest_evaluation(run=_register(tsim, noisy)).figures
    low, high = figures["dic_interval"]
    assert low <= figures["dic"] <= high
    assert low < high
    assert figures["n_items"] == 6
    assert figures["n_cells"] == len(tsim.traces)
