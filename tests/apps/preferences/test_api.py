"""REST API of pairwise preferences: next pair, judgements, scores, permissions."""

from __future__ import annotations

import uuid

import pytest

from annotate_site.api_pagination import CappedLimitOffsetPagination
from apps.preferences.models import Judgement
from tests.apps.preferences.conftest import answer_all, by_level
from tests.factories import UserFactory


def next_url(setup) -> str:
    return f"/api/studies/{setup.study.pk}/pairs/{setup.question.key}/next/"


def scores_url(setup) -> str:
    return f"/api/studies/{setup.study.pk}/pairs/{setup.question.key}/scores/"


def answer(api_client, setup, *, outcome=1, key=None, pair=None):
    if pair is None:
        body = api_client.get(next_url(setup)).json()
        pair = body["item_a"]["id"], body["item_b"]["id"]
    return api_client.post(
        "/api/judgements/",
        {
            "question": setup.question.pk,
            "item_a": pair[0],
            "item_b": pair[1],
            "outcome": outcome,
            "idempotency_key": str(key or uuid.uuid4()),
            "time_spent_ms": 1200,
        },
        format="json",
    )


def test_anonymous_is_refused(api_client, pairwise):
    assert api_client.get(next_url(pairwise)).status_code in (401, 403)
    assert api_client.get("/api/judgements/").status_code in (401, 403)


@pytest.mark.parametrize(
    ("who", "next_status", "scores_status"),
    [("annotator", 200, 403), ("manager", 403, 200), ("outsider", 404, 404)],
)
def test_permissions(api_client, pairwise, who, next_status, scores_status):
    user = {
        "annotator": pairwise.annotators[0],
        "manager": pairwise.manager,
        "outsider": UserFactory(manager=True),
    }[who]
    api_client.force_authenticate(user)
    assert api_client.get(next_url(pairwise)).status_code == next_status
    assert api_client.get(scores_url(pairwise)).status_code == scores_status


def test_next_is_stable_until_answered(api_client, pairwise):
    api_client.force_authenticate(pairwise.annotators[0])
    first = api_client.get(next_url(pairwise)).json()
    assert api_client.get(next_url(pairwise)).json() == first
    assert set(first) == {"item_a", "item_b", "remaining_estimate", "strict"}
    assert first["remaining_estimate"] > 0
    assert answer(api_client, pairwise).status_code == 201
    assert api_client.get(next_url(pairwise)).json() != first


def test_judgement_created_then_replayed(api_client, pairwise):
    api_client.force_authenticate(pairwise.annotators[0])
    body = api_client.get(next_url(pairwise)).json()
    pair = body["item_a"]["id"], body["item_b"]["id"]
    key = uuid.uuid4()
    first = answer(api_client, pairwise, key=key, pair=pair)
    assert first.status_code == 201
    assert first.json()["phase"] == "sort"
    replay = answer(api_client, pairwise, key=key, pair=pair)
    assert replay.status_code == 200
    assert replay.json()["id"] == first.json()["id"]
    refused = answer(api_client, pairwise, key=key, pair=pair, outcome=-1)
    assert refused.status_code == 400
    assert "idempotency_key" in refused.json()
    assert Judgement.objects.count() == 1


def test_bad_input_names_the_fields(api_client, pairwise):
    api_client.force_authenticate(pairwise.annotators[0])
    response = api_client.post(
        "/api/judgements/", {"question": pairwise.question.pk, "outcome": 2}, format="json"
    )
    assert response.status_code == 400
    assert {"item_a", "item_b", "outcome", "idempotency_key"} <= set(response.json())


def test_a_pair_not_pending_is_refused(api_client, pairwise):
    api_client.force_authenticate(pairwise.annotators[0])
    body = api_client.get(next_url(pairwise)).json()
    pending = {body["item_a"]["id"], body["item_b"]["id"]}
    ids = [item.pk for item in pairwise.items]
    other = next((a, b) for a in ids for b in ids if a != b and {a, b} != pending)
    response = answer(api_client, pairwise, pair=other)
    assert response.status_code == 400
    assert "not the one waiting" in response.json()["non_field_errors"][0]


def test_items_of_another_study_are_refused(api_client, pairwise, study_setup):
    other_study, _ = study_setup
    api_client.force_authenticate(pairwise.annotators[0])
    foreign = other_study.items.first().pk
    response = answer(api_client, pairwise, pair=(pairwise.items[0].pk, foreign))
    assert response.status_code == 400
    assert "item_b" in response.json()


def test_outsiders_cannot_post_to_a_question(api_client, pairwise):
    api_client.force_authenticate(UserFactory())
    response = answer(api_client, pairwise, pair=(pairwise.items[0].pk, pairwise.items[1].pk))
    assert response.status_code == 400
    assert "question" in response.json()


