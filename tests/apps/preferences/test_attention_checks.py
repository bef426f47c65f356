"""Hidden attention checks of pairwise questions: gold pairs with ``use="check"`` served to a
recruited participant among the scheduler's pairs, indistinguishable from them, stored as
judgements of phase ``check`` that are scored against the known order and left out of the
schedule, the quality statistics, the scores and the exports."""

from __future__ import annotations

import difflib
import re
import uuid
from collections.abc import Callable

import pytest
from django.urls import reverse

from analytics.models import Flag
from analytics.selectors import latest_snapshot
from apps.annotations.models import Assignment
from apps.items.models import Item
from apps.items.services import items_bulk_create
from apps.preferences.exporting import judgement_rows
from apps.preferences.kind import PAIRWISE
from apps.preferences.models import Judgement, PairSession
from apps.preferences.selectors import (
    annotator_reports,
    consistency,
    judgement_progress,
    pair_state,
    question_scores,
    replays,
)
from apps.preferences.services import judgement_record, judgement_retract, pair_next
from apps.recruitment.indicators import GOLD_ACCURACY
from apps.recruitment.models import GoldAnswer, Participant
from apps.recruitment.selectors import gold_accuracy, payment_rows
from apps.recruitment.services import (
    gold_answer_set,
    participant_consent,
    participant_enter,
    participant_start_work,
    participant_training_finish,
    recruitment_update,
)
from apps.recruitment.sessions import SESSION_KEY
from apps.studies.models import Question, Study
from apps.studies.services import question_create, study_set_status
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db
N_REGULAR = 8
#: The gold pairs: (item, versus, outcome of item against versus).
GOLD_PAIRS = [("item-8", "item-9", 1), ("item-10", "item-11", -1)]
Answerer = Callable[[int, int], int]


def checks_study(*, check_rate: float = 0.5, **settings) -> tuple[Study, Question]:
    """A running pure pairwise study open to recruitment, with two gold check pairs."""
    study = StudyFactory()
    question = question_create(study=study, kind="pairwise", key="q", prompt="Better?")
    rows = [{"external_id": f"item-{n}", "text": f"Sentence {n}."} for n in range(N_REGULAR + 4)]
    items_bulk_create(study=study, rows=rows)
    study_set_status(study=study, status=Study.Status.RUNNING)
    recruitment_update(
        study=study,
        is_open=True,
        items_per_participant=N_REGULAR,
        check_rate=check_rate,
        max_participants=10,
        **settings,
    )
    items = {item.external_id: item for item in Item.objects.filter(study=study)}
    for item, versus, outcome in GOLD_PAIRS:
        gold_answer_set(
            item=items[item],
            question=question,
            value={"versus": versus, "outcome": outcome},
            use=GoldAnswer.Use.CHECK,
        )
    return study, question


def working(study: Study, pid: str) -> Participant:
    participant = participant_enter(recruitment=study.recruitment, platform_id=pid).participant
    participant_consent(participant=participant, agree=True)
    participant_training_finish(participant=participant)
    return participant_start_work(participant=participant)


def by_position(study: Study) -> Answerer:
    """A consistent annotator: the item with the smaller external number is better."""
    rank = {item.pk: int(item.external_id.split("-")[1]) for item in study.items.all()}
    return lambda a, b: 1 if rank[a] < rank[b] else -1


def gold_order(study: Study) -> dict[tuple[int, int], int]:
    """(item id, versus id) -> outcome, both orientations, of the gold pairs."""
    items = {item.external_id: item.pk for item in Item.objects.filter(study=study)}
    known = {}
    for item, versus, outcome in GOLD_PAIRS:
        known[(items[item], items[versus])] = outcome
        known[(items[versus], items[item])] = -outcome
    return known


