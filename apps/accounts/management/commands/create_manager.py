"""``manage.py create_manager USERNAME [--email ADDRESS] [--password-stdin]``: the first manager.

A new installation has no account that may create studies; this command makes one (the
``studies.manage_studies`` permission, not a superuser). The password is asked twice on a
terminal, or read from the first line of standard input with ``--password-stdin``.
"""

from __future__ import annotations

import getpass
import sys
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.accounts.services import manager_create


class Command(BaseCommand):
    help = (
        "Create an account that may create studies (a manager). The password is asked twice, "
        "or read from standard input with --password-stdin."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--email", default="", help="The manager's e-mail address.")
        parser.add_argument(
            "--password-stdin",
            action="store_true",
            help="Read the password from the first line of standard input (for scripts).",
        )

    def handle(self, *args: Any, username: str, email: str, password_stdin: bool, **options: Any):
        password = _read_password(from_stdin=password_stdin)
        try:
            user = manager_create(username=username, password=password, email=email)
        except ValidationError as exc:
            errors = "; ".join(
                f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()
            )
            raise CommandError(errors) from exc
        self.stdout.write(f"Created {user.username}, who may create studies once signed in.")


def _read_password(*, from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if not sys.stdin.isatty():
        raise CommandError("No terminal to ask the password on: pass it with --password-stdin.")
    password = getpass.getpass("Password: ")
    if password != getpass.getpass("Password (again): "):
        raise CommandError("The two passwords differ.")
    return password
