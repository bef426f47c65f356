"""The annotators page (add, create, invite) and one-time invitation links."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from apps.accounts.services import invitation_create
from apps.studies.models import Membership, Study
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


def annotators_url(study: Study) -> str:
    return reverse("accounts:annotators", args=[study.pk])


def roles(study: Study) -> dict[str, str]:
    return dict(study.memberships.values_list("user__username", "role"))


# ---------- Annotators page ----------


def test_annotators_page_is_for_managers_only(client, study_setup, outsider):
    study, (annotator, *_) = study_setup
    assert client.get(annotators_url(study)).status_code == 302
    for user in (annotator, outsider):
        client.force_login(user)
        assert client.get(annotators_url(study)).status_code == 404


def test_members_are_listed(client, study_setup, manager):
    study, annotators = study_setup
    client.force_login(manager)
    html = client.get(annotators_url(study)).content.decode()
    for user in (manager, *annotators):
        assert user.username in html


def test_add_existing_account(client, study_setup, manager):
    study, _ = study_setup
    newcomer = UserFactory()
    client.force_login(manager)
    data = {"form": "add", "add-username": newcomer.username}
    response = client.post(annotators_url(study), data, follow=True)
    assert roles(study)[newcomer.username] == Membership.Role.ANNOTATOR
    assert "is now an annotator" in response.content.decode()
    assert newcomer.assignments.filter(study=study).exists()  # a running study gives work


def test_add_unknown_or_existing_member_shows_field_errors(client, study_setup, manager):
    study, _ = study_setup
    client.force_login(manager)
    response = client.post(annotators_url(study), {"form": "add", "add-username": "ghost"})
    assert response.status_code == 422
    assert "No account has this username." in response.content.decode()
    assert 'id="id_add-username_error"' in response.content.decode()
    data = {"form": "add", "add-username": manager.username}
    response = client.post(annotators_url(study), data)
    assert "already a manager" in response.content.decode()
    assert roles(study)[manager.username] == Membership.Role.MANAGER


def test_create_annotator_account(client, study_setup, manager):
    study, _ = study_setup
    client.force_login(manager)
    data = {
        "form": "create",
        "create-username": "newbie",
        "create-password": PASSWORD,
        "create-password_again": PASSWORD,
    }
    assert client.post(annotators_url(study), data).status_code == 302
    assert roles(study)["newbie"] == Membership.Role.ANNOTATOR
    assert get_user_model().objects.get(username="newbie").check_password(PASSWORD)


def test_create_account_errors(client, study_setup, manager):
    study, _ = study_setup
    client.force_login(manager)
    data = {
        "form": "create",
        "create-username": "newbie",
        "create-password": PASSWORD,
        "create-password_again": PASSWORD + "x",
    }
    response = client.post(annotators_url(study), data)
    assert response.status_code == 422
    assert "The two passwords differ." in response.content.decode()
    data["create-password"] = data["create-password_again"] = "123"
    response = client.post(annotators_url(study), data)
    assert 'id="id_create-password_error"' in response.content.decode()
    assert "too short" in response.content.decode()
    data["create-username"] = manager.username
    data["create-password"] = data["create-password_again"] = PASSWORD
    assert "That username is taken." in client.post(annotators_url(study), data).content.decode()
    assert not get_user_model().objects.filter(username="newbie").exists()


def test_unknown_form_is_a_bad_request(client, study_setup, manager):
    client.force_login(manager)
    assert client.post(annotators_url(study_setup[0]), {"form": "x"}).status_code == 400


def test_invitation_link_is_shown_once_in_full(client, study_setup, manager):
    study, _ = study_setup
    client.force_login(manager)
    response = client.post(annotators_url(study), {"form": "invite", "invite-valid_days": "7"})
    html = response.content.decode()
    link = re.search(r'value="(http://testserver/invite/[\w-]+/)"', html)
    assert link is not None
    assert "Copy" in html
    assert study.invitations.count() == 1
    again = client.get(annotators_url(study)).content.decode()
    assert link.group(1) not in again
    assert "open until" in again


def test_htmx_invitation_returns_the_fragment(client, study_setup, manager):
    study, _ = study_setup
    client.force_login(manager)
    response = client.post(
        annotators_url(study), {"form": "invite", "invite-valid_days": "14"}, HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="card" id="invitation"')
    assert "<html" not in html
    assert "/invite/" in html


# ---------- Invitation links ----------


@pytest.fixture
def invite(study_setup, manager):
    study, _ = study_setup
    _, token = invitation_create(study=study, created_by=manager)
    return study, reverse("accounts:invitation", args=[token])


def test_anonymous_signs_up_and_lands_in_the_queue(client, invite):
    study, url = invite
    page = client.get(url)
    assert page.status_code == 200
    assert 'name="password_again"' in page.content.decode()
    data = {"username": "walk-in", "password": PASSWORD, "password_again": PASSWORD}
    response = client.post(url, data)
    assert response.status_code == 302
    assert response.url == reverse("annotations:queue", args=[study.pk])
    assert roles(study)["walk-in"] == Membership.Role.ANNOTATOR
    assert client.get(response.url).status_code == 200  # signed in


def test_invitation_is_one_time(client, invite):
    _, url = invite
    data = {"username": "first", "password": PASSWORD, "password_again": PASSWORD}
    client.post(url, data)
    client.logout()
    response = client.get(url)
    assert response.status_code == 404
    assert "cannot be used" in response.content.decode()
    data["username"] = "second"
    assert client.post(url, data).status_code == 404
    assert not get_user_model().objects.filter(username="second").exists()


def test_unknown_token_is_a_clear_404(client, db):
    response = client.get(reverse("accounts:invitation", args=["nope"]))
    assert response.status_code == 404
    assert "already been used, or has expired" in response.content.decode()


def test_signed_in_user_joins_with_one_button(client, invite):
    study, url = invite
    user = UserFactory()
    client.force_login(user)
    page = client.get(url).content.decode()
    assert f"Join {study.name} as annotator" in page
    response = client.post(url)
    assert response.status_code == 302
    assert roles(study)[user.username] == Membership.Role.ANNOTATOR


def test_existing_member_is_not_offered_to_join(client, invite, manager):
    study, url = invite
    client.force_login(manager)
    html = client.get(url).content.decode()
    assert "already take part" in html
    client.post(url)
    assert roles(study)[manager.username] == Membership.Role.MANAGER
    assert study.invitations.get().used_at is None


def test_sign_up_errors_sit_next_to_fields(client, invite):
    _, url = invite
    response = client.post(url, {"username": "", "password": "a", "password_again": "b"})
    html = response.content.decode()
    assert response.status_code == 422
    assert 'id="id_username_error"' in html
    assert "The two passwords differ." in html