def judge_all(
    question: Question,
    annotator,
    answer: Answerer,
    *,
    on_check: Answerer | None = None,
    limit: int | None = None,
) -> list[tuple[int, int, bool]]:
    """Answer every pair served (the first ``limit``); returns the pairs as served (A, B,
    served as a check)."""
    served: list[tuple[int, int, bool]] = []
    for _ in range(500):
        if len(served) == limit:
            return served
        state = pair_next(question=question, annotator=annotator)
        if state.pending is None:
            return served
        a, b = state.pending
        served.append((a, b, state.check))
        reply = on_check if state.check and on_check is not None else answer
        judgement_record(
            question=question,
            annotator=annotator,
            item_a=a,
            item_b=b,
            outcome=reply(a, b),
            idempotency_key=uuid.uuid4(),
        )
    raise AssertionError("the ranking never finished")


def test_a_pair_can_be_a_hidden_check_and_is_no_item_of_the_package():
    study, question = checks_study()
    assert GoldAnswer.objects.filter(question=question, use="check").count() == 2
    participant = working(study, "P1")
    assigned = set(
        Assignment.objects.filter(annotator=participant.user).values_list(
            "item__external_id", flat=True
        )
    )
    assert assigned == {f"item-{n}" for n in range(N_REGULAR)}


def test_checks_come_at_the_rate_on_both_sides_and_each_is_stored_as_a_check(pinned_pair_seed):
    study, question = checks_study(check_rate=0.5)
    participant = working(study, "P1")
    known = gold_order(study)
    served = judge_all(question, participant.user, by_position(study))
    checks = [(a, b) for a, b, check in served if check]
    scheduled = [(a, b) for a, b, check in served if not check]
    # about one check per two scheduler pairs (binomial, p = 0.5), each a gold pair
    assert 0.25 * len(scheduled) <= len(checks) <= 0.75 * len(scheduled)
    assert all(pair in known for pair in checks)
    # gold pairs are served on both sides, and both gold pairs are used
    golds = {item.pk for item in Item.objects.filter(external_id__in=["item-8", "item-10"])}
    assert {a in golds for a, _ in checks} == {True, False}
    assert {frozenset(pair) for pair in checks} == {frozenset(p) for p in known}
    stored = Judgement.objects.filter(annotator=participant.user)
    assert stored.checks().count() == len(checks)
    assert stored.data().count() == len(scheduled)
    # the ranking completed and no gold item entered the session's items
    session = PairSession.objects.get(annotator=participant.user)
    assert session.completed_at is not None
    assert not set(session.items) & {pk for pair in known for pk in pair}


def test_no_checks_for_staff_annotators_or_at_rate_zero(pinned_pair_seed):
    study, question = checks_study(check_rate=0.0)
    participant = working(study, "P1")
    served = judge_all(question, participant.user, by_position(study))
    assert served
    assert not any(check for _, _, check in served)
    assert not Judgement.objects.checks().exists()


def _normalised(html: str) -> str:
    """A page with what differs between any two pairs replaced: numbers, tokens, keys."""
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "CSRF", html)
    html = re.sub(r'"X-CSRFToken": "[^"]+"', "CSRF", html)
    html = re.sub(r'name="ticket" value="[^"]+"', "TICKET", html)  # the signed timing ticket
    html = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "UUID", html)
    html = re.sub(r"\d+", "N", html)
    return re.sub(r"\b(judgement|item)s\b", r"\1", html)  # "1 judgement" / "2 judgements"


def test_a_check_pair_looks_exactly_like_any_other_pair(client, pinned_pair_seed):
    study, question = checks_study(check_rate=0.5)
    participant = working(study, "P1")
    client.force_login(participant.user)
    session = client.session
    session[SESSION_KEY] = participant.pk
    session.save()
    url = reverse("preferences:compare", args=[study.pk, question.key])
    api = f"/api/studies/{study.pk}/pairs/{question.key}/next/"
    answer = by_position(study)
    pages: dict[bool, list[str]] = {True: [], False: []}
    bodies: dict[bool, list[dict]] = {True: [], False: []}
    for _ in range(40):
        state = pair_next(question=question, annotator=participant.user)
        if state.pending is None:
            break
        page = client.get(url)
        assert page.status_code == 200
        if state.answered:  # the first page, before any answer, is like no other
            pages[state.check].append(_normalised(page.content.decode()))
        bodies[state.check].append(client.get(api).json())
        a, b = state.pending
        response = client.post(
            "/api/judgements/",
            {
                "question": question.pk,
                "item_a": a,
                "item_b": b,
                "outcome": answer(a, b),
                "idempotency_key": str(uuid.uuid4()),
            },
            content_type="application/json",
        )
        assert response.status_code == 201
        # nothing in the answer's response tells a check from another pair
        assert response.json()["phase"] is None
    assert pages[True]
    assert pages[False]
    # the page of a check pair is the page of some scheduler pair, numbers and texts aside
    for page in pages[True]:
        closest = difflib.get_close_matches(page, pages[False], n=1, cutoff=0)[0]
        assert page == closest, "\n".join(
            difflib.unified_diff(closest.splitlines(), page.splitlines(), lineterm="")
        )
    for body in bodies[True]:
        assert set(body) == set(bodies[False][0])
        assert set(body["item_a"]) == set(bodies[False][0]["item_a"])
        assert not re.search("check|gold|attention", str(body), re.IGNORECASE)


