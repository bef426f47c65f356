"""Property: for pairwise and continuous questions too, the statistics kept live equal a
rebuild from scratch, whatever the order of judgements, recordings and re-recordings."""

from __future__ import annotations

import contextlib
import uuid

import numpy as np
import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analytics.models import QualityState
from analytics.sufficient_stats import ContinuousStats, PairwiseStats
from apps.continuous.services import trace_finish
from apps.preferences.models import Judgement
from apps.preferences.quality import quality_judgements_process
from apps.preferences.services import judgement_record, judgement_retract, pair_next
from tests.apps.continuous.conftest import AUDIO_SECONDS, GOLD_SECONDS, make_trace_study
from tests.apps.preferences.conftest import make_pairwise_study

pytestmark = pytest.mark.django_db
PROPERTY = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
UNDO = None


def _stored(question, stats_class):
    state = QualityState.objects.get(question=question)
    return stats_class.from_bytes(state.stats, n_annotators=len(state.annotator_ids))


@PROPERTY
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 2), st.sampled_from([1, 0, -1, UNDO]), st.booleans()),
        max_size=30,
    )
)
def test_live_pairwise_statistics_equal_a_rebuild(steps, django_capture_on_commit_callbacks):
    """Judgements and undos, each applied alone or left for a later update of any annotator."""
    setup = make_pairwise_study(
        n_items=5, n_annotators=3, settings={"calibration_triplets": 2, "audit_rate": 0.3}
    )
    for who, outcome, applied in steps:
        annotator = setup.annotators[who]
        with django_capture_on_commit_callbacks(execute=applied):
            if outcome is UNDO:
                with contextlib.suppress(ValidationError):  # nothing left to undo
                    judgement_retract(question=setup.question, annotator=annotator)
                continue
            pending = pair_next(question=setup.question, annotator=annotator).pending
            if pending is None:
                continue
            judgement_record(
                question=setup.question,
                annotator=annotator,
                item_a=pending[0],
                item_b=pending[1],
                outcome=outcome,
                idempotency_key=uuid.uuid4(),
            )
    quality_judgements_process(question_id=setup.question.pk)
    if not QualityState.objects.filter(question=setup.question).exists():
        assert not Judgement.objects.filter(question=setup.question).exists()
        return
    live = _stored(setup.question, PairwiseStats)
    call_command("rebuild_quality", str(setup.study.pk), stdout=None)
    rebuilt = _stored(setup.question, PairwiseStats)
    assert rebuilt.pairs.equals(live.pairs)
    assert np.allclose(rebuilt.per_annotator, live.per_annotator, equal_nan=True)


def _record(ts, annotator, item, seed: int) -> None:
    duration = GOLD_SECONDS if item == ts.gold_item else AUDIO_SECONDS
    times = np.round(np.arange(0, duration + 0.05, 0.1), 6)
    values = np.clip(np.cumsum(np.random.default_rng(seed).normal(0, 0.05, times.size)) + 0.5, 0, 1)
    rec = uuid.uuid4()
    for sequence, start in enumerate(range(0, times.size, 100)):
        part = slice(start, start + 100)
        ts.send(annotator, item, rec, sequence, times[part], values[part])
    trace_finish(annotator=annotator, recording_uuid=rec)


@PROPERTY
@given(
    steps=st.lists(
        st.tuples(st.integers(0, 2), st.booleans(), st.integers(0, 10**6)), min_size=1, max_size=6
    )
)
def test_live_trace_statistics_equal_a_rebuild(steps, django_capture_on_commit_callbacks):
    ts = make_trace_study(n_annotators=3, settings={"allow_redo": True})
    for who, gold, seed in steps:  # a repeated (annotator, item) is a re-recording
        item = ts.gold_item if gold else ts.audio_item
        with django_capture_on_commit_callbacks(execute=True):  # each finish applied alone
            _record(ts, ts.annotators[who], item, seed)
    live = _stored(ts.question, ContinuousStats)
    call_command("rebuild_quality", str(ts.study.pk), stdout=None)
    rebuilt = _stored(ts.question, ContinuousStats)
    assert np.allclose(rebuilt.signs, live.signs)
    assert np.allclose(rebuilt.per_annotator, live.per_annotator, equal_nan=True)
