"""Trace intervals computed off the request path (``trace_intervals``) against the live
figures of the same question (``quality_traces_process`` / ``derive_question``)."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest

from analytics.indicators import NO_LAYOUT, off_diagonal, with_others
from analytics.intervals import evidence_text, interval_text
from analytics.metrics.traces import kappa_sda_from_counts
from analytics.models import QualitySnapshot, QualityState
from analytics.publishing import quality_publish
from analytics.sufficient_stats import ContinuousStats
from apps.annotations.exporting import provenance
from apps.annotations.models import Assignment
from apps.continuous.quality import (
    derive_question,
    quality_traces_process,
    trace_intervals,
    trace_study_figures,
)
from apps.continuous.services import gold_signal_save, trace_finish
from apps.items.models import Item
from tests.apps.continuous.conftest import TraceStudy, make_trace_study
from tests.factories import ItemFactory

pytestmark = pytest.mark.django_db

MEDIA_SECONDS = 40.0
SIGNAL_SECONDS = 15


def _trace(ts: TraceStudy, annotator: Any, item: Any, values: np.ndarray) -> None:
    """One finished trace of ``item`` sampled at 10 Hz."""
    times = np.round(np.arange(values.size) * 0.1, 6)
    recording = uuid.uuid4()
    for sequence, start in enumerate(range(0, times.size, 100)):
        part = slice(start, start + 100)
        ts.send(annotator, item, recording, sequence, times[part], values[part])
    trace_finish(annotator=annotator, recording_uuid=recording)


@pytest.fixture
def short_truth():
    """Three annotators trace a 40 s video whose hidden gold signal lasts 15 s (a signal
    shorter than the media), and the plain audio item."""
    ts = make_trace_study(n_annotators=3)
    t = np.arange(SIGNAL_SECONDS + 1)
    gold_signal_save(key="short-wave", rate_hz=1.0, values=0.5 + 0.4 * np.sin(t / 2.0))
    video = ItemFactory(
        study=ts.study,
        kind=Item.Kind.VIDEO,
        url="https://example.org/clip.mp4",
        text="",
        metadata={"duration": MEDIA_SECONDS, "signal": "short-wave"},
    )
    for position, user in enumerate(ts.annotators, start=100):
        Assignment.objects.create(study=ts.study, item=video, annotator=user, position=position)
    rng = np.random.default_rng(5)
    for item, seconds in ((video, MEDIA_SECONDS), (ts.audio_item, 20.0)):
        t = np.arange(0, seconds + 0.05, 0.1)
        for who, user in enumerate(ts.annotators):
            delay = 1.0 + who
            values = 0.5 + 0.4 * np.sin(np.maximum(t - delay, 0) / 2.0)
            values = np.clip(values + rng.normal(0, 0.02, t.size), 0, 1)
            _trace(ts, user, item, values)
    quality_traces_process(question_id=ts.question.pk)
    return ts, video


def test_trace_intervals_are_centred_on_the_live_figures_when_the_truth_is_shorter(
    short_truth,
):
    """The between-annotator figures use the traces' common length, not the truth's: each
    annotator's kappa_SDA with others and the pooled kappa_SDA carry the live value."""
    ts, _ = short_truth
    state = QualityState.objects.get(question=ts.question)
    live = derive_question(state, ts.question, layout=NO_LAYOUT)
    # the live figures unrounded, from the question's sufficient statistics
    stats = ContinuousStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
    pair_kappa = np.asarray(kappa_sda_from_counts(stats.signs), dtype=float)
    _, values = with_others(pair_kappa, stats.signs.sum(axis=(2, 3)), min_overlap=1)
    live_pooled = kappa_sda_from_counts(off_diagonal(stats.signs).sum(axis=(0, 1)))
    np.testing.assert_allclose(values, live.indicators["kappa_sda"], atol=1e-6)
    assert live_pooled == pytest.approx(live.study["pooled_kappa_sda"], abs=1e-6)
    found = trace_intervals(ts.question)
    assert found is not None
    kappa = found.per_annotator["kappa_sda"]
    assert np.isfinite(values).all()
    np.testing.assert_allclose(np.asarray(kappa.estimate), values, rtol=0, atol=1e-9)
    assert np.all((np.asarray(kappa.low) <= values) & (values <= np.asarray(kappa.high)))
    pooled = found.study["pooled_kappa_sda"]
    assert pooled.estimate == pytest.approx(live_pooled, abs=1e-9)
    assert pooled.low <= pooled.estimate <= pooled.high
    # the against-truth figures rest on the samples shared with the truth only
    assert np.asarray(found.per_annotator["kappa_truth"].n).tolist() == [1, 1, 1]  # gold items
    assert 0 < found.samples["kappa_truth"].max() <= SIGNAL_SECONDS
    assert found.samples["kappa_sda"].min() > SIGNAL_SECONDS  # the traces' common length


def test_kappa_with_truth_interval_is_centred_on_the_live_figure(short_truth):
    """kappa_SDA against the truth: the live figure (the mean over gold traces of
    ``item_calibration``) and the interval's estimate compare the same samples, each trace
    shifted by its lag with the padded samples dropped (the issue: "padded samples after a
    shift are dropped, not compared"); before, the live figure compared them (0.87 against
    an interval of [1.00, 1.00] for the trace 1 s late)."""
    ts, _ = short_truth
    state = QualityState.objects.get(question=ts.question)
    stats = ContinuousStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
    live = stats.column("kappa_truth_sum") / stats.column("kappa_truth_n")
    found = trace_intervals(ts.question)
    assert found is not None
    kappa = found.per_annotator["kappa_truth"]
    np.testing.assert_allclose(np.asarray(kappa.estimate), live, rtol=0, atol=1e-9)
    assert np.all((np.asarray(kappa.low) <= live) & (live <= np.asarray(kappa.high)))