def snapshot_of(question: Question, capture) -> dict:
    """Everything computed from a question's judgements: schedules, kappa, scores, stats."""
    replays.clear()
    sessions = PairSession.objects.filter(question=question).order_by("annotator_id")
    states = [pair_state(session=s) for s in sessions]
    reports = annotator_reports(question=question)
    scores = question_scores(question=question)
    with capture(execute=True):
        PAIRWISE.rebuild(question_id=question.pk)
    stored = latest_snapshot(question=question).indicators
    return {
        "pending": [s.pending for s in states],
        "ranking": [s.scheduler.ranking() for s in states],
        "closure": [sorted(s.scheduler.judgements) for s in states],
        "kappa": [consistency(s.judgements, strict=s.settings.strict).kappa for s in states],
        "reports": [(r.asked, r.kappa, r.contradictions, r.error_rate) for r in reports],
        "bt": [(row.item.pk, row.log_strength, row.rank) for row in scores.rows],
        "n_judgements": scores.n_judgements,
        "stats": {
            key: stored["values"][key]
            for key in ("judgements", "transitivity_kappa", "contradiction_rate")
        },
        "exported": [(row["sequence"], row["phase"]) for row in judgement_rows(question=question)],
    }


def test_checks_leave_the_schedule_kappa_scores_statistics_and_exports_alone(
    pinned_pair_seed, django_capture_on_commit_callbacks
):
    study, question = checks_study(check_rate=0.5)
    answer = by_position(study)
    known = gold_order(study)
    wrong: Answerer = lambda a, b: -known[(a, b)]  # noqa: E731  # every check failed
    for pid, limit in (("P1", None), ("P2", 15)):  # P2 stops half way: a pair is pending
        judge_all(question, working(study, pid).user, answer, on_check=wrong, limit=limit)
    assert Judgement.objects.checks().count() > 4
    with_checks = snapshot_of(question, django_capture_on_commit_callbacks)
    assert with_checks["exported"]
    assert all(phase != "check" for _, phase in with_checks["exported"])
    Judgement.objects.checks().delete()
    without = snapshot_of(question, django_capture_on_commit_callbacks)
    with_checks.pop("exported"), without.pop("exported")
    assert with_checks == without

    # and the scheduler served the same pairs as to a participant who met no checks
    other, other_question = checks_study(check_rate=0.0)
    plain = working(other, "P9")
    served_plain = judge_all(other_question, plain.user, by_position(other))
    ids = {item.pk: item.external_id for item in Item.objects.all()}
    first = Participant.objects.get(study=study, platform_id="P1")
    seen = [
        (ids[j.item_a_id], ids[j.item_b_id])
        for j in Judgement.objects.filter(annotator=first.user).data().order_by("sequence")
    ]
    assert seen == [(ids[a], ids[b]) for a, b, _ in served_plain]


