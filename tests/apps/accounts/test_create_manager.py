"""``manage.py create_manager``: the first account of a new installation that may create studies."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from apps.studies.selectors import can_create_studies

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-pilot-passphrase"


def create_manager(monkeypatch: pytest.MonkeyPatch, stdin: str, *args: str) -> str:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    out = io.StringIO()
    call_command("create_manager", *args, stdout=out)
    return out.getvalue()


def test_creates_an_account_that_may_create_studies(monkeypatch):
    output = create_manager(
        monkeypatch, PASSWORD + "\n", "lead", "--email", "lead@example.org", "--password-stdin"
    )
    user = get_user_model().objects.get(username="lead")
    assert can_create_studies(user=user)
    assert user.check_password(PASSWORD)
    assert user.email == "lead@example.org"
    assert not user.is_staff
    assert "lead" in output


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(("again", "created"), [(PASSWORD, True), ("a-typo-passphrase", False)])
def test_asks_twice_on_a_terminal(monkeypatch, again, created):
    answers = iter([PASSWORD, again])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(answers))
    monkeypatch.setattr("sys.stdin", Terminal())
    if created:
        call_command("create_manager", "lead", stdout=io.StringIO())
        assert can_create_studies(user=get_user_model().objects.get(username="lead"))
    else:
        with pytest.raises(CommandError, match="The two passwords differ"):
            call_command("create_manager", "lead")


@pytest.mark.parametrize(
    ("stdin", "args", "message"),
    [
        ("short\n", ["--password-stdin"], "password: This password is too short"),
        (PASSWORD + "\n", ["--password-stdin", "--email", "not-an-address"], "email:"),
        ("", [], "--password-stdin"),  # not a terminal and no password given
    ],
)
def test_refuses_bad_input_and_creates_nothing(monkeypatch, stdin, args, message):
    with pytest.raises(CommandError, match=message):
        create_manager(monkeypatch, stdin, "lead", *args)
    assert not get_user_model().objects.filter(username="lead").exists()


def test_refuses_a_taken_username(monkeypatch):
    get_user_model().objects.create_user(username="Lead", password=PASSWORD)
    with pytest.raises(CommandError, match="username: That username is taken"):
        create_manager(monkeypatch, PASSWORD + "\n", "lead", "--password-stdin")
