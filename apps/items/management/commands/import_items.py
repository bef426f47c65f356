"""``manage.py import_items STUDY_ID PATH [--format csv|jsonl]``: load items from a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.items.importing import FORMATS, ItemImportError, format_for_name
from apps.items.services import items_import
from apps.studies.models import Study


class Command(BaseCommand):
    help = (
        "Import items into a study from a CSV or JSON Lines file. Items whose external_id the "
        "study already has are updated. All or nothing: on any error nothing is stored, each "
        "error is printed with its line and field, and the exit code is 2."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study_id", type=int)
        parser.add_argument("path", type=Path)
        parser.add_argument("--format", choices=FORMATS, help="Default: from the file extension.")

    def handle(self, *args: Any, study_id: int, path: Path, **options: Any) -> None:
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"No study with id {study_id}.")
        try:
            fmt = options["format"] or format_for_name(path.name)
            with path.open("rb") as stream:
                summary = items_import(study=study, stream=stream, fmt=fmt)
        except OSError as exc:
            raise CommandError(f"Cannot read {path}: {exc.strerror}.") from exc
        except ItemImportError as exc:
            for message in exc.messages:
                self.stderr.write(message)
            raise CommandError(
                f"{len(exc.errors)} error(s) in {path.name}; nothing was imported.", returncode=2
            ) from exc
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages), returncode=2) from exc
        self.stdout.write(f"created {summary.created}, updated {summary.updated}")
