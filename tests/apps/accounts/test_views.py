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
    for user, status in ((annotator, 403), (outsider, 404)):
        client.force_login(user)
        assert client.get(annotators_url(study)).status_code == status


def test_members_are_listed(client, study_setup, manager):
    study, annotators = study_setup
    client.force_login(manager)
    html = client.get(annotators_url(study)).content.decode()
    for user in (manager, *annotators):
        assert user.username in html


def test_adding_an_existing_account_invites_it_and_it_joins_on_acceptance(
    client, study_setup, manager
):
    study, _ = study_setup
    newcomer = UserFactory()
    client.force_login(manager)
    data = {"form": "add", "add-username": newcomer.username}
    response = client.post(annotators_url(study), data, follow=True)
    assert "joins the study when it accepts" in response.content.decode()
    assert newcomer.username not in roles(study)  # no membership without consent
    assert not newcomer.assignments.filter(study=study).exists()
    invitation = study.invitations.get()
    assert invitation.invitee == newcomer
    assert invitation.token_hash is None

    client.force_login(newcomer)
    home = client.get(reverse("studies:home")).content.decode()
    assert f"invites you to take part in\n          <strong>{study.name}</strong>" in home
    join = reverse("accounts:invitation_join", args=[invitation.pk])
    assert join in home
    response = client.post(join)
    assert response.status_code == 302
    assert response.url == reverse("annotations:queue", args=[study.pk])
    assert roles(study)[newcomer.username] == Membership.Role.ANNOTATOR
    assert newcomer.assignments.filter(study=study).exists()  # a running study gives work
    assert client.post(join).status_code == 302  # used: a message, nothing else
    assert study.memberships.filter(user=newcomer).count() == 1


def test_adding_an_existing_superuser_needs_their_consent(client, study_setup, manager):
    study, _ = study_setup
    admin = UserFactory(is_superuser=True, is_staff=True)
    client.force_login(manager)
    client.post(annotators_url(study), {"form": "add", "add-username": admin.username})
    assert admin.username not in roles(study)
    assert study.invitations.get().invitee == admin


def test_only_the_invitee_can_accept(client, study_setup, manager):
    study, _ = study_setup
    newcomer, intruder = UserFactory(), UserFactory()
    client.force_login(manager)
    client.post(annotators_url(study), {"form": "add", "add-username": newcomer.username})
    invitation = study.invitations.get()
    client.force_login(intruder)
    assert study.name not in client.get(reverse("studies:home")).content.decode()
    response = client.post(reverse("accounts:invitation_join", args=[invitation.pk]), follow=True)
    assert "not yours" in response.content.decode()
    assert intruder.username not in roles(study)
    assert study.invitations.get().used_at is None


def test_inviting_tells_nothing_about_which_usernames_exist(client, study_setup, manager):
    study, _ = study_setup
    existing = UserFactory()
    client.force_login(manager)
    pages, invitees = [], []
    for username in (existing.username, "no-such-user"):
        data = {"form": "add", "add-username": username}
        response = client.post(annotators_url(study), data, follow=True)
        assert response.status_code == 200
        html = re.sub(
            r'(csrfmiddlewaretoken" value=|"X-CSRFToken": )"[^"]+"', "", response.content.decode()
        )
        html = re.sub(r"/invitations/\d+/", "", html)  # the Revoke form names the invitation
        pages.append(html.replace(username, "NAME"))
        invitation = study.invitations.get()  # the same state for the next username
        invitees.append(invitation.invitee)
        invitation.delete()
    assert "NAME" in pages[0]
    assert pages[0] == pages[1]
    assert invitees == [existing, None]


def test_inviting_a_member_or_no_username_shows_field_errors(client, study_setup, manager):
    study, _ = study_setup
    client.force_login(manager)
    response = client.post(annotators_url(study), {"form": "add", "add-username": ""})
    assert response.status_code == 422
    assert 'id="id_add-username_error"' in response.content.decode()
    data = {"form": "add", "add-username": manager.username}
    response = client.post(annotators_url(study), data)
    assert response.status_code == 422
    assert "already a manager" in response.content.decode()  # on the member list anyway
    assert roles(study)[manager.username] == Membership.Role.MANAGER
    assert not study.invitations.exists()


def test_inviting_twice_keeps_one_open_invitation(client, study_setup, manager):
    study, _ = study_setup
    newcomer = UserFactory()
    client.force_login(manager)
    for _ in range(2):
        client.post(annotators_url(study), {"form": "add", "add-username": newcomer.username})
    assert study.invitations.count() == 1


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
    link = re.search(r">(http://testserver/invite/[\w-]+/)</textarea>", html)
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


ACCEPT = "/invitations/accept/"  # the clean URL, with no token in it


def test_the_token_is_exchanged_for_the_session_and_leaves_the_url(client, invite):
    _, url = invite
    token = url.removeprefix("/invite/").removesuffix("/")
    response = client.get(url)
    assert response.status_code == 302
    assert response.url == ACCEPT
    assert token not in response.url
    page = client.get(ACCEPT)
    html = page.content.decode()
    assert token not in html
    assert f"?next={ACCEPT}" in html  # the sign-in link comes back to the clean URL
    assert token not in "".join(str(value) for value in client.session.values())


