"""Indicator intervals of the continuous and pairwise kinds: computed by the quality
processing, stated in flags and carried by the API (as for categorical questions in
``test_intervals.py``)."""

from __future__ import annotations

import importlib
import re
import uuid

import numpy as np
import pytest
from django.apps import apps as django_apps
from django.test import Client
from statsmodels.stats.proportion import proportion_confint

from analytics.intervals import evidence_text, interval_text
from analytics.models import Flag, QualitySnapshot, QualityState
from analytics.pipeline import quality_sweep
from analytics.publishing import quality_publish
from analytics.sufficient_stats import PairwiseStats
from apps.annotations.exporting import provenance
from apps.annotations.models import Assignment
from apps.continuous.quality import quality_traces_process
from apps.continuous.services import trace_finish
from apps.preferences.models import Judgement
from apps.preferences.quality import quality_judgements_process
from apps.studies.models import Question, Study
from tests.analytics.test_intervals import assert_mean_t_interval
from tests.apps.continuous.conftest import AUDIO_SECONDS, GOLD_SECONDS, make_trace_study
from tests.apps.preferences.conftest import (
    answer_all,
    by_level,
    cycle_maker,
    make_pairwise_study,
)
from tests.factories import ItemFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def intervals_on(settings):
    settings.QUALITY_INTERVAL_SECONDS = 120
    settings.QUALITY_MIN_EVIDENCE = 1
    return settings


def _latest(question) -> QualitySnapshot:
    return QualitySnapshot.objects.filter(question=question).latest("updated_at")


def _trace(ts, annotator, item, values) -> None:
    times = np.round(np.arange(values.size) * 0.1, 6)
    rec = uuid.uuid4()
    for sequence, start in enumerate(range(0, times.size, 100)):
        part = slice(start, start + 100)
        ts.send(annotator, item, rec, sequence, times[part], values[part])
    trace_finish(annotator=annotator, recording_uuid=rec)


@pytest.fixture
def traced(intervals_on):
    """Three annotators trace the gold item and an audio item: two follow the truth (1 s
    late, a little noise), the last draws a random walk."""
    ts = make_trace_study(n_annotators=3)
    rng = np.random.default_rng(3)
    for item, seconds in ((ts.gold_item, GOLD_SECONDS), (ts.audio_item, AUDIO_SECONDS)):
        t = np.arange(0, seconds + 0.05, 0.1)
        signal = 0.5 + 0.4 * np.sin(np.maximum(t - 1.0, 0) / 3.0)
        for who, user in enumerate(ts.annotators):
            if who == 2:
                values = 0.5 + np.cumsum(rng.normal(0, 0.03, t.size))
            else:
                values = signal + rng.normal(0, 0.01, t.size)
            _trace(ts, user, item, np.clip(values, 0, 1))
    quality_traces_process(question_id=ts.question.pk)
    quality_publish(question_id=ts.question.pk)
    return ts


def test_trace_intervals_appear_after_processing(traced):
    stored = _latest(traced.question).indicators
    assert len(stored["annotators"]) == 3
    for key, evidence in (("kappa_sda", "traces"), ("kappa_truth", "gold_items")):
        entries = stored["intervals"][key]
        for k, (estimate, low, high, n, *_) in enumerate(entries):
            assert low <= estimate <= high
            assert n == stored["evidence"][evidence][k]  # in the indicator's unit, not steps
    good, random = stored["intervals"]["kappa_truth"][0], stored["intervals"]["kappa_truth"][2]
    assert good[1] > random[2]  # the truthful annotator's interval lies above the random one
    assert "icc" in stored["study"]["intervals"]["study"]


def test_trace_flag_states_the_interval(traced):
    stored = _latest(traced.question).indicators
    random = traced.annotators[2]
    entry = stored["intervals"]["kappa_truth"][stored["annotators"].index(random.pk)]
    flag = Flag.objects.get(question=traced.question, annotator=random, indicator="kappa_truth")
    assert flag.reason.startswith(f"kappa_SDA vs truth {interval_text(entry)}")
    assert flag.figures["high"] == pytest.approx(entry[2], abs=1e-4)


