"""The adjudication page: disputed items, the current one, decisions with and without htmx."""

from __future__ import annotations

import csv
import hashlib
import io
import json

import pyarrow.parquet as pq
import pytest
from django.urls import reverse

from analytics.services import annotator_exclude
from apps.accounts.services import invitation_address
from apps.adjudication.models import Adjudication, OverlapRule
from apps.adjudication.services import adjudication_record
from apps.studies.models import Membership
from apps.studies.services import question_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def page_url(disputed) -> str:
    return reverse("adjudication:page", args=[disputed.study.pk, "sentiment"])


def test_page_shows_the_most_disputed_item_with_answers_and_suggestion(client, disputed):
    client.force_login(disputed.reviewer)
    html = client.get(page_url(disputed)).content.decode()
    tie_item = disputed.items[3]
    assert f"Item {tie_item.external_id}<" in html  # the 2-2 tie comes first
    assert f">{tie_item.external_id}</a>" in html  # listed by name, as every page names it
    assert f">#{tie_item.pk}<" not in html  # not by database id
    assert "<strong>tie</strong> between Negative, Positive" in html
    for user in disputed.annotators:
        assert user.username in html
    assert 'data-shortcut="1"' in html
    assert "Mark genuinely ambiguous" in html
    assert "Adaptive overlap" not in html  # reviewers do not change the study


def test_posting_a_label_records_it_and_moves_to_the_next_item(client, disputed):
    client.force_login(disputed.manager)
    tie_item = disputed.items[3]
    response = client.post(page_url(disputed), {"item": tie_item.pk, "label": "positive"})
    assert response.status_code == 302
    adjudication = Adjudication.objects.get()
    assert (adjudication.item, adjudication.label.key) == (tie_item, "positive")
    assert adjudication.suggestion["tied"] == ["negative", "positive"]
    html = client.get(page_url(disputed)).content.decode()
    assert f"Item {disputed.items[1].external_id}<" in html  # the next undecided, most disputed


def test_htmx_gets_the_workspace_and_an_ambiguous_item_needs_a_note(client, disputed):
    client.force_login(disputed.reviewer)
    item = disputed.items[1]
    refused = client.post(
        page_url(disputed), {"item": item.pk, "ambiguous": "1", "note": ""}, HTTP_HX_REQUEST="true"
    )
    assert refused.status_code == 422
    assert f"Item {item.external_id}<" in refused.content.decode()  # the same item, with the error
    assert not Adjudication.objects.exists()
    done = client.post(
        page_url(disputed),
        {"item": item.pk, "ambiguous": "1", "note": "Irony."},
        HTTP_HX_REQUEST="true",
    )
    assert done.status_code == 200
    assert "<html" not in done.content.decode()
    assert Adjudication.objects.get().ambiguous


def test_managers_set_the_overlap_rule(client, disputed):
    client.force_login(disputed.manager)
    url = reverse("adjudication:overlap", args=[disputed.study.pk, "sentiment"])
    client.post(url, {"base_k": "2", "k_max": "4", "threshold": "0.4"})
    rule = OverlapRule.objects.get()
    assert (rule.base_k, rule.k_max, rule.threshold) == (2, 4, 0.4)
    client.post(url, {"action": "remove"})
    assert not OverlapRule.objects.exists()


def _csv_rows(response) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_aggregated_export_with_adjudication_and_curation(client, disputed):
    tie_item, split_item = disputed.items[3], disputed.items[2]
    adjudication_record(
        adjudicator=disputed.reviewer,
        question=disputed.question,
        item=tie_item,
        label_key="negative",
        note="Read the context.",
    )
    client.force_login(disputed.manager)
    url = reverse("adjudication:export", args=[disputed.study.pk, "csv"])
    rows = {row["item"]: row for row in _csv_rows(client.get(url))}
    assert len(rows) == 5  # the unanswered item has no row
    tie = rows[tie_item.external_id]
    assert (tie["majority"], tie["majority_tie"], tie["majority_votes"]) == ("", "1", "2")
    assert json.loads(tie["tied_labels"]) == ["negative", "positive"]
    assert (tie["adjudicated_label"], tie["adjudicated_by"]) == (
        "negative",
        disputed.reviewer.username,
    )
    split = rows[split_item.external_id]
    assert (split["majority"], split["n_answers"], split["adjudicated_label"]) == (
        "negative",
        "4",
        "",
    )
    assert float(split["disagreement"]) > 0
    assert split["ds_label"] == "negative"
    assert abs(sum(json.loads(split["ds_posterior"]).values()) - 1) < 1e-5

    annotator_exclude(
        study=disputed.study, annotator=disputed.annotators[2], by=disputed.manager, reason="spam"
    )
    curated = {row["item"]: row for row in _csv_rows(client.get(url, {"curated": "1"}))}
    assert curated[split_item.external_id]["n_answers"] == "3"
    assert curated[split_item.external_id]["disagreement"] == "0"
    record = json.loads(
        client.get(
            reverse("adjudication:export_provenance", args=[disputed.study.pk]),
            {"format": "csv"},
        ).content
    )
    assert record["schema"] == "annotation-studio/aggregated-provenance/1"
    assert record["exclusions"][0]["annotator"] == disputed.annotators[2].username
    assert record["exclusions"][0]["applied"]
    assert record["file"]["rows"] == 5
    assert record["answers_file"]["name"].endswith("-curated.csv")
    body = b"".join(client.get(url, {"curated": "1"}).streaming_content)
    assert record["file"]["sha256"] == hashlib.sha256(body).hexdigest()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_aggregated_export_in_other_formats(client, disputed, fmt):
    client.force_login(disputed.manager)
    response = client.get(reverse("adjudication:export", args=[disputed.study.pk, fmt]))
    body = b"".join(response.streaming_content)
    if fmt == "jsonl":
        rows = [json.loads(line) for line in body.decode().splitlines()]
        assert rows[0]["tied_labels"] == []
    else:
        table = pq.read_table(io.BytesIO(body))
        rows = table.to_pylist()
        assert str(table.schema.field("majority_tie").type) == "bool"
    assert len(rows) == 5


def test_reviewers_find_the_page_on_their_home_page_and_managers_on_the_overview(client, disputed):
    client.force_login(disputed.reviewer)
    home = client.get(reverse("studies:home")).content.decode()
    assert "You are a reviewer" in home
    assert page_url(disputed) in home
    client.force_login(disputed.manager)
    overview = client.get(reverse("studies:overview", args=[disputed.study.pk])).content.decode()
    assert page_url(disputed) in overview
    assert reverse("adjudication:export", args=[disputed.study.pk, "csv"]) in overview


def test_a_reviewer_who_accepts_an_invitation_starts_on_the_home_page(client, disputed):
    newcomer = UserFactory()
    invitation = invitation_address(
        study=disputed.study,
        created_by=disputed.manager,
        username=newcomer.username,
        role=Membership.Role.REVIEWER,
    )
    client.force_login(newcomer)
    response = client.post(reverse("accounts:invitation_join", args=[invitation.pk]))
    assert response["Location"] == reverse("studies:home")
    assert client.get(page_url(disputed)).status_code == 200


def test_a_question_without_answers_has_nothing_to_decide(client, disputed):
    question_create(
        study=disputed.study,
        key="topic",
        prompt="Which topic?",
        labels=[{"key": "sport", "name": "Sport"}, {"key": "news", "name": "News"}],
    )
    client.force_login(disputed.manager)
    response = client.get(reverse("adjudication:page", args=[disputed.study.pk, "topic"]))
    html = response.content.decode()
    assert "No disputed items" in html
    assert "Nothing left to decide" in html
