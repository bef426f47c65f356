"""Home, sign-in, study overview, study and question forms, and status changes."""

from __future__ import annotations

import numpy as np
import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from apps.studies.models import Membership, Study
from tests.factories import PASSWORD, ItemFactory, StudyFactory, UserFactory

pytestmark = pytest.mark.django_db


def overview_url(study: Study) -> str:
    return reverse("studies:overview", args=[study.pk])


# ---------- Home and sign-in ----------


def test_home_needs_login(client):
    response = client.get(reverse("studies:home"))
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_login_lands_on_home(client, study_setup):
    annotator = study_setup[1][0]
    response = client.post(reverse("login"), {"username": annotator.username, "password": PASSWORD})
    assert response.status_code == 302
    assert response.url == reverse("studies:home")


def test_login_page_renders_with_errors(client, db):
    response = client.post(reverse("login"), {"username": "nobody", "password": "wrong"})
    assert response.status_code == 200
    assert "errorlist" in response.content.decode()


def test_annotator_home_shows_progress_and_continue(client, study_setup):
    study, (annotator, *_) = study_setup
    client.force_login(annotator)
    html = client.get(reverse("studies:home")).content.decode()
    assert study.name in html
    assert "an annotator" in html
    assert "0 of 6 done" in html
    assert reverse("annotations:queue", args=[study.pk]) in html
    prompt = study.questions.get().prompt
    assert f"Start labelling: {prompt}" in html  # the button names its task
    assert "New study" not in html
    assert f'href="{overview_url(study)}"' not in html


def test_manager_home_shows_manage_link_and_new_study(client, study_setup, manager):
    study, _ = study_setup
    client.force_login(manager)
    html = client.get(reverse("studies:home")).content.decode()
    assert "a manager" in html
    assert overview_url(study) in html
    assert reverse("studies:create") in html


def test_home_costs_the_same_queries_for_one_study_or_many(
    client, study_setup, django_assert_max_num_queries
):
    study, (annotator, *_) = study_setup
    client.force_login(annotator)
    # session, user, my studies with role, their questions, can-create, invitations addressed
    # to me, and one progress count per task (the study's queue: each kind counts its own)
    with django_assert_max_num_queries(8):
        client.get(reverse("studies:home"))
    for _ in range(5):
        other = StudyFactory()
        Membership.objects.create(study=other, user=annotator, role=Membership.Role.ANNOTATOR)
    with django_assert_max_num_queries(8):  # studies without questions: no task to count
        html = client.get(reverse("studies:home")).content.decode()
    assert html.count("an annotator of this study") == 6
    assert reverse("annotations:queue", args=[study.pk]) in html


def test_home_lists_only_my_studies(client, study_setup, outsider):
    client.force_login(outsider)
    html = client.get(reverse("studies:home")).content.decode()
    assert study_setup[0].name not in html
    assert "do not take part" in html


# ---------- Overview ----------


def test_overview_is_for_the_studys_managers_only(client, study_setup, outsider):
    study, (annotator, *_) = study_setup
    for user, status, page in ((annotator, 403, "Not allowed"), (outsider, 404, "Page not found")):
        client.force_login(user)
        response = client.get(overview_url(study))
        assert response.status_code == status
        assert page in response.content.decode()  # templates/403.html, templates/404.html
    client.logout()
    assert client.get(overview_url(study)).status_code == 302


def test_overview_shows_progress_coverage_and_downloads(client, study_setup, manager):
    study, annotators = study_setup
    client.force_login(manager)
    response = client.get(overview_url(study))
    html = response.content.decode()
    assert response.status_code == 200
    for annotator in annotators:
        assert annotator.username in html
    assert "0 of 6 done" in html  # each annotator's bar
    assert study.items.first().external_id in html
    assert "Close study" in html
    # no answers yet: no download buttons, one sentence instead (an empty draft showed 15)
    assert reverse("annotations:export", args=[study.pk, "csv"]) not in html
    assert "No answers yet" in html


