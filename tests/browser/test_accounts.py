"""Accounts in a real browser: invitations (link and addressed), API tokens, the lockout page."""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from knox.models import AuthToken
from playwright.sync_api import expect

from apps.accounts.services import invitation_create
from apps.studies.models import Membership
from tests.factories import PASSWORD, UserFactory, running_study

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_invitation_link_leaves_the_address_bar_and_the_newcomer_joins(open_page, screenshot):
    study, _ = running_study(n_items=3, n_annotators=1)
    _, token = invitation_create(study=study, created_by=study.created_by)
    page = open_page()
    page.goto(f"/invite/{token}/")
    expect(page).to_have_url(re.compile(r"/invitations/accept/$"))
    assert token not in page.url
    assert token not in page.content()
    screenshot(page, "invitation-clean-url")
    page.get_by_label("Username").fill("walk-in")
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Create account and join").click()
    expect(page).to_have_url(re.compile(rf"/studies/{study.pk}/annotate/"))
    assert study.memberships.filter(user__username="walk-in").exists()


def test_an_existing_account_accepts_an_invitation_on_its_home_page(open_page, sign_in, screenshot):
    study, _ = running_study(n_items=3, n_annotators=1)
    newcomer = UserFactory()
    manager_page = open_page()
    sign_in(manager_page, study.created_by.username)
    manager_page.goto(f"/studies/{study.pk}/annotators/")
    invite = manager_page.get_by_role("region", name="Invite an existing account")
    invite.get_by_label("Username").fill(newcomer.username)
    invite.get_by_role("button", name="Invite", exact=True).click()  # role: annotator by default
    expect(manager_page.get_by_role("status")).to_contain_text("joins the study when it accepts")
    assert not study.memberships.filter(user=newcomer).exists()

    page = open_page()
    sign_in(page, newcomer.username)
    page.goto("/")
    invitations = page.get_by_role("region", name="Invitations")
    expect(invitations).to_contain_text(study.name)
    screenshot(page, "invitation-on-home-page")
    invitations.get_by_role("button", name=re.compile("Join")).click()
    expect(page).to_have_url(re.compile(rf"/studies/{study.pk}/annotate/"))
    assert study.memberships.get(user=newcomer).role == Membership.Role.ANNOTATOR


def test_a_user_sees_and_revokes_their_api_tokens(open_page, sign_in, screenshot):
    user = UserFactory()
    _, kept = AuthToken.objects.create(user=user)
    _, leaked = AuthToken.objects.create(user=user)
    page = open_page()
    sign_in(page, user.username)
    page.get_by_role("link", name="API tokens").click()
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(2)
    screenshot(page, "api-tokens")
    page.get_by_role("button", name=f"Revoke token {leaked[:8]}").click()
    expect(page.get_by_role("status")).to_contain_text("1 token revoked.")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text(kept[:8])
    assert list(AuthToken.objects.values_list("token_key", flat=True)) == [kept[:15]]


@pytest.mark.usefixtures("axes_on")
def test_repeated_wrong_passwords_show_the_lockout_page(open_page, screenshot):
    user = UserFactory()
    page = open_page()
    page.goto("/accounts/login/")
    for _ in range(settings.AXES_FAILURE_LIMIT):
        page.get_by_label("Username").fill(user.username)
        page.get_by_label("Password").fill("wrong")
        page.get_by_role("button", name="Sign in").click()
        if page.get_by_role("heading", name="Signing in is blocked for a while").count():
            break
        page.goto("/accounts/login/")
    expect(page.get_by_role("alert")).to_contain_text("Too many failed sign-ins")
    screenshot(page, "sign-in-locked-out")
    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("Too many failed sign-ins")