def test_managers_cannot_judge(api_client, pairwise):
    api_client.force_authenticate(pairwise.manager)
    response = answer(api_client, pairwise, pair=(pairwise.items[0].pk, pairwise.items[1].pk))
    assert response.status_code == 403


def test_list_shows_own_judgements_to_annotators_and_all_to_managers(api_client, pairwise):
    levels = {item.pk: k for k, item in enumerate(pairwise.items)}
    first, second = pairwise.annotators
    answer_all(pairwise.question, first, by_level(levels))
    answer_all(pairwise.question, second, by_level(levels))
    api_client.force_authenticate(first)
    mine = api_client.get("/api/judgements/", {"question": pairwise.question.pk}).json()
    assert {row["annotator"] for row in mine["results"]} == {first.pk}
    api_client.force_authenticate(pairwise.manager)
    every = api_client.get("/api/judgements/").json()
    assert every["count"] == Judgement.objects.count()


def test_done_is_204_and_scores_for_managers(api_client, pairwise):
    annotator = pairwise.annotators[0]
    levels = {item.pk: k for k, item in enumerate(pairwise.items)}
    answer_all(pairwise.question, annotator, by_level(levels))
    api_client.force_authenticate(annotator)
    assert api_client.get(next_url(pairwise)).status_code == 204
    api_client.force_authenticate(pairwise.manager)
    body = api_client.get(scores_url(pairwise)).json()
    assert body["bt_alpha"] > 0  # the best item never lost
    assert [row["rank"] for row in body["items"]] == [1, 2, 3, 4, 5]
    assert body["items"][0]["count_scores"] == {annotator.username: 4.0}
    (report,) = body["annotators"]
    assert report["username"] == annotator.username
    assert report["completed"] is True
    assert report["kappa"] is None  # no calibration, no audit: nothing measured
    assert report["all_pairs"] == 10
    assert report["minimum"] == 7


def test_scores_report_sides_and_reliability(api_client, pairwise):
    annotator = pairwise.annotators[0]
    answer_all(pairwise.question, annotator, lambda a, b: 1)  # always the item shown as A
    api_client.force_authenticate(pairwise.manager)
    rows = {
        row["username"]: row for row in api_client.get(scores_url(pairwise)).json()["annotators"]
    }
    assert rows[annotator.username]["a_share"] == 1.0
    assert rows[annotator.username]["error_rate"] == 0.0  # no calibration, no audit: trusted
    assert rows[annotator.username]["flagged"] is False
    scores = api_client.get(scores_url(pairwise)).json()
    assert scores["weights"] == {annotator.username: 1.0}  # trusted: nothing measured


def test_scores_come_in_capped_pages_that_add_up_to_the_whole_table(
    api_client, pairwise, monkeypatch, django_assert_max_num_queries
):
    # 100,000 items would be 100,000 serialised rows: the API answers a capped page (the
    # CSV holds every item); the pages, in order, are the table ranked best first
    levels = {item.pk: k for k, item in enumerate(pairwise.items)}
    for annotator in pairwise.annotators:
        answer_all(pairwise.question, annotator, by_level(levels))
    api_client.force_authenticate(pairwise.manager)
    whole = api_client.get(scores_url(pairwise), {"limit": 1000}).json()
    assert (whole["count"], whole["next"], whole["previous"]) == (5, None, None)
    assert [row["rank"] for row in whole["items"]] == [1, 2, 3, 4, 5]
    assert [row["item"] for row in whole["items"]] == sorted(levels, key=levels.get)[::-1]
    rows, url, pages = [], scores_url(pairwise) + "?limit=2", []
    while url:
        body = api_client.get(url).json()
        pages.append(len(body["items"]))
        assert {k: v for k, v in body.items() if k not in ("items", "next", "previous")} == {
            k: v for k, v in whole.items() if k not in ("items", "next", "previous")
        }
        rows += body["items"]
        url = body["next"]
    assert pages == [2, 2, 1]
    assert rows == whole["items"]
    assert (
        "offset=2"
        in api_client.get(scores_url(pairwise), {"limit": 2, "offset": 4}).json()["previous"]
    )
    monkeypatch.setattr(CappedLimitOffsetPagination, "max_limit", 3)
    capped = api_client.get(scores_url(pairwise), {"limit": 1000}).json()
    assert len(capped["items"]) == 3
    assert capped["next"] is not None
    # the default page size applies without a limit
    monkeypatch.setattr(CappedLimitOffsetPagination, "default_limit", 4)
    assert len(api_client.get(scores_url(pairwise)).json()["items"]) == 4
    with django_assert_max_num_queries(SCORES_QUERIES):
        api_client.get(scores_url(pairwise), {"limit": 1})
    with django_assert_max_num_queries(SCORES_QUERIES):
        api_client.get(scores_url(pairwise), {"limit": 1000})


#: Queries of a scores page: none per item, per judgement or per annotator (the table and the
#: reports read every annotator's judgements and sessions in one query each).
SCORES_QUERIES = 6
