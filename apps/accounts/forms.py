"""Forms of the annotators page, invitations and API tokens; the account services write."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import password_validation

from apps.studies.models import Membership
from core.forms import ServiceFormMixin

#: The roles a manager invites to from the annotators page (a manager is made through the API).
INVITED_ROLES = [
    (Membership.Role.ANNOTATOR, "Annotator"),
    (Membership.Role.REVIEWER, "Reviewer (reads and adjudicates)"),
]


def _role_field() -> forms.TypedChoiceField:
    """The invited role; annotator when the form does not send one."""
    return forms.TypedChoiceField(
        label="Role",
        choices=INVITED_ROLES,
        initial=Membership.Role.ANNOTATOR,
        required=False,
        empty_value=Membership.Role.ANNOTATOR,
    )


class MemberAddForm(ServiceFormMixin, forms.Form):
    """An existing account, by username, to invite as an annotator or a reviewer.

    A plain text field: the form never looks the username up, so its errors cannot tell
    which usernames exist.
    """

    username = forms.CharField(
        max_length=150,
        widget=forms.TextInput(attrs={"autocomplete": "off", "autocapitalize": "none"}),
    )
    role = _role_field()


class AccountForm(ServiceFormMixin, forms.Form):
    """A new account: username and password typed twice (the service checks the rest)."""

    username = forms.CharField(
        max_length=150,
        widget=forms.TextInput(attrs={"autocomplete": "username", "autocapitalize": "none"}),
        help_text="Letters, digits and @ . + - _ only.",
    )
    password = forms.CharField(
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text=password_validation.password_validators_help_text_html(),
    )
    password_again = forms.CharField(
        label="Password again",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        password, again = data.get("password"), data.get("password_again")
        if password and again and password != again:
            self.add_error("password_again", "The two passwords differ.")
        return data


class InvitationForm(ServiceFormMixin, forms.Form):
    """The role a new one-time invitation link gives and how long it stays valid."""

    role = _role_field()
    valid_days = forms.IntegerField(label="Valid for (days)", min_value=1, max_value=90, initial=14)


class JoinForm(ServiceFormMixin, forms.Form):
    """Joining a study as the signed-in user needs no fields, only the click (and CSRF)."""


class TokenRevokeForm(forms.Form):
    """Which of the signed-in user's API tokens to revoke: one by its key, or all of them."""

    key = forms.CharField(max_length=25, required=False)
    all = forms.BooleanField(required=False)