def test_overview_counts_every_kind_of_task_as_the_annotators_own_pages_do(client):
    """One notion of progress: the overview counted only the label queue, while the home card
    and the trace and comparison pages count their own tasks (issue 27, point 5)."""
    from apps.studies.selectors import annotator_tasks
    from apps.studies.services import question_create
    from tests.apps.continuous.conftest import make_trace_study

    ts = make_trace_study(n_annotators=2)
    question_create(
        study=ts.study,
        kind="categorical",
        key="mood",
        prompt="Mood?",
        labels=[{"key": "calm", "name": "Calm"}, {"key": "tense", "name": "Tense"}],
    )
    question_create(study=ts.study, kind="pairwise", key="better", prompt="Which is livelier?")
    ts.trace_gold(ts.annotators[0], lambda t: 0.5 + 0.3 * np.sin(t))
    client.force_login(ts.study.created_by)
    html = client.get(overview_url(ts.study)).content.decode()
    header = html[html.index('id="progress-heading"') : html.index("</thead>")]
    assert "Label queue" in header
    assert "<code>arousal</code>" in header
    assert "<code>better</code>" in header
    for annotator in ts.annotators:
        row = html[html.index(f">{annotator.username}</th>") :]
        row = row[: row.index("</tr>")]
        tasks = annotator_tasks(study=ts.study, annotator=annotator)
        assert len(tasks) == 3
        shown = [
            f"{task['progress']['done']} of {task['progress']['total']} done" for task in tasks
        ]
        assert [text for text in shown if text in row] == shown
    trace_row = html[html.index(f">{ts.annotators[0].username}</th>") :]
    assert "1 of 2 done" in trace_row[: trace_row.index("</tr>")]


def test_overview_downloads_follow_the_annotator_naming_choice(client, study_setup, manager):
    from apps.annotations.models import Assignment
    from apps.annotations.services import annotations_submit

    study, (annotator, *_) = study_setup
    question = study.questions.get()
    annotations_submit(
        annotator=annotator,
        assignment=Assignment.objects.filter(annotator=annotator).first(),
        answers={question: question.labels.first().key},
        idempotency_key=__import__("uuid").uuid4(),
    )
    client.force_login(manager)
    html = client.get(overview_url(study)).content.decode()
    assert reverse("annotations:export", args=[study.pk, "csv"]) + '"' in html
    assert reverse("annotations:export", args=[study.pk, "jsonl"]) + "?history=1" in html
    named = client.get(overview_url(study), {"annotators": "pseudonyms"}).content.decode()
    export = reverse("annotations:export", args=[study.pk, "csv"])
    assert f'{export}?annotators=pseudonyms"' in named  # no address to edit by hand
    assert f"{export}?history=1&amp;annotators=pseudonyms" in named
    huggingface = reverse("annotations:export_huggingface", args=[study.pk])
    assert f'{huggingface}?annotators=pseudonyms"' in named


def test_coverage_is_paginated_and_htmx_gets_the_fragment(client, manager, study_setup):
    study, _ = study_setup
    ItemFactory.create_batch(30, study=study)
    client.force_login(manager)
    page_two = client.get(overview_url(study) + "?page=2", HTTP_HX_REQUEST="true")
    html = page_two.content.decode()
    assert page_two.status_code == 200
    assert html.lstrip().startswith('<section class="card" id="coverage"')
    assert "<html" not in html
    assert "Page 2 of 2" in html


# ---------- Status ----------


def test_opening_a_study_without_questions_explains_why_not(client, manager):
    study = StudyFactory(created_by=manager)
    client.force_login(manager)
    response = client.post(
        reverse("studies:status", args=[study.pk]), {"status": "running"}, follow=True
    )
    assert "Add at least one question" in response.content.decode()
    study.refresh_from_db()
    assert study.status == Study.Status.DRAFT


def test_closing_a_study(client, study_setup, manager):
    study, _ = study_setup
    client.force_login(manager)
    response = client.post(
        reverse("studies:status", args=[study.pk]), {"status": "closed"}, follow=True
    )
    study.refresh_from_db()
    assert study.status == Study.Status.CLOSED
    assert "The study is closed" in response.content.decode()
    assert "Reopen study" in response.content.decode()


def test_annotator_cannot_change_status(client, study_setup):
    study, (annotator, *_) = study_setup
    client.force_login(annotator)
    response = client.post(reverse("studies:status", args=[study.pk]), {"status": "closed"})
    assert response.status_code == 403


