"""Identity bound to the first browser, reservations that expire, capacity before consent.

Found on the previous release (issue 24): a second browser naming a participant's platform id
was handed their work and their completion code; made-up ids filled ``max_participants`` for
good; a qualified participant of a study with no work left pressed "Start the task" forever.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from apps.annotations.models import Assignment
from apps.recruitment.models import Participant
from apps.recruitment.selectors import recruitment_capacity
from apps.studies.models import Membership
from apps.studies.services import membership_add
from tests.apps.recruitment.setup import recruiting_study
from tests.apps.recruitment.test_views import join_url, page, prolific, through_training
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
Status = Participant.Status


def test_a_second_browser_with_the_same_panel_id_is_refused(client):
    study, recruitment = recruiting_study(platform="generic")
    first = client.get(join_url(recruitment, pid="panel-7"))
    assert first["Location"] == page("consent", study)
    participant = Participant.objects.get()
    intruder = Client()
    refused = intruder.get(join_url(recruitment, pid="panel-7"))
    assert refused.status_code == 409
    assert b"resume code" in refused.content
    assert "_auth_user_id" not in intruder.session  # not signed in as the participant
    assert intruder.get(page("consent", study)).status_code == 302  # to the sign-in page
    same = client.get(join_url(recruitment, pid="panel-7"))  # the first browser continues
    assert same["Location"] == page("consent", study)
    assert Participant.objects.get() == participant


def test_the_resume_code_moves_a_participant_to_another_browser(client):
    study, recruitment = recruiting_study(platform="generic", consent_text="Agree?")
    client.get(join_url(recruitment, pid="panel-7"))
    consent = client.get(page("consent", study))
    code = consent.context["resume_code"]
    assert code
    assert code.encode() in consent.content
    other = Client()
    assert other.get(join_url(recruitment, pid="panel-7", resume="WRONG-CODE")).status_code == 409
    moved = other.get(join_url(recruitment, pid="panel-7", resume=code))
    assert moved["Location"] == page("consent", study)
    assert other.get(page("consent", study)).status_code == 200


def test_prolific_lets_the_same_attempt_continue_elsewhere_but_not_another(client):
    study, recruitment = recruiting_study()
    client.get(prolific(recruitment))  # SESSION_ID se1
    same_attempt = Client().get(prolific(recruitment))
    assert same_attempt["Location"] == page("consent", study)
    other_attempt = Client().get(
        join_url(recruitment, PROLIFIC_PID="5f1a9b", STUDY_ID="st1", SESSION_ID="guess")
    )
    assert other_attempt.status_code == 409


def test_arrivals_that_never_consent_free_their_place(client, settings):
    settings.RECRUITMENT_RESERVATION_MINUTES = 30
    study, recruitment = recruiting_study(max_participants=2, consent_text="Agree?")
    for pid in ("made-up-1", "made-up-2"):
        Client().get(prolific(recruitment, pid))
    assert b"This study is full" in Client().get(prolific(recruitment, "real")).content
    Participant.objects.update(arrived_at=timezone.now() - timedelta(minutes=31))
    admitted = client.get(prolific(recruitment, "real"))
    assert admitted["Location"] == page("consent", study)
    expired = Participant.objects.filter(platform_id__startswith="made-up")
    assert set(expired.values_list("status", flat=True)) == {Status.EXPIRED}


def _staff_take_every_item(study, overlap: int = 3) -> None:
    study.overlap = overlap
    study.save(update_fields=["overlap"])
    for _ in range(overlap):
        membership_add(study=study, user=UserFactory(), role=Membership.Role.ANNOTATOR)


def test_no_work_left_screens_out_before_consent_with_the_code(client):
    study, recruitment = recruiting_study(consent_text="Agree?")
    assert recruitment_capacity(recruitment=recruitment) > 0
    _staff_take_every_item(study)
    assert recruitment_capacity(recruitment=recruitment) == 0
    response = client.get(prolific(recruitment, "late"))
    assert response.status_code == 200
    assert b"SCREEN0UT" in response.content
    assert b"https://app.prolific.com/submissions/complete?cc=SCREEN0UT" in response.content
    assert not Participant.objects.exists()  # no account, no place taken


def test_a_qualified_participant_without_work_ends_with_the_screen_out_code(client):
    study, recruitment = recruiting_study()
    client.get(prolific(recruitment))
    through_training(client, study)
    _staff_take_every_item(study)  # the staff took the work meanwhile
    response = client.post(page("qualified", study))
    assert response["Location"] == page("end", study)
    end = client.get(page("end", study))
    assert b"SCREEN0UT" in end.content
    assert Participant.objects.get().status == Status.FULL
    assert not Assignment.objects.filter(annotator=Participant.objects.get().user).exists()


def test_capacity_counts_packages_left_for_people_not_yet_working():
    study, recruitment = recruiting_study(n_regular=6, items_per_participant=4, max_participants=9)
    study.overlap = 2
    study.save(update_fields=["overlap"])
    # 6 items x 2 answers = 12 slots; packages of 4 distinct items: 4, 4, 4 -> 3 people
    assert recruitment_capacity(recruitment=recruitment) == 3
    Client().get(prolific(recruitment, "a"))  # admitted, not working yet: holds a package
    assert recruitment_capacity(recruitment=recruitment) == 2


def test_the_manager_page_warns_when_the_link_has_no_work_to_give(client):
    study, _ = recruiting_study()
    _staff_take_every_item(study)
    client.force_login(study.created_by)
    html = client.get(page("manage", study)).content.decode()
    assert "no work left" in html.lower()


def test_participant_pages_carry_no_staff_chrome(client):
    study, recruitment = recruiting_study(consent_text="Agree?")
    client.get(prolific(recruitment))
    participant = Participant.objects.get()
    html = client.get(page("consent", study)).content.decode()
    assert "API tokens" not in html
    assert "My studies" not in html
    assert participant.user.username not in html  # their pseudonymous account name
    assert study.name in html
    staff = Client()
    staff.force_login(study.created_by)
    assert "API tokens" in staff.get("/").content.decode()