def test_lag_corrected_kappa_with_others_is_shown_with_its_interval_everywhere(
    short_truth, settings, client
):
    """The lag-corrected kappa_SDA with others has no live value: once the intervals are
    computed it is an indicator whose value is its interval's estimate (the HAC interval of
    the aligned traces), with its evidence, on the dashboard, in the API and in the export,
    marked as computed with the intervals; before that it is not shown."""
    ts, _ = short_truth
    settings.QUALITY_INTERVAL_SECONDS = 0  # intervals never computed: no value to show
    quality_publish(question_id=ts.question.pk)
    before = QualitySnapshot.objects.filter(question=ts.question).latest("updated_at")
    assert "kappa_sda_aligned" not in before.indicators["values"]
    client.force_login(ts.study.created_by)
    page = f"/studies/{ts.study.pk}/quality/?question={ts.question.pk}"
    assert "lag-corrected (with the intervals)" not in client.get(page).content.decode()

    settings.QUALITY_INTERVAL_SECONDS = 120
    settings.QUALITY_MIN_EVIDENCE = 1
    quality_publish(question_id=ts.question.pk, rebuild=True)
    stored = QualitySnapshot.objects.filter(question=ts.question).latest("updated_at").indicators
    found = trace_intervals(ts.question)
    assert found is not None
    aligned = found.per_annotator["kappa_sda_aligned"]
    raw = np.asarray(stored["values"]["kappa_sda"], dtype=float)
    values = np.asarray(stored["values"]["kappa_sda_aligned"], dtype=float)
    entries = stored["intervals"]["kappa_sda_aligned"]
    np.testing.assert_allclose(values, np.asarray(aligned.estimate), atol=1e-6)
    np.testing.assert_allclose(values, [e[0] for e in entries], atol=0)
    # the traces lag 1, 2 and 3 s behind one signal: removing the lags raises agreement
    assert np.all(values > raw + 0.1)
    for entry, traces in zip(entries, stored["evidence"]["traces"], strict=True):
        assert entry[1] <= entry[0] <= entry[2]
        assert entry[3] == traces == 2
        assert 1 <= entry[4] <= entry[5]  # independent samples of the aligned steps
    html = client.get(page).content.decode()
    assert "Kappa with others, lag-corrected (with the intervals)" in html
    assert "computed with the intervals" in html
    for entry in entries:
        assert interval_text(entry) in html
        assert evidence_text(entry, "traces") in html
    url = f"/api/studies/{ts.study.pk}/questions/{ts.question.pk}/quality/"
    body = client.get(url).json()
    record = provenance(study=ts.study, curated=False, include_history=False, fmt="csv")
    exported = record["quality"][ts.question.key]["annotators"]
    for shown in (body["annotators"], exported):
        for k, row in enumerate(shown):
            figure = row["indicators"]["kappa_sda_aligned"]
            assert figure["value"] == entries[k][0]
            assert (figure["low"], figure["high"]) == (entries[k][1], entries[k][2])
            assert (figure["evidence"], figure["unit"]) == (2, "traces")
            assert figure["computed_with"] == "intervals"
            assert "computed_with" not in row["indicators"]["kappa_sda"]
    assert body["intervals"]["computed_at"]


def test_heatmap_tooltips_state_the_steps_each_pair_traced_together(short_truth, client):
    """The pair kappa_SDA heatmap's tooltips carry the pair's evidence from the stored
    overlap matrix: the time steps both traced, over the items they share."""
    ts, _ = short_truth
    quality_publish(question_id=ts.question.pk)
    snapshot = QualitySnapshot.objects.filter(question=ts.question).latest("updated_at")
    overlap = snapshot.matrices["overlap"]
    # two items at 1 Hz: 40 + 20 steps for every pair
    assert overlap[0][1] == overlap[1][2] == 60
    client.force_login(ts.study.created_by)
    html = client.get(f"/studies/{ts.study.pk}/quality/?question={ts.question.pk}").content
    names = [user.username for user in ts.annotators]
    page = html.decode()
    assert f"{names[0]} × {names[1]}: kappa" in page
    assert page.count("; 60 shared trace steps</title>") == 6  # the off-diagonal cells


def test_trace_study_figures_on_the_kept_annotators_only(short_truth):
    """Issue 23: the curated card showed the pooled kappa_SDA of every annotator beside files
    without the excluded one. ``trace_study_figures`` computes the dashboard's study figures
    once on the traces of the annotators kept: with none left out they are the dashboard's
    (``trace_intervals``); without annotator 2 they differ, and one annotator left has
    no figure at all."""
    ts, _ = short_truth
    state = QualityState.objects.get(question=ts.question)
    everyone = trace_study_figures(ts.question)
    dashboard = trace_intervals(ts.question)
    assert dashboard is not None
    assert (everyone["annotators"], everyone["traces"]) == (3, 6)
    for key in ("icc", "pooled_kappa_sda"):
        assert tuple(everyone["figures"][key])[:3] == tuple(dashboard.study[key])[:3]
    left = state.annotator_ids[2]
    kept = trace_study_figures(ts.question, left_out={left})
    assert (kept["annotators"], kept["traces"]) == (2, 4)
    assert kept["figures"]["pooled_kappa_sda"].estimate != pytest.approx(
        everyone["figures"]["pooled_kappa_sda"].estimate
    )
    alone = trace_study_figures(ts.question, left_out=set(state.annotator_ids[1:]))
    assert (alone["annotators"], alone["figures"]) == (1, {})