# ---------- Create and edit a study ----------


def test_study_creation_needs_the_permission(client, study_setup):
    client.force_login(study_setup[1][0])
    response = client.get(reverse("studies:create"))
    assert response.status_code == 403
    assert "Not allowed" in response.content.decode()  # templates/403.html


def test_create_study(client, outsider):
    client.force_login(outsider)
    data = {"name": "Emotions", "instructions": "Be *quick*.", "overlap": "2", "repeat_rate": "0.1"}
    response = client.post(reverse("studies:create"), data)
    study = Study.objects.get(name="Emotions")
    assert response.status_code == 302
    assert response.url == overview_url(study)
    assert study.overlap == 2
    assert Membership.objects.get(study=study).user == outsider


def test_study_form_errors_sit_next_to_fields(client, outsider):
    client.force_login(outsider)
    response = client.post(reverse("studies:create"), {"name": "", "repeat_rate": "2"})
    html = response.content.decode()
    assert response.status_code == 422
    assert 'id="id_name_error"' in html
    assert 'aria-invalid="true"' in html
    assert "less than or equal to 1" in html
    assert not Study.objects.exists()


def test_edit_study(client, study_setup, manager):
    study, _ = study_setup
    client.force_login(manager)
    page = client.get(reverse("studies:edit", args=[study.pk]))
    assert study.name in page.content.decode()
    data = {"name": "Renamed", "instructions": "New", "overlap": "", "repeat_rate": "0"}
    response = client.post(reverse("studies:edit", args=[study.pk]), data)
    assert response.status_code == 302
    study.refresh_from_db()
    assert study.name == "Renamed"
    assert study.overlap is None


# ---------- Questions ----------


def test_other_managers_cannot_edit_questions(client, study_setup, outsider):
    study, _ = study_setup
    question = study.questions.get()
    client.force_login(outsider)
    url = reverse("studies:question_edit", args=[study.pk, question.pk])
    assert client.get(url).status_code == 404


def test_annotators_cannot_open_manager_pages(client, study_setup):
    study, (annotator, *_) = study_setup
    client.force_login(annotator)
    for name in ("studies:edit", "studies:question_create"):
        assert client.get(reverse(name, args=[study.pk])).status_code == 403


def test_new_user_without_permission_sees_no_new_study_button(client):
    client.force_login(UserFactory())
    assert "New study" not in client.get(reverse("studies:home")).content.decode()


def test_server_error_page_renders_without_a_request():
    html = render_to_string("500.html")
    assert "Something went wrong" in html
    assert "studio.css" in html


def test_done_means_the_same_on_the_home_card_the_queue_the_api_and_the_overview(client):
    """One notion of "done" (issue 27): the annotator who answered every assigned item is done
    on their home card, on the queue page, for the API's next item (204) and in the manager's
    overview; one answer short, none of them says so."""
    import uuid

    from rest_framework.test import APIClient

    from apps.annotations.selectors import assignment_next
    from apps.annotations.services import annotations_submit
    from tests.factories import running_study

    study, (annotator, *_) = running_study(n_items=3, n_annotators=2)
    question = study.questions.get()
    api = APIClient()
    api.force_authenticate(annotator)

    def said() -> dict[str, bool]:
        client.force_login(annotator)
        home = client.get(reverse("studies:home")).content.decode()
        queue = client.get(reverse("annotations:queue", args=[study.pk])).content.decode()
        nxt = api.get(f"/api/studies/{study.pk}/next/")
        client.force_login(study.created_by)
        overview = client.get(overview_url(study)).content.decode()
        row = overview[overview.index(f">{annotator.username}</th>") :]
        return {
            "home": "All done" in home,
            "queue": "Thank you, all done!" in queue,
            "api": nxt.status_code == 204,
            "overview": "(100%)" in row[: row.index("</tr>")],
        }

    while (assignment := assignment_next(annotator=annotator, study=study)) is not None:
        assert not any(said().values())
        annotations_submit(
            annotator=annotator, assignment=assignment, answers={question: "neutral"},
            idempotency_key=uuid.uuid4(),
        )  # fmt: skip
    assert all(said().values()), said()