def test_a_check_is_right_when_the_outcome_is_the_known_order_whatever_the_sides(
    pinned_pair_seed,
):
    study, question = checks_study(check_rate=0.5)
    known = gold_order(study)
    careful, left = working(study, "careful"), working(study, "left")
    judge_all(question, careful.user, by_position(study), on_check=lambda a, b: known[(a, b)])
    served = judge_all(question, left.user, by_position(study), on_check=lambda a, b: 1)
    # "A is better" is right exactly where the better gold item was shown as A
    expected = sum(known[(a, b)] == 1 for a, b, check in served if check)
    n_checks = sum(check for _, _, check in served)
    assert 0 < expected < n_checks  # both sides met
    found = gold_accuracy(study=study, question=question)
    assert (found[careful.user_id].correct, found[careful.user_id].checked) == (
        Judgement.objects.filter(annotator=careful.user).checks().count(),
    ) * 2
    assert (found[left.user_id].correct, found[left.user_id].checked) == (expected, n_checks)


def test_an_undone_check_is_asked_again_and_not_scored(pinned_pair_seed):
    study, question = checks_study(check_rate=1.0)  # a check before every scheduler pair
    participant = working(study, "P1")
    state = pair_next(question=question, annotator=participant.user)
    assert state.check
    a, b = state.pending
    judgement, _ = judgement_record(
        question=question,
        annotator=participant.user,
        item_a=a,
        item_b=b,
        outcome=1,
        idempotency_key=uuid.uuid4(),
    )
    after = pair_next(question=question, annotator=participant.user)
    assert not after.check
    assert after.last_answer.id == judgement.pk
    assert gold_accuracy(study=study, question=question)[participant.user_id].checked == 1
    assert judgement_retract(question=question, annotator=participant.user) == judgement
    again = pair_next(question=question, annotator=participant.user)
    assert (again.check, again.pending) == (True, (a, b))
    assert participant.user_id not in gold_accuracy(study=study, question=question)


def test_the_dashboard_shows_attention_checks_and_flags_below_the_floor(
    pinned_pair_seed, django_capture_on_commit_callbacks
):
    study, question = checks_study(check_rate=0.5, attention_floor=0.7)
    known = gold_order(study)
    careful, careless = working(study, "careful"), working(study, "careless")
    judge_all(question, careful.user, by_position(study), on_check=lambda a, b: known[(a, b)])
    judge_all(question, careless.user, by_position(study), on_check=lambda a, b: -known[(a, b)])
    with django_capture_on_commit_callbacks(execute=True):
        PAIRWISE.rebuild(question_id=question.pk)
    stored = latest_snapshot(question=question).indicators
    row = {a: k for k, a in enumerate(stored["annotators"])}
    values = stored["values"][GOLD_ACCURACY.key]
    assert (values[row[careful.user_id]], values[row[careless.user_id]]) == (1.0, 0.0)
    n_checks = Judgement.objects.filter(annotator=careless.user).checks().count()
    assert stored["evidence"]["gold_checks"][row[careless.user_id]] == n_checks
    low, high = stored["intervals"]["gold_accuracy"][row[careless.user_id]][1:3]
    assert low == 0.0
    assert high == pytest.approx(3.8415 / (n_checks + 3.8415), abs=1e-3)
    flagged = set(
        Flag.objects.filter(question=question, indicator="gold_accuracy").values_list(
            "annotator_id", flat=True
        )
    )
    assert flagged == {careless.user_id}


def test_the_payment_file_counts_pair_checks(pinned_pair_seed):
    study, question = checks_study(check_rate=0.5)
    known = gold_order(study)
    participant = working(study, "P1")
    served = judge_all(
        question, participant.user, by_position(study), on_check=lambda a, b: known[(a, b)]
    )
    n_checks = sum(check for _, _, check in served)
    header, line = payment_rows(study=study)
    row = dict(zip(header, line, strict=True))
    assert (row["gold_correct"], row["gold_checked"], row["gold_accuracy"]) == (
        n_checks,
        n_checks,
        1.0,
    )
    assert (row["items_done"], row["items_total"]) == (N_REGULAR, N_REGULAR)


def test_progress_counts_checks_as_the_comparison_page_does(pinned_pair_seed):
    study, question = checks_study(check_rate=0.5)
    participant = working(study, "P1")
    served = judge_all(question, participant.user, by_position(study), limit=7)
    assert any(check for _, _, check in served)
    page = pair_next(question=question, annotator=participant.user).progress
    assert page["done"] == 7
    assert judgement_progress(question=question, annotator=participant.user) == page
