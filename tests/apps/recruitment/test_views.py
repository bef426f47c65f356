"""The recruitment pages: the link, the phases, the queue gate, the manager's page and CSV."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from apps.annotations.models import Assignment
from apps.recruitment.models import GoldAnswer, Participant
from apps.recruitment.sessions import SESSION_KEY
from apps.studies.models import Membership
from apps.studies.services import membership_add
from tests.apps.recruitment.setup import TRAINING_ANSWER, recruiting_study
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
Status = Participant.Status
HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "item-area"}


def join_url(recruitment, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"{reverse('recruitment:join', args=[recruitment.token])}?{query}"


def prolific(recruitment, pid: str = "5f1a9b") -> str:
    return join_url(recruitment, PROLIFIC_PID=pid, STUDY_ID="st1", SESSION_ID="se1")


def page(name: str, study) -> str:
    return reverse(f"recruitment:{name}", args=[study.pk])


def through_training(client, study) -> None:
    """Consent, then answer every training item right."""
    client.post(page("consent", study), {"action": "agree"})
    for gold in GoldAnswer.objects.filter(use="training", item__study=study):
        response = client.post(
            page("training", study), {"gold": gold.pk, "answer": TRAINING_ANSWER}
        )
        assert response.status_code == 302
    client.get(page("training", study))


def test_the_link_signs_in_a_participant_and_a_second_visit_is_the_same_one(client):
    study, recruitment = recruiting_study(consent_text="# Consent\nYou agree to **label**.")
    response = client.get(prolific(recruitment))
    assert response.status_code == 302
    assert response["Location"] == page("consent", study)
    participant = Participant.objects.get()
    assert (participant.platform_id, participant.platform_study_id) == ("5f1a9b", "st1")
    assert client.session[SESSION_KEY] == participant.pk
    consent = client.get(page("consent", study))
    assert b"<strong>label</strong>" in consent.content
    other = client.__class__()  # another browser: the same id continues
    assert other.get(prolific(recruitment))["Location"] == page("consent", study)
    assert Participant.objects.count() == 1


@pytest.mark.parametrize(
    ("platform", "params", "expected"),
    [
        ("mturk", {"workerId": "A1B2", "assignmentId": "X", "hitId": "H"}, "A1B2"),
        ("generic", {"pid": "panel-7"}, "panel-7"),
    ],
)
def test_mturk_and_generic_links_read_their_own_parameters(client, platform, params, expected):
    _, recruitment = recruiting_study(platform=platform)
    assert client.get(join_url(recruitment, **params)).status_code == 302
    assert Participant.objects.get().platform_id == expected


def test_a_link_without_id_an_mturk_preview_and_an_unknown_token(client):
    _, recruitment = recruiting_study(platform="mturk")
    assert client.get(join_url(recruitment, hitId="H")).status_code == 400
    preview = client.get(join_url(recruitment, assignmentId="ASSIGNMENT_ID_NOT_AVAILABLE"))
    assert preview.status_code == 200
    assert b"Accept the HIT" in preview.content
    assert client.get("/join/not-a-token/?workerId=A").status_code == 404
    assert not Participant.objects.exists()


def test_a_full_study_says_so_with_the_screen_out_code(client):
    _, recruitment = recruiting_study(max_participants=1)
    client.get(prolific(recruitment, "first"))
    response = client.__class__().get(prolific(recruitment, "second"))
    assert response.status_code == 200
    assert b"This study is full" in response.content
    assert b"https://app.prolific.com/submissions/complete?cc=SCREEN0UT" in response.content


def test_the_questionnaire_is_validated_and_stored(client):
    questionnaire = [
        {"name": "age", "label": "Your age", "type": "integer", "min": 18, "max": 99},
        {"name": "native", "label": "English first?", "type": "choice", "choices": ["yes", "no"]},
    ]
    study, recruitment = recruiting_study(questionnaire=questionnaire)
    client.get(prolific(recruitment))
    bad = client.post(page("consent", study), {"action": "agree", "q-age": "12", "q-native": "x"})
    assert bad.status_code == 422
    assert Participant.objects.get().status == Status.ARRIVED
    good = client.post(page("consent", study), {"action": "agree", "q-age": "30", "q-native": "no"})
    assert good["Location"] == page("training", study)
    assert Participant.objects.get().answers == {"age": 30, "native": "no"}


def test_declining_ends_politely(client):
    study, recruitment = recruiting_study(consent_text="Please agree.")
    client.get(prolific(recruitment))
    response = client.post(page("consent", study), {"action": "decline"}, follow=True)
    assert b"chose not to take part" in response.content
    assert Participant.objects.get().status == Status.DECLINED
    # the queue is closed to them too
    assert client.get(reverse("annotations:queue", args=[study.pk]))["Location"] == page(
        "end", study
    )


def test_training_shows_feedback_with_the_reason(client):
    study, recruitment = recruiting_study()
    client.get(prolific(recruitment))
    client.post(page("consent", study), {"action": "agree"})
    gold = GoldAnswer.objects.filter(use="training").first()
    response = client.post(page("training", study), {"gold": gold.pk, "answer": "neutral"})
    feedback = client.get(response["Location"])
    assert b"Not quite." in feedback.content
    assert b"You answered Neutral" in feedback.content
    assert b"expected answer was <strong>Positive</strong> because the sentence praises" in (
        feedback.content
    )


def test_work_package_then_completion_page_with_code_and_prolific_return(client):
    study, recruitment = recruiting_study(check_rate=0.5, items_per_participant=2)
    client.get(prolific(recruitment))
    through_training(client, study)
    assert client.get(page("qualified", study)).status_code == 200
    assert client.post(page("qualified", study))["Location"] == reverse(
        "annotations:queue", args=[study.pk]
    )
    participant = Participant.objects.get()
    question = study.questions.get()
    total = Assignment.objects.filter(annotator=participant.user).count()
    assert total == 3
    for n in range(total):
        queue = client.get(reverse("annotations:queue", args=[study.pk]))
        form = queue.context["form"]
        response = client.post(
            reverse("annotations:queue", args=[study.pk]),
            {
                "idempotency_key": uuid.uuid4(),
                "ticket": form.initial["ticket"],
                f"q{question.pk}": "neutral",
            },
            **HTMX,
        )
        if n < total - 1:
            assert response.status_code == 200
    assert response["HX-Redirect"] == page("end", study)  # the last answer leaves the queue
    end = client.get(page("end", study))
    assert b"C0MPLETE" in end.content
    assert b"https://app.prolific.com/submissions/complete?cc=C0MPLETE" in end.content
    assert Participant.objects.get().status == Status.DONE


def test_a_participant_cannot_open_manager_pages_or_another_study(client):
    study, recruitment = recruiting_study()
    other, _ = recruiting_study()
    client.get(prolific(recruitment))
    assert client.get(page("manage", study)).status_code == 403
    assert client.get(page("payments", study)).status_code == 403
    assert client.get(page("training", other)).status_code == 404
    assert client.get(reverse("annotations:queue", args=[other.pk])).status_code == 404


def test_staff_annotators_are_not_gated(client):
    study, _ = recruiting_study()
    staff = UserFactory()
    membership_add(study=study, user=staff, role=Membership.Role.ANNOTATOR)
    client.force_login(staff)
    assert client.get(reverse("annotations:queue", args=[study.pk])).status_code == 200
    assert client.get(page("training", study)).status_code == 404


def test_manager_page_saves_settings_and_lists_participants(client):
    study, recruitment = recruiting_study()
    client.__class__().get(prolific(recruitment, "p1"))  # a participant arrives
    client.force_login(study.created_by)
    response = client.get(page("manage", study))
    assert response.status_code == 200
    content = response.content.decode()
    assert f"/join/{recruitment.token}/?PROLIFIC_PID={{{{%PROLIFIC_PID%}}}}" in content
    assert ">p1<" in content
    data = {
        "is_open": "on",
        "platform": "mturk",
        "completion_code": "DONE1",
        "screen_out_code": "",
        "completion_url": "",
        "items_per_participant": 5,
        "max_participants": 9,
        "time_limit_minutes": 45,
        "check_rate": 0.2,
        "qualification_threshold": 0.8,
        "trace_threshold": 0.3,
        "attention_floor": 0.6,
        "consent_text": "",
        "questionnaire": "[]",
    }
    assert client.post(page("manage", study), data).status_code == 302
    recruitment.refresh_from_db()
    assert (recruitment.platform, recruitment.max_participants) == ("mturk", 9)
    bad = client.post(page("manage", study), {**data, "questionnaire": '[{"name": "x"}]'})
    assert bad.status_code == 422
    typo = client.post(page("manage", study), {**data, "questionnaire": '[\n  {"name": "x",}\n]'})
    assert typo.status_code == 422
    assert "Line 2, column 16" in typo.content.decode()  # not only "Enter a valid JSON."


def test_payment_csv_has_one_line_per_participant(client):
    study, recruitment = recruiting_study()
    client.get(prolific(recruitment, "p1"))
    client.get(prolific(recruitment, "p2"))
    client.force_login(study.created_by)
    response = client.get(page("payments", study))
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][:3] == ["platform", "platform_id", "status"]
    assert [r[1] for r in rows[1:]] == ["p1", "p2"]
    assert all(r[-1] == "no" for r in rows[1:])


def test_inside_the_mturk_frame_the_task_opens_in_its_own_tab(client):
    _, recruitment = recruiting_study(platform="mturk")
    params = {"workerId": "A1B2", "assignmentId": "X9", "hitId": "H1"}
    url = join_url(recruitment, **params, turkSubmitTo="https://workersandbox.mturk.com")
    response = client.get(url)
    assert response.status_code == 200
    assert "X-Frame-Options" not in response  # MTurk shows this page in its HIT frame
    policy = response["Content-Security-Policy"]
    assert "frame-ancestors https://worker.mturk.com https://workersandbox.mturk.com" in policy
    assert "form-action 'self' https://workersandbox.mturk.com https://www.mturk.com" in policy
    content = response.content.decode()
    assert 'action="https://workersandbox.mturk.com/mturk/externalSubmit"' in content
    assert 'name="assignmentId" value="X9"' in content
    assert f'href="{escape(join_url(recruitment, **params))}"' in content
    assert not Participant.objects.exists()  # no one is signed in inside the frame
    assert client.get(join_url(recruitment, **params)).status_code == 302  # the new tab
    assert Participant.objects.get().platform_id == "A1B2"
    evil = join_url(recruitment, **params, turkSubmitTo="https://evil.example")
    assert client.get(evil).status_code == 400
    assert client.get(prolific_like := join_url(recruitment, hitId="H")).status_code == 400
    assert "X-Frame-Options" in client.get(prolific_like)  # other pages stay unframeable


def test_a_signed_in_studio_user_is_not_turned_into_a_participant(client):
    study, recruitment = recruiting_study()
    client.force_login(study.created_by)
    response = client.get(prolific(recruitment))
    assert response.status_code == 409
    assert b"private window" in response.content
    assert not Participant.objects.exists()
    assert client.get(page("manage", study)).status_code == 200  # still the manager


def test_a_participant_of_one_study_may_follow_another_studys_link(client):
    _, first = recruiting_study()
    second_study, second = recruiting_study()
    client.get(prolific(first, "same"))
    assert client.get(prolific(second, "same"))["Location"] == page("consent", second_study)
    assert Participant.objects.count() == 2


def test_the_manager_page_shows_who_timed_out(client):
    study, recruitment = recruiting_study(time_limit_minutes=5)
    client.get(prolific(recruitment, "late"))
    through_training(client, study)
    client.post(page("qualified", study))
    Participant.objects.update(started_at=timezone.now() - timedelta(minutes=6))
    client.force_login(study.created_by)
    response = client.get(page("manage", study))
    assert "Timed out" in response.content.decode()
    participant = Participant.objects.get()
    assert (participant.status, participant.code_issued) == (Status.TIMED_OUT, "SCREEN0UT")
    assert not Assignment.objects.filter(annotator=participant.user).exists()
