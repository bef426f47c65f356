"""The model registry's pages in a real browser: a manager reads a run's DIC, BAE and plots."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import pytest
from django.db import connection
from playwright.sync_api import expect

from analytics.metrics import pairwise_kappa
from apps.models_registry.selectors import latest_evaluation
from apps.models_registry.services import Upload, model_run_register
from tests.apps.models_registry.simulation import (
    jsonl,
    prediction_rows,
    simulated_study,
    vector_rows,
    vectors_with_cosine,
)
from tests.apps.models_registry.traces import trace_rows, trace_study
from tests.browser.conftest import ARTIFACTS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
T = TypeVar("T")


@pytest.fixture
def registered_run(settings):
    """A plausible model: each annotator's own label 80% of the time, else the majority; its
    feature vectors are the kappa structure plus noise, its attention vectors noisier.

    Built in a worker thread: the import's on-commit quality rebuild pushes to the channel
    layer through ``async_to_sync``, which refuses to run beside Playwright's event loop.
    """
    return _in_thread(lambda: _register(settings.QUALITY_MIN_OVERLAP))


def _in_thread(build: Callable[[], T]) -> T:
    """Run ``build`` in a worker thread with its own database connection."""

    def run() -> T:
        try:
            return build()
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()


def _register(min_overlap: int):
    sim = simulated_study()
    rng = np.random.default_rng(11)
    majority = np.array([np.bincount(col, minlength=3).argmax() for col in sim.ratings.T])
    codes = np.where(rng.random(sim.ratings.shape) < 0.8, sim.ratings, majority)
    truth = pairwise_kappa(sim.ratings.astype(float), min_overlap=min_overlap)
    base = vectors_with_cosine(truth)

    def rows(noise: float) -> list[dict]:
        return vector_rows(sim, base + rng.normal(0, noise, base.shape))

    run = model_run_register(
        study=sim.study,
        question=sim.question,
        name="QuMAB-like",
        version="v2",
        created_by=sim.study.created_by,
        metadata={"epochs": 30},
        predictions=Upload(jsonl(prediction_rows(sim, codes)), "jsonl"),
        features=Upload(jsonl(rows(0.25)), "jsonl"),
        attention=Upload(jsonl(rows(0.5)), "jsonl"),
    )
    return sim, run


def _shown(value: float, interval: list[float]) -> str:
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def test_manager_reads_a_runs_figures_and_plots(open_page, sign_in, screenshot, registered_run):
    sim, run = registered_run
    figures = latest_evaluation(run=run).figures
    page = open_page()
    sign_in(page, sim.study.created_by.username)

    page.goto(f"/studies/{sim.study.pk}/models/sentiment/")
    expect(page.get_by_role("heading", name="Model runs of sentiment")).to_be_visible()
    table = page.locator(".mr-table")
    expect(table.get_by_role("link", name="QuMAB-like v2")).to_be_visible()
    expect(table.get_by_role("row", name="Consensus (DIC)")).to_contain_text(
        f"{figures['baselines']['dic_consensus']:.3f}"
    )
    screenshot(page, "model-registry-leaderboard")

    table.get_by_role("link", name="QuMAB-like v2").click()
    expect(page.get_by_role("heading", name="QuMAB-like v2")).to_be_visible()
    # each figure with its 95 % interval (item bootstrap)
    expect(page.locator("#figure-dic")).to_have_text(
        _shown(figures["dic"], figures["dic_interval"])
    )
    for level, kind in (("feature", "feature"), ("region", "attention")):
        expect(page.locator(f"#figure-bae-{level}")).to_have_text(
            _shown(figures["bae"][kind], figures["bae_interval"][kind])
        )
    expect(page.locator("#figure-evidence")).to_contain_text(f"{figures['n_items']} items")
    expect(page.get_by_role("img", name="Pairwise agreement of the predictions")).to_be_visible()
    expect(page.get_by_role("img", name="Annotators' pairwise agreement")).to_be_visible()
    expect(page.locator("svg.mr-heatmap rect[fill]")).to_have_count(2 * (64 + 6))
    maps = page.locator("svg.mr-map")
    expect(maps).to_have_count(6)  # feature, region, predicted labels: truth and model each
    expect(maps.first.locator(".mr-point")).to_have_count(len(sim.usernames))
    for svg in page.locator("svg.mr-heatmap, svg.mr-map").all():
        box = svg.bounding_box()
        assert box is not None
        assert min(box["width"], box["height"]) > 200
    screenshot(page, "model-registry-run")
    for heading, name in (("dic-heading", "heatmaps"), ("bae-heading", "maps")):
        section = page.locator(f"section:has(#{heading})")
        section.screenshot(path=str(ARTIFACTS / f"model-registry-run-{name}.png"))


def _trace_run():
    """A continuous study and a model whose traces are the annotators' own, smoothed."""
    tsim = trace_study()
    kernel = np.ones(3) / 3
    smoothed = {
        cell: np.convolve(np.pad(trace, 1, mode="edge"), kernel, mode="valid")
        for cell, trace in tsim.traces.items()
    }
    run = model_run_register(
        study=tsim.study,
        question=tsim.question,
        name="trace-model",
        version="v1",
        created_by=tsim.study.created_by,
        predictions=Upload(jsonl(trace_rows(tsim, smoothed)), "jsonl"),
    )
    return tsim, run


