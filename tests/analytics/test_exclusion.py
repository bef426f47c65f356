"""Excluding an annotator: a required reason, undo with its history, a table that keeps its
row order, and the reason in the provenance of curated exports."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from analytics.dashboard import dashboard_context
from analytics.models import Exclusion, Flag
from analytics.publishing import quality_publish
from analytics.selectors import excluded_annotator_ids
from analytics.services import annotator_exclude, annotator_include
from apps.annotations.exporting import provenance
from apps.categorical.quality import quality_process_pending
from apps.studies.services import membership_remove
from tests.analytics.test_dashboard import _answer_everything
from tests.factories import running_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def answered():
    """Four annotators who answered every item; the last one has an open, active flag."""
    study, annotators = running_study(n_items=8, n_annotators=4)
    question = study.questions.get()
    _answer_everything(study, annotators)
    quality_process_pending(question_id=question.pk)
    quality_publish(question_id=question.pk, rebuild=True)
    Flag.objects.create(
        study=study, question=question, annotator=annotators[-1], indicator="cohen_kappa",
        reason="far from the others", active=True,
    )  # fmt: skip
    return study, annotators


def _url(study, user) -> str:
    return reverse("analytics:annotator_exclusion", args=[study.pk, user.pk])


@pytest.mark.parametrize("reason", ["", "   \n ", "x" * 501])
def test_a_missing_or_overlong_reason_is_refused_and_writes_nothing(answered, reason):
    study, annotators = answered
    with pytest.raises(ValidationError) as caught:
        annotator_exclude(study=study, annotator=annotators[-1], by=study.created_by, reason=reason)
    assert "reason" in caught.value.message_dict
    assert not Exclusion.objects.exists()
    # a refused exclusion confirms none of the annotator's open flags
    assert not Flag.objects.filter(annotator=annotators[-1]).exclude(status=Flag.Status.OPEN)


def test_the_reason_is_stored_trimmed_and_confirms_the_open_flags(answered):
    study, annotators = answered
    annotator_exclude(
        study=study, annotator=annotators[-1], by=study.created_by, reason="  random labels \n"
    )
    assert Exclusion.objects.get().reason == "random labels"
    for flag in Flag.objects.filter(annotator=annotators[-1]):
        assert flag.status == Flag.Status.CONFIRMED
        assert flag.events.last().note == "excluded: random labels"


@pytest.mark.parametrize("htmx", [False, True])
def test_the_view_refuses_an_exclusion_without_reason_with_the_form_again(client, answered, htmx):
    study, annotators = answered
    client.force_login(study.created_by)
    headers = {"HX-Request": "true"} if htmx else {}
    response = client.post(
        _url(study, annotators[-1]), {"action": "exclude", "reason": " "}, headers=headers
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert "Say why" in html
    assert 'aria-invalid="true"' in html
    assert ("<html" in html) is not htmx  # a page of its own without JavaScript, else the form
    assert not Exclusion.objects.exists()


def test_unknown_action_is_a_bad_request(client, answered):
    study, annotators = answered
    client.force_login(study.created_by)
    assert client.post(_url(study, annotators[0]), {"action": "drop"}).status_code == 400
    assert not Exclusion.objects.exists()


def test_excluding_without_javascript_redirects_shows_undo_and_the_provenance_has_the_reason(
    client, answered
):
    study, annotators = answered
    spammer = annotators[-1]
    client.force_login(study.created_by)
    response = client.post(
        _url(study, spammer), {"action": "exclude", "reason": "labels at random"}, follow=True
    )
    assert response.redirect_chain[-1][1] == 302
    html = response.content.decode()
    assert f"{spammer.username} is excluded from curated exports." in html
    assert f'Undo<span class="visually-hidden"> exclusion of {spammer.username}' in html
    assert "“labels at random”" in html
    record = provenance(study=study, curated=True, include_history=False, fmt="csv")
    (exclusion,) = record["exclusions"]
    assert (exclusion["annotator"], exclusion["reason"]) == (spammer.username, "labels at random")


def test_htmx_exclusion_answers_with_the_table(client, answered):
    study, annotators = answered
    client.force_login(study.created_by)
    response = client.post(
        _url(study, annotators[0]),
        {"action": "exclude", "reason": "left early"},
        headers={"HX-Request": "true"},
    )
    assert response.status_code == 200
    assert "HX-Retarget" not in response  # the form's own target: the table
    assert (
        response.content.decode()
        .lstrip()
        .startswith('<section class="card" id="quality-annotators"')
    )


def test_undo_includes_again_and_both_events_stay_on_record(client, answered):
    study, annotators = answered
    manager, spammer = study.created_by, annotators[-1]
    client.force_login(manager)
    client.post(_url(study, spammer), {"action": "exclude", "reason": "first look"})
    client.post(_url(study, spammer), {"action": "include"})
    assert excluded_annotator_ids(study=study) == set()
    client.post(_url(study, spammer), {"action": "exclude", "reason": "second look"})
    history = list(Exclusion.objects.filter(annotator=spammer).order_by("created_at", "pk"))
    assert [(e.reason, e.by, e.revoked_by) for e in history] == [
        ("first look", manager, manager),
        ("second look", manager, None),
    ]
    assert history[0].revoked_at >= history[0].created_at
    assert excluded_annotator_ids(study=study) == {spammer.pk}


def test_rows_keep_their_order_by_name_whatever_flags_and_exclusions_do(answered):
    study, annotators = answered
    question = study.questions.get()

    def order() -> list[str]:
        return [row.name for row in dashboard_context(study=study, question=question)["rows"]]

    before = order()
    assert before == sorted((u.username for u in annotators), key=str.casefold)
    annotator_exclude(study=study, annotator=annotators[-1], by=study.created_by, reason="spam")
    assert order() == before  # the flag it confirmed no longer sorts the row elsewhere
    annotator_include(study=study, annotator=annotators[-1], by=study.created_by)
    assert order() == before


def test_a_removed_member_with_answers_can_still_be_excluded(client, answered, outsider):
    study, annotators = answered
    leaver = annotators[-1]
    membership_remove(study=study, user=leaver, by=study.created_by)
    client.force_login(study.created_by)
    response = client.post(_url(study, leaver), {"action": "exclude", "reason": "left, spammed"})
    assert response.status_code == 302
    assert excluded_annotator_ids(study=study) == {leaver.pk}
    # someone who neither takes part nor answered does not exist here
    assert (
        client.post(_url(study, outsider), {"action": "exclude", "reason": "x"}).status_code == 404
    )


def test_excluded_means_the_same_on_every_page_and_file(client, answered):
    """One notion of "excluded" (issue 27): the dashboard's row, the curated answers, the
    curated aggregated labels and the curated Hugging Face dataset all leave out exactly the
    annotators excluded on the dashboard, and include them again after an undo."""
    import csv as csv_module
    import io
    import zipfile

    import pyarrow.parquet as pq

    study, annotators = answered
    left = annotators[-1]
    question = study.questions.get()

    def shown() -> dict[str, set[str]]:
        client.force_login(study.created_by)
        csv = b"".join(
            client.get(reverse("annotations:export_curated", args=[study.pk, "csv"]))
        ).decode()
        aggregated = b"".join(
            client.get(reverse("adjudication:export", args=[study.pk, "csv"]), {"curated": "1"})
        ).decode()
        answers = {
            (row["item"], row["n_answers"])
            for row in csv_module.DictReader(io.StringIO(aggregated))
        }
        zipped = client.get(reverse("annotations:export_huggingface", args=[study.pk]))
        with zipfile.ZipFile(io.BytesIO(b"".join(zipped.streaming_content))) as archive:
            data = pq.read_table(io.BytesIO(archive.read(f"data/{question.key}.parquet")))
        rows = dashboard_context(study=study, question=question)["rows"]
        return {
            "curated answers": {u.username for u in annotators if u.username in csv},
            "aggregated answers a row": answers,
            "dataset": set(data.column("annotator").to_pylist()),
            "dashboard": {row.name for row in rows if row.exclusion is None},
        }

    everyone = {u.username for u in annotators}
    before = shown()
    assert before["curated answers"] == before["dataset"] == before["dashboard"] == everyone
    annotator_exclude(study=study, annotator=left, by=study.created_by, reason="random labels")
    after = shown()
    kept = everyone - {left.username}
    assert after["curated answers"] == after["dataset"] == after["dashboard"] == kept
    # every item had the four annotators' answers; the curated aggregate counts three
    assert {n for _, n in before["aggregated answers a row"]} == {"4"}
    assert {n for _, n in after["aggregated answers a row"]} == {"3"}
    annotator_include(study=study, annotator=left, by=study.created_by)
    assert shown() == before
