"""Removing a member (answers stay, access goes at once) and revoking a pending invitation."""

from __future__ import annotations

import uuid

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from apps.accounts.models import Invitation
from apps.accounts.services import invitation_address, invitation_create, invitation_revoke
from apps.annotations.exporting import export_bytes
from apps.annotations.models import Annotation, Assignment
from apps.annotations.services import annotations_submit
from apps.studies.models import Membership
from apps.studies.services import membership_add, membership_remove
from tests.factories import PASSWORD, UserFactory, running_study

pytestmark = pytest.mark.django_db


def _answer(study, annotator, n: int) -> list[Assignment]:
    """The annotator answers their first ``n`` items; returns those assignments."""
    question = study.questions.get()
    label = question.labels.first().key
    done = list(Assignment.objects.filter(study=study, annotator=annotator, round=1)[:n])
    for assignment in done:
        annotations_submit(
            annotator=annotator,
            assignment=assignment,
            answers={question: label},
            idempotency_key=uuid.uuid4(),
        )
    return done


def _remove_url(study, user) -> str:
    return reverse("accounts:member_remove", args=[study.pk, user.pk])


# ---------- Removing a member ----------


def test_removal_keeps_the_answers_attributed_and_withdraws_only_unanswered_work(study_setup):
    study, (leaver, *_) = study_setup
    _answer(study, leaver, 2)
    open_before = Assignment.objects.filter(annotator=leaver, completed_at__isnull=True).count()
    withdrawn = membership_remove(study=study, user=leaver, by=study.created_by)
    assert withdrawn == open_before > 0
    assert not study.memberships.filter(user=leaver).exists()
    assert Annotation.objects.filter(annotator=leaver, question__study=study).count() == 2
    assert Assignment.objects.filter(annotator=leaver).count() == 2  # the answered ones
    exported = b"".join(export_bytes(study=study, fmt="csv")).decode()
    assert exported.count(f",{leaver.username},") == 2  # still theirs in the export


def test_removal_refuses_yourself_the_last_manager_and_non_members(study_setup, outsider):
    study, (annotator, *_) = study_setup
    manager = study.created_by
    other = UserFactory()
    membership_add(study=study, user=other, role=Membership.Role.MANAGER)
    for user, by in ((manager, manager), (outsider, manager)):
        with pytest.raises(ValidationError):
            membership_remove(study=study, user=user, by=by)
    membership_remove(study=study, user=other, by=manager)  # another manager may go
    with pytest.raises(ValidationError, match="at least one manager"):
        membership_remove(study=study, user=manager, by=annotator)
    assert study.memberships.filter(user=manager, role=Membership.Role.MANAGER).exists()


def test_a_removed_annotator_loses_the_queue_and_the_api_at_once(client, study_setup):
    study, (leaver, *_) = study_setup
    (answered,) = _answer(study, leaver, 1)
    question = study.questions.get()
    membership_remove(study=study, user=leaver, by=study.created_by)
    client.force_login(leaver)
    assert client.get(reverse("annotations:queue", args=[study.pk])).status_code == 404
    api = APIClient()
    api.force_authenticate(leaver)
    assert api.get(f"/api/studies/{study.pk}/next/").status_code == 404
    body = {
        "assignment": answered.pk,
        "answers": {question.key: question.labels.last().key},
        "idempotency_key": str(uuid.uuid4()),
    }
    assert api.post("/api/annotations/", body, format="json").status_code == 403
    assert Annotation.objects.get(annotator=leaver).revisions.count() == 1  # nothing appended


def test_remove_page_confirms_then_removes_without_javascript(client, study_setup, manager):
    study, (leaver, *_) = study_setup
    _answer(study, leaver, 3)
    client.force_login(manager)
    members = client.get(reverse("accounts:annotators", args=[study.pk])).content.decode()
    assert _remove_url(study, leaver) in members
    assert _remove_url(study, manager) not in members  # no way to remove yourself
    page = client.get(_remove_url(study, leaver)).content.decode()
    assert f"Remove {leaver.username} from {study.name}?" in page
    assert "Their 3 answers stay" in page
    assert study.memberships.filter(user=leaver).exists()  # looking changes nothing
    response = client.post(_remove_url(study, leaver), follow=True)
    assert response.redirect_chain == [(reverse("accounts:annotators", args=[study.pk]), 302)]
    assert f"{leaver.username} is no longer a member; their answers stay." in (
        response.content.decode()
    )
    assert not study.memberships.filter(user=leaver).exists()


