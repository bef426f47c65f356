"""Services of pairwise preferences: record, replay, refusals, rebuild, the kappa floor."""

from __future__ import annotations

import math
import random
import tracemalloc
import uuid

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import connection

from apps.annotations.models import Assignment
from apps.items.services import items_bulk_create
from apps.preferences.models import Judgement, PairSession, clean_pairwise_settings
from apps.preferences.scheduling import PairScheduler
from apps.preferences.selectors import (
    annotator_reports,
    pair_state,
    question_scores,
    replays,
    sessions_with_pruning_stopped,
)
from apps.preferences.services import NOT_PENDING, judgement_record, pair_next
from apps.studies.models import Study
from apps.studies.services import study_set_status
from tests.apps.preferences.conftest import (
    answer_all,
    by_level,
    cycle_maker,
    make_pairwise_study,
)


def record(setup, annotator, a, b, outcome, key=None):
    return judgement_record(
        question=setup.question,
        annotator=annotator,
        item_a=a,
        item_b=b,
        outcome=outcome,
        idempotency_key=key or uuid.uuid4(),
    )


class TestSettings:
    def test_defaults(self):
        settings = clean_pairwise_settings({})
        assert settings.as_dict() == {
            "strict": False,
            "calibration_triplets": 10,
            "audit_rate": 0.1,
            "kappa_floor": 0.4,
            "batch_size": 0,
        }

    def test_errors_name_the_setting(self):
        with pytest.raises(ValidationError) as error:
            clean_pairwise_settings(
                {"strict": "yes", "calibration_triplets": -1, "audit_rate": 1, "typo": 1}
            )
        assert set(error.value.message_dict) == {
            "strict",
            "calibration_triplets",
            "audit_rate",
            "settings",
        }