def test_api_quality_carries_trace_intervals(traced, client):
    question = traced.question
    client.force_login(traced.study.created_by)
    body = client.get(f"/api/studies/{traced.study.pk}/questions/{question.pk}/quality/").json()
    first = next(a for a in body["annotators"] if a["annotator"] == traced.annotators[0].pk)
    kappa = first["indicators"]["kappa_sda"]
    assert kappa["low"] <= kappa["value"] <= kappa["high"]
    assert (kappa["evidence"], kappa["unit"]) == (2, "traces")


@pytest.fixture
def judged(intervals_on, pinned_pair_seed):
    """Three annotators rank eight items: two truthfully, the last closing every cycle it can."""
    ps = make_pairwise_study(n_items=8, n_annotators=3, settings={"audit_rate": 0.0})
    levels = {item.pk: k for k, item in enumerate(ps.items)}
    for user in ps.annotators[:2]:
        answer_all(ps.question, user, by_level(levels))
    answer_all(ps.question, ps.annotators[2], cycle_maker())
    quality_judgements_process(question_id=ps.question.pk)
    quality_publish(question_id=ps.question.pk)
    return ps


def test_pairwise_intervals_appear_and_flag_states_them(judged, client):
    stored = _latest(judged.question).indicators
    entries = stored["intervals"]["transitivity_kappa"]
    assert len(entries) == 3
    for k, entry in enumerate(entries):
        if entry is not None:
            # a fully transitive annotator's replicates are all alike: no interval (issue 23)
            assert entry[1] is None or entry[1] <= entry[0] <= entry[2]
            assert entry[3] == stored["evidence"]["triplets"][k]
    cycler = judged.annotators[2]
    entry = entries[stored["annotators"].index(cycler.pk)]
    flag = Flag.objects.get(
        question=judged.question, annotator=cycler, indicator="transitivity_kappa"
    )
    assert flag.reason.startswith(f"transitivity kappa {interval_text(entry)}")
    client.force_login(judged.manager)
    url = f"/api/studies/{judged.study.pk}/questions/{judged.question.pk}/quality/"
    last = next(a for a in client.get(url).json()["annotators"] if a["annotator"] == cycler.pk)
    kappa = last["indicators"]["transitivity_kappa"]
    assert kappa["high"] == pytest.approx(entry[2], abs=1e-4)
    assert kappa["unit"] == "triplets"


