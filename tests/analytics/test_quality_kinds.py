"""Live quality of pairwise and continuous questions: statistics, flags, hooks, page, rebuild."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse

from analytics.dashboard import dashboard_questions
from analytics.models import Flag, QualitySnapshot, QualityState
from analytics.selectors import latest_snapshot
from analytics.sufficient_stats import ContinuousStats, PairwiseStats
from apps.continuous.services import trace_finish
from apps.preferences.models import PairSession
from apps.preferences.selectors import replays
from apps.preferences.services import judgement_record, pair_next
from tests.apps.continuous.conftest import AUDIO_SECONDS, GOLD_SECONDS, make_trace_study
from tests.apps.preferences.conftest import (
    answer_all,
    by_level,
    cycle_maker,
    make_pairwise_study,
)

pytestmark = pytest.mark.django_db


# --------------------------------------------------------------------------- pairwise


@pytest.fixture
def cycling_study(pinned_pair_seed, django_capture_on_commit_callbacks):
    """Seven items: one annotator closes cycles whenever they can, one answers truthfully."""
    setup = make_pairwise_study(n_items=7, settings={"calibration_triplets": 5, "kappa_floor": 0.4})
    careless, careful = setup.annotators
    levels = {item.pk: k for k, item in enumerate(setup.items)}
    # A session started before the adaptive scheduler: below the floor, every pair is asked
    # (an adaptive session ends early instead, before enough triplets for a flag).
    session = pair_next(question=setup.question, annotator=careless).session
    PairSession.objects.filter(pk=session.pk).update(adaptive=False)
    replays.clear()
    with django_capture_on_commit_callbacks(execute=True):
        answer_all(setup.question, careless, cycle_maker())
        answer_all(setup.question, careful, by_level(levels))
    return setup


def test_cycling_annotator_is_flagged_on_transitivity_with_the_floor(cycling_study):
    setup = cycling_study
    careless, careful = setup.annotators
    flags = list(Flag.objects.filter(question=setup.question, active=True))
    assert [(f.annotator_id, f.indicator) for f in flags] == [(careless.pk, "transitivity_kappa")]
    reason = flags[0].reason
    assert reason.startswith("transitivity kappa ")
    assert "triplets" in reason
    assert reason.endswith("below the floor 0.40")
    snapshot = latest_snapshot(question=setup.question)
    row = snapshot.indicators["annotators"].index
    values = snapshot.indicators["values"]
    assert values["transitivity_kappa"][row(careless.pk)] < 0.4
    assert values["transitivity_kappa"][row(careful.pk)] == 1.0
    assert values["judgements"][row(careless.pk)] == 21  # pruning stopped: every pair asked
    assert values["pruning_stopped_at"][row(careless.pk)] is not None
    assert values["pruning_stopped_at"][row(careful.pk)] is None
    assert snapshot.indicators["study"]["pooled_transitivity_kappa"] is not None
    assert len(snapshot.matrices["kappa"]) == 2


def test_nobody_flagged_with_too_few_triplets(pinned_pair_seed, django_capture_on_commit_callbacks):
    # a fixed session seed, as in cycling_study: whether the cycle-maker closes a cycle among
    # four items depends on the order the scheduler asks the pairs in
    setup = make_pairwise_study(n_items=4, settings={"calibration_triplets": 4, "kappa_floor": 0.4})
    with django_capture_on_commit_callbacks(execute=True):
        for annotator in setup.annotators:
            answer_all(setup.question, annotator, cycle_maker())
    snapshot = latest_snapshot(question=setup.question)
    assert max(snapshot.indicators["evidence"]["triplets"]) < 10
    assert min(snapshot.indicators["values"]["transitivity_kappa"]) < 0.4
    assert not Flag.objects.filter(question=setup.question).exists()


def test_a_judgement_publishes_only_after_its_commit(django_capture_on_commit_callbacks):
    setup = make_pairwise_study(settings={"calibration_triplets": 0, "audit_rate": 0.0})
    annotator = setup.annotators[0]
    a, b = pair_next(question=setup.question, annotator=annotator).pending
    with django_capture_on_commit_callbacks(execute=True):
        judgement_record(
            question=setup.question,
            annotator=annotator,
            item_a=a,
            item_b=b,
            outcome=1,
            idempotency_key=uuid.uuid4(),
            time_spent_ms=1500,
        )
        assert not QualitySnapshot.objects.filter(question=setup.question).exists()
    snapshot = latest_snapshot(question=setup.question)
    assert snapshot.indicators["values"]["judgements"] == [1]
    assert snapshot.indicators["values"]["seconds_per_judgement"] == [1.5]


def test_rebuild_reproduces_the_live_pairwise_statistics(cycling_study):
    question = cycling_study.question
    state = QualityState.objects.get(question=question)
    live = PairwiseStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
    call_command("rebuild_quality", str(cycling_study.study.pk), stdout=None)
    state.refresh_from_db()
    rebuilt = PairwiseStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
    assert rebuilt.pairs.equals(live.pairs)
    assert np.array_equal(rebuilt.per_annotator, live.per_annotator)
    assert live.pairs.confusion.sum() > 0


# --------------------------------------------------------------------------- continuous


def _record(ts, annotator, item, values_at) -> None:
    """Trace ``item`` at 10 Hz with ``values_at(times)`` and finish the recording."""
    duration = GOLD_SECONDS if item == ts.gold_item else AUDIO_SECONDS
    times = np.round(np.arange(0, duration + 0.05, 0.1), 6)
    values = np.clip(values_at(times), 0.0, 1.0)
    rec = uuid.uuid4()
    for sequence, start in enumerate(range(0, times.size, 50)):
        part = slice(start, start + 50)
        ts.send(annotator, item, rec, sequence, times[part], values[part])
    trace_finish(annotator=annotator, recording_uuid=rec)


@pytest.fixture
def noisy_trace_study(settings, django_capture_on_commit_callbacks):
    """Five annotators trace a gold and an audio item: four follow the signals about 1 s
    late, the last one moves the slider at random."""
    settings.QUALITY_MIN_TRACES = 2
    ts = make_trace_study(n_annotators=5, settings={"allow_redo": True})
    rng = np.random.default_rng(3)
    gold = lambda t, lag: 0.5 + 0.4 * np.sin((t - lag) / 3.0)  # noqa: E731
    audio = lambda t, lag: 0.5 + 0.3 * np.sin((t - lag) / 2.0)  # noqa: E731
    with django_capture_on_commit_callbacks(execute=True):
        for k, annotator in enumerate(ts.annotators[:-1]):
            lag = 0.8 + 0.2 * k
            _record(ts, annotator, ts.gold_item, lambda t, lag=lag: gold(t, lag))
            _record(ts, annotator, ts.audio_item, lambda t, lag=lag: audio(t, lag))
        for item in (ts.gold_item, ts.audio_item):
            _record(ts, ts.annotators[-1], item, lambda t: rng.random(t.size))
    return ts


def test_random_tracer_is_flagged_with_reasons(noisy_trace_study):
    ts = noisy_trace_study
    noisy = ts.annotators[-1]
    flags = {f.indicator: f for f in Flag.objects.filter(question=ts.question, active=True)}
    assert {f.annotator_id for f in flags.values()} == {noisy.pk}
    assert "kappa_truth" in flags
    assert flags["kappa_truth"].reason.startswith("kappa_SDA vs truth ")
    assert flags["kappa_truth"].reason.endswith("1 gold items; below the floor 0.20")
    assert "kappa_sda" in flags
    assert flags["kappa_sda"].reason.startswith("kappa_SDA with others ")
    snapshot = latest_snapshot(question=ts.question)
    values = snapshot.indicators["values"]
    assert values["traces_done"] == [2] * 5
    assert all(0.5 < lag < 1.6 for lag in values["lag"][:-1])
    assert min(values["kappa_sda"][:-1]) > values["kappa_sda"][-1]


def test_rebuild_reproduces_the_live_trace_statistics(noisy_trace_study):
    question = noisy_trace_study.question
    state = QualityState.objects.get(question=question)
    live = ContinuousStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
    call_command("rebuild_quality", str(noisy_trace_study.study.pk), stdout=None)
    state.refresh_from_db()
    rebuilt = ContinuousStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
    assert np.allclose(rebuilt.signs, live.signs)
    assert np.allclose(rebuilt.per_annotator, live.per_annotator)


def test_a_re_recorded_trace_replaces_the_old_one(
    noisy_trace_study, django_capture_on_commit_callbacks
):
    ts = noisy_trace_study
    noisy = ts.annotators[-1]
    with django_capture_on_commit_callbacks(execute=True):
        _record(ts, noisy, ts.gold_item, lambda t: 0.5 + 0.4 * np.sin((t - 1.0) / 3.0))
    values = latest_snapshot(question=ts.question).indicators["values"]
    assert values["traces_done"] == [2] * 5
    assert values["kappa_truth"][-1] > 0.2
    assert not Flag.objects.filter(
        question=ts.question, indicator="kappa_truth", active=True
    ).exists()


# --------------------------------------------------------------------------- the page


def test_dashboard_lists_and_renders_both_kinds(client, cycling_study, noisy_trace_study):
    for setup, names in (
        (
            cycling_study,
            ("Judgements", "Transitivity kappa", "Pooled transitivity kappa", "own share of"),
        ),
        (noisy_trace_study, ("Traces", "kappa_SDA vs truth", "Lag behind truth (s)")),
    ):
        assert dashboard_questions(setup.study) == [setup.question]
        client.force_login(setup.study.created_by)
        url = reverse("analytics:dashboard", args=[setup.study.pk])
        response = client.get(url, {"question": setup.question.pk})
        assert response.status_code == 200
        html = response.content.decode()
        for name in names:
            assert name in html
        assert 'id="quality-heatmap"' in html
        assert "Dawid-Skene" not in html
    assert 'id="quality-traces"' in html
    assert 'class="trace-overlay"' in html
    assert "truth" in html


def test_an_update_over_hundreds_of_changed_pairs_matches_the_rebuild():
    # A backlog of 600 changed pairs (a worker down for a while, judgements loaded in bulk)
    # once made one query with an OR of 1,200 conditions: SQLite refused it ("Expression tree
    # is too large") and the annotator's update failed again on every later judgement
    from itertools import combinations

    from apps.preferences.models import Judgement
    from apps.preferences.quality import quality_judgements_apply

    setup = make_pairwise_study(n_items=40, settings={"calibration_triplets": 0, "audit_rate": 0})
    first, second = setup.annotators
    pairs = list(combinations([item.pk for item in setup.items], 2))[:600]

    def judged(annotator, chosen, outcome):
        return [
            Judgement(
                question=setup.question,
                annotator=annotator,
                sequence=k + 1,
                item_a_id=a,
                item_b_id=b,
                outcome=outcome,
                phase=Judgement.Phase.SORT,
                idempotency_key=uuid.uuid4(),
            )
            for k, (a, b) in enumerate(chosen)
        ]

    Judgement.objects.bulk_create(judged(second, pairs[::3], -1) + judged(first, pairs, 1))
    for annotator in (second, first):
        quality_judgements_apply(question_id=setup.question.pk, annotator_id=annotator.pk)
    state = QualityState.objects.get(question=setup.question)
    live = PairwiseStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
    assert live.pairs.confusion.sum() > 0
    call_command("rebuild_quality", str(setup.study.pk), stdout=None)
    state.refresh_from_db()
    rebuilt = PairwiseStats.from_bytes(state.stats, n_annotators=len(state.annotator_ids))
    assert rebuilt.pairs.equals(live.pairs)
    assert np.array_equal(rebuilt.per_annotator, live.per_annotator)