class TestRecord:
    def test_ranks_truthfully_with_fewer_questions_than_pairs(self, db):
        setup = make_pairwise_study(
            n_items=8, settings={"calibration_triplets": 0, "audit_rate": 0.0}
        )
        annotator = setup.annotators[0]
        levels = {item.pk: k for k, item in enumerate(setup.items)}
        asked = answer_all(setup.question, annotator, by_level(levels))
        assert asked < math.comb(8, 2)
        assert asked <= math.ceil(math.log2(math.factorial(8))) + 2
        state = pair_next(question=setup.question, annotator=annotator)
        ranking = [group[0] for group in state.scheduler.ranking()]
        assert ranking == sorted(levels, key=levels.get, reverse=True)
        assert list(
            Judgement.objects.filter(annotator=annotator).values_list("sequence", flat=True)
        ) == list(range(1, asked + 1))
        assert state.session.completed_at is not None
        # A pure pairwise study: the ranking completes the annotator's assignments.
        assert not Assignment.objects.filter(annotator=annotator, completed_at=None).exists()
        assert Assignment.objects.filter(annotator=setup.annotators[1], completed_at=None).exists()

    def test_ties_merge_items(self, pairwise):
        annotator = pairwise.annotators[0]
        levels = {item.pk: k // 2 for k, item in enumerate(pairwise.items)}  # 0,0,1,1,2
        answer_all(pairwise.question, annotator, by_level(levels))
        state = pair_next(question=pairwise.question, annotator=annotator)
        assert [len(group) for group in state.scheduler.ranking()] == [1, 2, 2]

    def test_replay_returns_the_first_judgement(self, pairwise):
        annotator = pairwise.annotators[0]
        a, b = pair_next(question=pairwise.question, annotator=annotator).pending
        key = uuid.uuid4()
        first, created = record(pairwise, annotator, a, b, 1, key)
        assert created
        again, created_again = record(pairwise, annotator, a, b, 1, key)
        swapped, _ = record(pairwise, annotator, b, a, -1, key)  # the same answer, mirrored
        assert not created_again
        assert again.pk == swapped.pk == first.pk
        assert Judgement.objects.count() == 1

    def test_same_key_with_another_answer_is_refused(self, pairwise):
        annotator = pairwise.annotators[0]
        a, b = pair_next(question=pairwise.question, annotator=annotator).pending
        key = uuid.uuid4()
        record(pairwise, annotator, a, b, 1, key)
        with pytest.raises(ValidationError) as error:
            record(pairwise, annotator, a, b, -1, key)
        assert "idempotency_key" in error.value.message_dict
        assert Judgement.objects.count() == 1

    def test_a_pair_that_is_not_pending_is_refused(self, pairwise):
        annotator = pairwise.annotators[0]
        pending = pair_next(question=pairwise.question, annotator=annotator).pending
        other = next(
            (x.pk, y.pk)
            for x in pairwise.items
            for y in pairwise.items
            if x != y and {x.pk, y.pk} != set(pending)
        )
        with pytest.raises(ValidationError) as error:
            record(pairwise, annotator, *other, 1)
        assert error.value.messages == [NOT_PENDING]
        assert not Judgement.objects.exists()

    def test_strict_mode_refuses_ties(self, db):
        setup = make_pairwise_study(settings={"strict": True, "calibration_triplets": 0})
        annotator = setup.annotators[0]
        a, b = pair_next(question=setup.question, annotator=annotator).pending
        with pytest.raises(ValidationError) as error:
            record(setup, annotator, a, b, 0)
        assert "outcome" in error.value.message_dict
        record(setup, annotator, a, b, -1)
        assert Judgement.objects.get().outcome == -1

    def test_only_annotators_of_a_running_study_judge(self, pairwise):
        with pytest.raises(PermissionDenied):
            pair_next(question=pairwise.question, annotator=pairwise.manager)
        study_set_status(study=pairwise.study, status=Study.Status.CLOSED)
        pairwise.question.refresh_from_db()
        with pytest.raises(ValidationError):
            pair_next(question=pairwise.question, annotator=pairwise.annotators[0])

    def test_a_finished_ranking_takes_no_more_judgements(self, pairwise):
        annotator = pairwise.annotators[0]
        levels = {item.pk: k for k, item in enumerate(pairwise.items)}
        answer_all(pairwise.question, annotator, by_level(levels))
        a, b = pairwise.items[0].pk, pairwise.items[1].pk
        with pytest.raises(ValidationError, match="complete"):
            record(pairwise, annotator, a, b, 1)


class TestRebuild:
    # (1, False): sessions started before audit rule 2; (2, False): before the adaptive scheduler
    @pytest.mark.parametrize(("audit_rule", "adaptive"), [(1, False), (2, False), (2, True)])
    def test_rebuild_equals_a_live_scheduler(self, db, audit_rule, adaptive):
        setup = make_pairwise_study(n_items=7, settings={"calibration_triplets": 3})
        annotator = setup.annotators[0]
        levels = {item.pk: k % 4 for k, item in enumerate(setup.items)}
        answer = by_level(levels)
        session = pair_next(question=setup.question, annotator=annotator).session
        assert session.audit_rule == 2
        assert session.adaptive
        PairSession.objects.filter(pk=session.pk).update(audit_rule=audit_rule, adaptive=adaptive)
        replays.clear()
        session = PairSession.objects.get(pk=session.pk)
        live = PairScheduler(
            session.items,
            calibration_triplets=3,
            audit_rate=0.1,
            seed=session.seed,
            audit_rule=audit_rule,
            adaptive=adaptive,
        )
        for _ in range(6):
            state = pair_next(question=setup.question, annotator=annotator)
            assert state.pending == live.next_pair()
            assert pair_next(question=setup.question, annotator=annotator).pending == (
                state.pending
            )
            a, b = state.pending
            record(setup, annotator, a, b, answer(a, b))
            live.record(a, b, answer(a, b))
        rebuilt = pair_state(session=PairSession.objects.get(pk=session.pk))
        assert rebuilt.scheduler.judgements == live.judgements
        assert rebuilt.scheduler.ranking() == live.ranking()
        bound = math.inf if adaptive else math.comb(7, 2) - 6  # legacy: pairs never asked
        assert rebuilt.remaining == min(live.remaining_estimate(), bound)
        phases = list(Judgement.objects.order_by("sequence").values_list("phase", flat=True))
        assert phases == [j.kind for j in live.judgements]

    def test_items_and_settings_are_frozen_per_session(self, pairwise):
        annotator = pairwise.annotators[0]
        session = pair_next(question=pairwise.question, annotator=pairwise.annotators[0]).session
        pairwise.question.settings = {"strict": True}
        pairwise.question.save()
        assert pair_next(question=pairwise.question, annotator=annotator).session.pk == session.pk
        assert not pair_state(session=session).settings.strict
        assert session.items == [item.pk for item in pairwise.items]


def legacy_session(question, annotator) -> None:
    """Start the annotator's session as one started before the adaptive scheduler."""
    session = pair_next(question=question, annotator=annotator).session
    PairSession.objects.filter(pk=session.pk).update(adaptive=False)
    replays.clear()


class TestKappaFloor:
    def test_an_inconsistent_annotator_is_asked_every_pair_in_a_legacy_session(
        self, db, pinned_pair_seed
    ):
        setup = make_pairwise_study(
            n_items=7, settings={"calibration_triplets": 5, "kappa_floor": 0.4}
        )
        careless, careful = setup.annotators
        legacy_session(setup.question, careless)
        asked = answer_all(setup.question, careless, cycle_maker())
        session = PairSession.objects.get(annotator=careless)
        assert session.pruning_stopped_at is not None
        assert asked == math.comb(7, 2)  # every pair, once
        pairs = {
            frozenset((j.item_a_id, j.item_b_id))
            for j in Judgement.objects.filter(annotator=careless)
        }
        assert len(pairs) == asked
        assert list(sessions_with_pruning_stopped(question=setup.question)) == [session]

        levels = {item.pk: k for k, item in enumerate(setup.items)}
        asked_careful = answer_all(setup.question, careful, by_level(levels))
        assert asked_careful < math.comb(7, 2)
        reports = {r.username: r for r in annotator_reports(question=setup.question)}
        assert reports[careless.username].below_floor
        assert reports[careless.username].kappa < 0.4
        assert reports[careful.username].kappa == 1.0
        assert not reports[careful.username].below_floor

    def test_a_random_annotator_stops_early_and_is_flagged(self, db, pinned_pair_seed):
        setup = make_pairwise_study(n_items=40, n_annotators=1)
        (annotator,) = setup.annotators
        rng = random.Random(3)
        asked = answer_all(setup.question, annotator, lambda a, b: rng.choice((1, 0, -1)))
        session = PairSession.objects.get(annotator=annotator)
        assert session.pruning_stopped_at == asked  # stopped: no pair is pending any more
        assert asked < math.ceil(math.log2(math.factorial(40)))
        (report,) = annotator_reports(question=setup.question)
        assert report.below_floor
        assert report.remaining == 0


class TestScores:
    def test_count_scores_and_bradley_terry(self, pairwise):
        levels = {item.pk: k for k, item in enumerate(pairwise.items)}
        for annotator in pairwise.annotators:
            answer_all(pairwise.question, annotator, by_level(levels))
        scores = question_scores(question=pairwise.question)
        # Nobody ever beat the best item: the MLE does not exist and the fit is regularised.
        assert scores.regularised
        assert [row.item.pk for row in scores.rows] == sorted(levels, key=levels.get)[::-1]
        assert [row.rank for row in scores.rows] == [1, 2, 3, 4, 5]
        assert [row.counts[0] for row in scores.rows] == [4, 3, 2, 1, 0]
        assert [row.scales[1] for row in scores.rows] == [1, 0.75, 0.5, 0.25, 0]
        assert all(row.se > 0 for row in scores.rows)

    def test_no_judgements_no_strengths(self, pairwise):
        scores = question_scores(question=pairwise.question)
        assert scores.n_judgements == 0
        assert scores.rows == []


def test_a_session_without_items_takes_up_items_assigned_later(db):
    setup = make_pairwise_study(n_items=1, n_annotators=1)
    (annotator,) = setup.annotators
    assert pair_next(question=setup.question, annotator=annotator).pending is None
    items_bulk_create(
        study=setup.study, rows=[{"external_id": f"x{k}", "text": f"Text {k}"} for k in range(2)]
    )
    state = pair_next(question=setup.question, annotator=annotator)
    assert len(state.session.items) == 3
    assert state.pending is not None


class TestScale:
    def test_pruning_stopped_at_5000_items_lists_no_pairs(self, db, pinned_pair_seed):
        """Issue #10: once pruning stops, a request must not materialise all n(n-1)/2 pairs."""
        setup = make_pairwise_study(n_items=5000, n_annotators=1, settings={"kappa_floor": 0.9})
        (annotator,) = setup.annotators
        legacy_session(setup.question, annotator)
        answer = cycle_maker()
        for _ in range(40):
            state = pair_next(question=setup.question, annotator=annotator)
            if state.session.pruning_stopped_at is not None:
                break
            a, b = state.pending
            record(setup, annotator, a, b, answer(a, b))
        assert state.session.pruning_stopped_at == 31
        tracemalloc.start()
        try:
            state = pair_next(question=setup.question, annotator=annotator)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 50 * 2**20
        assert state.remaining == math.comb(5000, 2) - 31
        a, b = state.pending
        asked = {frozenset((j.item_a_id, j.item_b_id)) for j in Judgement.objects.all()}
        assert frozenset((a, b)) not in asked
        record(setup, annotator, a, b, 1)
        assert pair_next(question=setup.question, annotator=annotator).pending != (a, b)


@pytest.mark.django_db(transaction=True)
def test_no_request_replays_judgements_while_holding_the_write_lock(monkeypatch):
    """Issue #10: on SQLite every atomic block holds the write lock from BEGIN (IMMEDIATE).

    The replay of the stored judgements runs outside any transaction; the locked section of an
    answer records only the new judgement.
    """
    setup = make_pairwise_study(n_items=8, n_annotators=1, settings={"calibration_triplets": 2})
    (annotator,) = setup.annotators
    answer = by_level({item.pk: k % 3 for k, item in enumerate(setup.items)})
    in_transaction: list[bool] = []
    scheduler_record = PairScheduler.record

    def spy(self, *args):
        in_transaction.append(connection.in_atomic_block)
        return scheduler_record(self, *args)

    monkeypatch.setattr(PairScheduler, "record", spy)
    for _ in range(8):
        replays.clear()  # a cold process: every request replays the whole history
        in_transaction.clear()
        a, b = pair_next(question=setup.question, annotator=annotator).pending
        assert not any(in_transaction)
        replays.clear()
        in_transaction.clear()
        record(setup, annotator, a, b, answer(a, b))
        assert sum(in_transaction) <= 1
    assert len(in_transaction) == 8  # 7 replayed, the new answer recorded under the lock


def test_pooled_strengths_weigh_annotators_by_their_measured_reliability(db, pinned_pair_seed):
    setup = make_pairwise_study(n_items=8, settings={"calibration_triplets": 6})
    careful, careless = setup.annotators
    levels = {item.pk: k for k, item in enumerate(setup.items)}
    answer_all(setup.question, careful, by_level(levels))
    rng = random.Random(1)
    answer_all(setup.question, careless, lambda a, b: rng.choice((1, 0, -1)))
    scores = question_scores(question=setup.question)
    weights = dict(scores.annotator_weights)
    assert weights[careful.username] > 0.5 > weights[careless.username]
    assert scores.rows[0].item.pk == max(levels, key=levels.get)