@pytest.fixture
def audited(intervals_on, pinned_pair_seed):
    """Sort answers, audits (re-asked implied pairs) and ties from a consistent annotator
    with ties, a random one and one who closes every cycle it can."""
    ps = make_pairwise_study(n_items=9, n_annotators=3, settings={"audit_rate": 0.4})
    levels = {item.pk: k // 2 for k, item in enumerate(ps.items)}
    rng = np.random.default_rng(5)
    answer_all(ps.question, ps.annotators[0], by_level(levels))
    answer_all(ps.question, ps.annotators[1], lambda a, b: int(rng.integers(-1, 2)))
    answer_all(ps.question, ps.annotators[2], cycle_maker())
    quality_judgements_process(question_id=ps.question.pk)
    quality_publish(question_id=ps.question.pk)
    return ps


def test_pairwise_interval_is_centred_on_the_live_transitivity_kappa(audited):
    """The interval's estimate is the live figure, both counted from one reading of the kept
    judgements."""
    ps = audited
    stored = _latest(ps.question).indicators
    live = stored["values"]["transitivity_kappa"]
    entries = stored["intervals"]["transitivity_kappa"]
    assert sum(value is not None for value in live) >= 2
    for value, entry, triplets in zip(live, entries, stored["evidence"]["triplets"], strict=True):
        if value is None:
            continue
        assert entry[0] == pytest.approx(value, abs=1e-4)
        assert entry[3] == triplets


def test_trace_figures_state_the_independent_samples_they_rest_on(traced, client, settings):
    """Serially correlated steps: every trace figure and the ICC say how many independent
    samples they are worth, on the page, in the stored entry and in the API."""
    settings.QUALITY_MIN_TRACES = 2
    stored = _latest(traced.question).indicators
    entry = stored["intervals"]["kappa_sda"][0]
    *_, traces, effective, samples = entry
    assert traces == 2
    assert 1 <= effective <= samples
    icc = stored["study"]["intervals"]["study"]["icc"]
    assert 1 <= icc[4] < icc[5] == icc[3]  # smooth traces: far fewer than their samples
    client.force_login(traced.study.created_by)
    html = client.get(f"/studies/{traced.study.pk}/quality/").content.decode()
    assert f"about {effective:,.0f} independent samples of {samples:,}" in html
    assert f"about {icc[4]:,.0f} independent samples of {icc[5]:,}" in html
    url = f"/api/studies/{traced.study.pk}/questions/{traced.question.pk}/quality/"
    body = client.get(url).json()
    first = next(a for a in body["annotators"] if a["annotator"] == traced.annotators[0].pk)
    figure = first["indicators"]["kappa_sda"]
    assert (figure["effective_samples"], figure["samples"]) == (effective, samples)
    assert body["study"]["icc"]["effective_samples"] == icc[4]


def test_pairwise_kappa_with_others_has_its_interval_centred_on_the_live_figure(judged):
    stored = _latest(judged.question).indicators
    live = stored["values"]["outcome_kappa"]
    entries = stored["intervals"]["outcome_kappa"]
    assert sum(value is not None for value in live) == 3
    for value, entry, pairs in zip(live, entries, stored["evidence"]["pairs"], strict=True):
        assert entry[0] == pytest.approx(value, abs=1e-4)
        if pairs < 30:  # too few shared pairs for the delta method: "too few", not bounds
            assert entry[1] is None
            assert entry[2] is None
        else:
            assert entry[1] <= entry[0] <= entry[2]
        assert entry[3] == pairs


def test_pairwise_rates_have_wilson_intervals_with_their_evidence(audited, client):
    """Audit contradictions and the same-outcome share are proportions: Wilson's interval of
    the live counts (statsmodels as the oracle), ``n`` in audits and in comparisons with
    others (shared pairs x the others who judged them)."""
    ps = audited
    stored = _latest(ps.question).indicators
    # Calibration answers may contradict the closure too; the rate counts audits only.
    assert all(r is None or 0 <= r <= 1 for r in stored["values"]["contradiction_rate"])
    checked = 0
    for key, unit in (("contradiction_rate", "audits"), ("agreement", "comparisons")):
        live = stored["values"][key]
        entries = stored["intervals"][key]
        for value, entry, n in zip(live, entries, stored["evidence"][unit], strict=True):
            if value is None:
                assert entry is None
                continue
            low, high = proportion_confint(round(value * n), n, method="wilson")
            assert entry[0] == pytest.approx(value, abs=1e-4)
            assert entry[1:] == [pytest.approx(low, abs=1e-5), pytest.approx(high, abs=1e-5), n]
            checked += 1
    assert checked >= 4
    client.force_login(ps.manager)
    url = f"/api/studies/{ps.study.pk}/questions/{ps.question.pk}/quality/"
    first = client.get(url).json()["annotators"][0]["indicators"]
    assert first["agreement"]["unit"] == "comparisons"
    assert first["agreement"]["low"] <= first["agreement"]["value"] <= first["agreement"]["high"]
    assert first["contradiction_rate"]["unit"] == "audits"


def test_migration_drops_pairwise_states_and_the_sweep_recounts_them(audited):
    """States stored before audit contradictions were counted on audits only are dropped by
    the migration; the sweep finds the question behind and recounts from the judgements."""
    forget = importlib.import_module(
        "apps.preferences.migrations.0005_recount_audit_contradictions"
    ).forget_pairwise_states
    question = audited.question
    before = QualityState.objects.get(question=question)
    counted = PairwiseStats.from_bytes(before.stats, n_annotators=len(before.annotator_ids))
    forget(django_apps, None)
    assert not QualityState.objects.filter(question=question).exists()
    assert question.pk in quality_sweep()  # inline mode: dispatched and processed at once
    after = QualityState.objects.get(question=question)
    assert after.annotator_ids == before.annotator_ids
    recounted = PairwiseStats.from_bytes(after.stats, n_annotators=len(after.annotator_ids))
    for column in ("audits", "contradictions", "n_complete", "applied"):
        np.testing.assert_array_equal(recounted.column(column), counted.column(column))
    assert (recounted.column("contradictions") <= recounted.column("audits")).all()


def test_seconds_per_judgement_has_a_t_interval_of_the_kept_judgements(
    intervals_on, pinned_pair_seed, client
):
    """The mean time per judgement gets Student's t interval over the annotator's timed
    kept judgements (scipy as the oracle), ``n`` in timed judgements."""
    ps = make_pairwise_study(n_items=7, n_annotators=2, settings={"audit_rate": 0.0})
    levels = {item.pk: k for k, item in enumerate(ps.items)}
    for user in ps.annotators:
        answer_all(ps.question, user, by_level(levels))
    rng = np.random.default_rng(11)
    for judgement in Judgement.objects.filter(question=ps.question):
        judgement.time_spent_ms = None if rng.random() < 0.2 else int(rng.gamma(2.0, 900.0))
        judgement.save(update_fields=["time_spent_ms"])
    quality_judgements_process(question_id=ps.question.pk)
    quality_publish(question_id=ps.question.pk)
    stored = _latest(ps.question).indicators
    for k, user in enumerate(stored["annotators"]):
        seconds = [
            ms / 1000.0
            for ms in Judgement.objects.filter(question=ps.question, annotator_id=user)
            .exclude(time_spent_ms=None)
            .values_list("time_spent_ms", flat=True)
        ]
        assert_mean_t_interval(stored, "seconds_per_judgement", "timed_judgements", k, seconds)
    client.force_login(ps.manager)
    url = f"/api/studies/{ps.study.pk}/questions/{ps.question.pk}/quality/"
    figure = client.get(url).json()["annotators"][0]["indicators"]["seconds_per_judgement"]
    assert figure["unit"] == "timed_judgements"
    assert figure["low"] <= figure["value"] <= figure["high"]


def test_trace_lag_and_trend_f1_get_bootstrap_intervals_over_gold_traces(intervals_on):
    """Lag and trend F1 are means over the annotator's gold traces: a bootstrap over those
    traces, centred on the live figure, ``n`` in gold items; one gold trace gives no bounds."""
    ts = make_trace_study(n_annotators=2)
    second = ItemFactory(study=ts.study, metadata={"stimulus": "green", "signal": "test-wave"})
    third = ItemFactory(study=ts.study, metadata={"stimulus": "green", "signal": "test-wave"})
    for position, item in enumerate((second, third), start=100):
        Assignment.objects.create(
            study=ts.study, item=item, annotator=ts.annotators[0], position=position
        )
    t = np.arange(0, GOLD_SECONDS + 0.05, 0.1)
    for delay, item in ((1.0, ts.gold_item), (2.0, second), (0.5, third)):
        values = 0.5 + 0.4 * np.sin(np.maximum(t - delay, 0) / 3.0)
        _trace(ts, ts.annotators[0], item, values)
    _trace(ts, ts.annotators[1], ts.gold_item, 0.5 + 0.4 * np.sin(t / 3.0))
    quality_traces_process(question_id=ts.question.pk)
    quality_publish(question_id=ts.question.pk)
    stored = _latest(ts.question).indicators
    first = stored["annotators"].index(ts.annotators[0].pk)
    other = stored["annotators"].index(ts.annotators[1].pk)
    assert stored["evidence"]["gold_items"][first] == 3
    for key in ("lag", "trend_f1"):
        entry = stored["intervals"][key][first]
        assert entry[0] == pytest.approx(stored["values"][key][first], abs=1e-4)
        assert entry[1] <= entry[0] <= entry[2]
        assert entry[3] == 3
        alone = stored["intervals"][key][other]
        assert alone[0] == pytest.approx(stored["values"][key][other], abs=1e-4)
        assert alone[1:] == [None, None, 1]
    lag = stored["intervals"]["lag"][first]
    assert lag[1] < 1.0 < lag[2]  # the three traces lag 0.5, 1 and 2 s


def _shown_everywhere(
    study: Study, question: Question, key: str, unit: str, entry: list, client: Client
) -> None:
    """The study figure ``key`` with its stored interval ``entry``: on the dashboard as
    ``0.59 [0.48, 0.69]; 200 <unit>``, in the API's and the export's quality figures with its
    bounds and evidence, as categorical alpha is."""
    html = client.get(f"/studies/{study.pk}/quality/?question={question.pk}").content.decode()
    shown = re.sub(r"<[^>]+>", "", html)  # the card sets the interval in smaller type
    assert f"{interval_text(entry)}; {evidence_text(entry, unit)}" in shown
    url = f"/api/studies/{study.pk}/questions/{question.pk}/quality/"
    figure = client.get(url).json()["study"][key]
    record = provenance(study=study, curated=False, include_history=False, fmt="csv")
    exported = record["quality"][question.key]["study"][key]
    for shown in (figure, exported):
        assert shown["low"] == pytest.approx(entry[1], abs=1e-6)
        assert shown["high"] == pytest.approx(entry[2], abs=1e-6)
        assert (shown["evidence"], shown["unit"]) == (entry[3], unit)


def test_pooled_transitivity_kappa_has_its_jackknife_interval_everywhere(audited, client):
    """The study's pooled transitivity kappa: the item jackknife's interval centred on the
    live figure, ``n`` = every annotator's counted triplets, on the page, in the API and in
    the exports."""
    ps = audited
    stored = _latest(ps.question).indicators
    entry = stored["study"]["intervals"]["study"]["pooled_transitivity_kappa"]
    assert entry[0] == pytest.approx(stored["study"]["pooled_transitivity_kappa"], abs=1e-6)
    assert entry[1] < entry[0] < entry[2]
    assert entry[3] == sum(stored["evidence"]["triplets"]) > 0
    client.force_login(ps.manager)
    _shown_everywhere(ps.study, ps.question, "pooled_transitivity_kappa", "triplets", entry, client)


def test_pooled_kappa_sda_has_its_hac_interval_everywhere(traced, client):
    """The study's pooled kappa_SDA: the HAC interval of the summed tables, centred on the
    live figure, ``n`` in samples with the independent samples they are worth."""
    stored = _latest(traced.question).indicators
    entry = stored["study"]["intervals"]["study"]["pooled_kappa_sda"]
    assert entry[0] == pytest.approx(stored["study"]["pooled_kappa_sda"], abs=1e-6)
    assert entry[1] < entry[0] < entry[2]
    *_, samples, effective, again = entry
    assert samples == again
    assert 1 <= effective <= samples
    client.force_login(traced.study.created_by)
    _shown_everywhere(traced.study, traced.question, "pooled_kappa_sda", "samples", entry, client)
    html = client.get(f"/studies/{traced.study.pk}/quality/").content.decode()
    assert f"about {effective:,.0f} independent samples of {samples:,}" in html