def test_anonymous_signs_up_and_lands_in_the_queue(client, invite):
    study, url = invite
    page = client.get(url, follow=True)
    assert page.redirect_chain == [(ACCEPT, 302)]
    assert 'name="password_again"' in page.content.decode()
    data = {"username": "walk-in", "password": PASSWORD, "password_again": PASSWORD}
    response = client.post(ACCEPT, data)
    assert response.status_code == 302
    assert response.url == reverse("annotations:queue", args=[study.pk])
    assert roles(study)["walk-in"] == Membership.Role.ANNOTATOR
    assert client.get(response.url).status_code == 200  # signed in


def test_existing_account_signs_in_and_comes_back_to_join(client, invite):
    study, url = invite
    user = UserFactory()
    client.get(url)
    response = client.post(
        reverse("login") + f"?next={ACCEPT}",
        {"username": user.username, "password": PASSWORD, "next": ACCEPT},
    )
    assert response.status_code == 302
    assert response.url == ACCEPT
    assert f"Join {study.name} as annotator" in client.get(ACCEPT).content.decode()
    assert client.post(ACCEPT).status_code == 302
    assert roles(study)[user.username] == Membership.Role.ANNOTATOR


def test_invitation_is_one_time(client, invite):
    _, url = invite
    data = {"username": "first", "password": PASSWORD, "password_again": PASSWORD}
    client.get(url)
    client.post(ACCEPT, data)
    client.logout()
    response = client.get(url)
    assert response.status_code == 404
    assert "cannot be used" in response.content.decode()
    data["username"] = "second"
    assert client.post(ACCEPT, data).status_code == 404
    assert not get_user_model().objects.filter(username="second").exists()


def test_unknown_token_is_a_clear_404(client, db):
    response = client.get(reverse("accounts:invitation", args=["nope"]))
    assert response.status_code == 404
    assert "already been used, or has expired" in response.content.decode()
    assert client.get(ACCEPT).status_code == 404  # nothing opened in this session


def test_signed_in_user_joins_with_one_button(client, invite):
    study, url = invite
    user = UserFactory()
    client.force_login(user)
    page = client.get(url, follow=True).content.decode()
    assert f"Join {study.name} as annotator" in page
    response = client.post(ACCEPT)
    assert response.status_code == 302
    assert roles(study)[user.username] == Membership.Role.ANNOTATOR


def test_existing_member_is_not_offered_to_join(client, invite, manager):
    study, url = invite
    client.force_login(manager)
    html = client.get(url, follow=True).content.decode()
    assert "already take part" in html
    client.post(ACCEPT)
    assert roles(study)[manager.username] == Membership.Role.MANAGER
    assert study.invitations.get().used_at is None


def test_sign_up_errors_sit_next_to_fields(client, invite):
    _, url = invite
    client.get(url)
    response = client.post(ACCEPT, {"username": "", "password": "a", "password_again": "b"})
    html = response.content.decode()
    assert response.status_code == 422
    assert 'id="id_username_error"' in html
    assert "The two passwords differ." in html


# ---------- Inviting reviewers ----------


def test_an_existing_account_is_invited_as_reviewer_from_the_page(client, study_setup, manager):
    study, _ = study_setup
    newcomer = UserFactory()
    client.force_login(manager)
    page = client.get(annotators_url(study)).content.decode()
    assert 'name="add-role"' in page
    assert 'value="reviewer"' in page
    data = {"form": "add", "add-username": newcomer.username, "add-role": "reviewer"}
    client.post(annotators_url(study), data)
    invitation = study.invitations.get()
    assert invitation.role == Membership.Role.REVIEWER
    assert "(reviewer)" in client.get(annotators_url(study)).content.decode()
    client.force_login(newcomer)
    client.post(reverse("accounts:invitation_join", args=[invitation.pk]))
    assert roles(study)[newcomer.username] == Membership.Role.REVIEWER
    assert not newcomer.assignments.filter(study=study).exists()  # reviewers get no queue


def test_an_invitation_link_can_make_a_reviewer(client, study_setup, manager):
    study, _ = study_setup
    client.force_login(manager)
    data = {"form": "invite", "invite-role": "reviewer", "invite-valid_days": "7"}
    html = client.post(annotators_url(study), data).content.decode()
    link = re.search(r">(http://testserver/invite/[\w-]+/)</textarea>", html)
    assert study.invitations.get().role == Membership.Role.REVIEWER
    client.logout()
    client.get(link.group(1).removeprefix("http://testserver"))
    data = {"username": "rev", "password": PASSWORD, "password_again": PASSWORD}
    client.post(ACCEPT, data)
    assert roles(study)["rev"] == Membership.Role.REVIEWER


@pytest.mark.parametrize("role", ["manager", "owner"])
def test_the_page_invites_annotators_and_reviewers_only(client, study_setup, manager, role):
    study, _ = study_setup
    client.force_login(manager)
    data = {"form": "add", "add-username": UserFactory().username, "add-role": role}
    response = client.post(annotators_url(study), data)
    assert response.status_code == 422
    assert 'id="id_add-role_error"' in response.content.decode()
    assert not study.invitations.exists()
