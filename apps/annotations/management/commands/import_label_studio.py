"""``manage.py import_label_studio PATH --name NAME --manager USERNAME [--label-config XML]``.

Creates a closed study from a Label Studio JSON export (:mod:`apps.exchange.label_studio`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.exchange.label_studio import label_studio_import


class Command(BaseCommand):
    help = (
        "Create a closed study from a Label Studio JSON export: its tasks as items, its "
        "choices and rating controls as categorical questions, its annotations as finished "
        "answers. All or nothing: whatever does not map is printed task by task, nothing is "
        "stored and the exit code is 2."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="The Label Studio JSON export.")
        parser.add_argument("--name", required=True, help="The new study's name.")
        parser.add_argument("--manager", required=True, help="Username of its manager.")
        parser.add_argument(
            "--label-config",
            type=Path,
            help="The project's labelling configuration (XML file): the whole scales.",
        )

    def handle(self, *args: Any, path: Path, **options: Any) -> None:
        manager = get_user_model().objects.filter(username=options["manager"]).first()
        if manager is None:
            raise CommandError(f"No user {options['manager']!r}.")
        try:
            config = options["label_config"].read_text() if options["label_config"] else ""
            with path.open("rb") as stream:
                study = label_studio_import(
                    manager=manager, stream=stream, name=options["name"], label_config=config
                )
        except OSError as exc:
            raise CommandError(f"Cannot read {exc.filename}: {exc.strerror}.") from exc
        except ValidationError as exc:
            for message in exc.messages:
                self.stderr.write(message)
            raise CommandError(
                f"{len(exc.messages)} problem(s) in {path.name}; nothing was imported.",
                returncode=2,
            ) from exc
        answers = sum(q.annotations.count() for q in study.questions.all())
        self.stdout.write(
            f"study {study.pk}: {study.items.count()} items, {study.questions.count()} "
            f"question(s), {answers} answers"
        )