def test_trace_run_page(open_page, sign_in, screenshot):
    tsim, run = _in_thread(_trace_run)
    figures = latest_evaluation(run=run).figures
    page = open_page()
    sign_in(page, tsim.study.created_by.username)
    page.goto(f"/studies/{tsim.study.pk}/models/runs/{run.pk}/")
    expect(page.locator("#figure-dic")).to_have_text(
        _shown(figures["dic"], figures["dic_interval"])
    )
    expect(page.get_by_text("kappa_SDA (≤ 0 darkest)").first).to_be_visible()
    expect(page.locator("svg.mr-heatmap")).to_have_count(2)
    expect(page.locator("svg.mr-map")).to_have_count(2)
    screenshot(page, "model-registry-trace-run")


def test_manager_uploads_a_run_then_compares_it(open_page, sign_in, screenshot, registered_run):
    sim, run = registered_run
    page = open_page()
    sign_in(page, sim.study.created_by.username)
    page.goto(f"/studies/{sim.study.pk}/models/sentiment/")
    form = page.locator("form:has(#id_predictions)")
    form.get_by_label("Name").fill("oracle")
    form.get_by_label("Version").fill("1")
    form.get_by_label("Predictions").set_input_files(
        {"name": "bad.txt", "mimeType": "text/plain", "buffer": b"{}"}
    )
    form.get_by_role("button", name="Upload and evaluate").click()
    expect(page.locator("form:has(#id_predictions)")).to_contain_text("Cannot tell the format")

    form = page.locator("form:has(#id_predictions)")
    form.get_by_label("Name").fill("oracle")
    form.get_by_label("Predictions").set_input_files(
        {
            "name": "oracle.jsonl",
            "mimeType": "application/jsonl",
            "buffer": jsonl(prediction_rows(sim, sim.ratings)).getvalue(),
        }
    )
    form.get_by_role("button", name="Upload and evaluate").click()
    expect(
        page.get_by_text("Registered oracle 1; evaluating it in the background.")
    ).to_be_visible()
    table = page.locator(".mr-table")
    expect(table.get_by_role("link", name="oracle 1", exact=True)).to_be_visible()
    # evaluated after the commit (inline in the tests): once done, no "evaluating…" is left
    expect(page.locator("#mr-evaluating")).to_have_count(0, timeout=60_000)

    page.get_by_label("Compare oracle 1").check()
    page.get_by_label("Compare QuMAB-like v2").check()
    page.get_by_role("button", name="Compare the two ticked runs").click()
    expect(page.get_by_role("heading", name="Compare runs of sentiment")).to_be_visible()
    dic = page.locator("#compare-table tbody tr").first  # DIC, then BAE
    expect(dic).to_contain_text("DIC")
    expect(dic).to_contain_text("0.000")
    figures = latest_evaluation(run=run).figures
    expect(dic).to_contain_text(f"{figures['dic']:.3f}")
    heatmaps = page.locator("svg.mr-heatmap")
    expect(heatmaps).to_have_count(2)
    first, second = (heatmaps.nth(i).bounding_box() for i in range(2))
    assert first is not None
    assert second is not None
    assert second["x"] > first["x"] + first["width"] / 2  # side by side, not stacked
    screenshot(page, "model-registry-compare")
