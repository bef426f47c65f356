"""Forms of the annotators page, invitations and API tokens; the account services write."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import password_validation

from core.forms import ServiceFormMixin


class MemberAddForm(ServiceFormMixin, forms.Form):
    """An existing account, by username, to invite as an annotator.

    A plain text field: the form never looks the username up, so its errors cannot tell
    which usernames exist.
    """

    username = forms.CharField(
        max_length=150,
        widget=forms.TextInput(attrs={"autocomplete": "off", "autocapitalize": "none"}),
    )


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
    """How long a new one-time invitation link stays valid."""

    valid_days = forms.IntegerField(label="Valid for (days)", min_value=1, max_value=90, initial=14)


class JoinForm(ServiceFormMixin, forms.Form):
    """Joining a study as the signed-in user needs no fields, only the click (and CSRF)."""


class TokenRevokeForm(forms.Form):
    """Which of the signed-in user's API tokens to revoke: one by its key, or all of them."""

    key = forms.CharField(max_length=25, required=False)
    all = forms.BooleanField(required=False)