def test_refused_removal_is_a_400_that_changes_nothing(client, study_setup, manager, outsider):
    study, _ = study_setup
    client.force_login(manager)
    response = client.post(_remove_url(study, manager))
    assert response.status_code == 400
    assert "You cannot remove yourself" in response.content.decode()
    assert study.memberships.filter(user=manager).exists()
    assert client.post(_remove_url(study, outsider)).status_code == 404  # not a member


# ---------- Revoking an invitation ----------


def _revoke_url(study, invitation) -> str:
    return reverse("accounts:invitation_revoke", args=[study.pk, invitation.pk])


def test_a_revoked_link_shows_a_revoked_page(client, study_setup, manager):
    study, _ = study_setup
    invitation, token = invitation_create(study=study, created_by=manager)
    client.force_login(manager)
    assert "Revoke" in client.get(reverse("accounts:annotators", args=[study.pk])).content.decode()
    response = client.post(_revoke_url(study, invitation), follow=True)
    assert "Invitation revoked" in response.content.decode()
    assert "revoked" in response.content.decode()  # the list says so
    invitation.refresh_from_db()
    assert (invitation.revoked_by, invitation.is_usable) == (manager, False)
    client.logout()
    response = client.get(reverse("accounts:invitation", args=[token]))
    assert response.status_code == 410
    assert "This invitation was revoked" in response.content.decode()
    assert not study.memberships.filter(user__username="newbie").exists()


def test_a_link_revoked_after_it_was_opened_cannot_be_accepted(client, study_setup, manager):
    study, _ = study_setup
    invitation, token = invitation_create(study=study, created_by=manager)
    client.get(reverse("accounts:invitation", args=[token]))  # hash now in the session
    invitation_revoke(study=study, invitation_id=invitation.pk, by=manager)
    accept = reverse("accounts:invitation_accept")
    data = {"username": "newbie", "password": PASSWORD, "password_again": PASSWORD}
    response = client.post(accept, data)
    assert response.status_code == 410
    assert "This invitation was revoked" in response.content.decode()
    assert not study.memberships.filter(user__username="newbie").exists()


def test_a_revoked_addressed_invitation_leaves_the_home_page_and_cannot_be_joined(
    client, study_setup, manager
):
    study, _ = study_setup
    invitee = UserFactory()
    invitation = invitation_address(study=study, created_by=manager, username=invitee.username)
    invitation_revoke(study=study, invitation_id=invitation.pk, by=manager)
    client.force_login(invitee)
    join = reverse("accounts:invitation_join", args=[invitation.pk])
    assert join not in client.get(reverse("studies:home")).content.decode()
    client.post(join)
    assert not study.memberships.filter(user=invitee).exists()
    again = invitation_address(study=study, created_by=manager, username=invitee.username)
    assert again.pk != invitation.pk  # a new invitation, not the revoked one


def test_used_or_foreign_invitations_cannot_be_revoked(client, study_setup, manager):
    study, (annotator, *_) = study_setup
    used, _ = invitation_create(study=study, created_by=manager)
    Invitation.objects.filter(pk=used.pk).update(used_by=annotator, used_at=used.created_at)
    other_study, _ = running_study()
    foreign, _ = invitation_create(study=other_study, created_by=other_study.created_by)
    client.force_login(manager)
    response = client.post(_revoke_url(study, used))
    assert response.status_code == 400
    assert "remove the member instead" in response.content.decode()
    assert client.post(_revoke_url(study, foreign)).status_code == 400
    assert not Invitation.objects.filter(revoked_at__isnull=False).exists()
