"""``manage.py export_annotations``: a study's annotations to a file, with a provenance record.

``export_annotations STUDY_ID --format csv|jsonl|parquet [--curated] [--history]
[--annotators usernames|pseudonyms] --output PATH`` writes the data file to PATH and its
provenance record to ``PATH.provenance.json``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.annotations.exporting import CONTENT_TYPES, export_bytes, provenance, provenance_json
from apps.exchange.identity import IDENTITIES, USERNAMES
from apps.studies.models import Study


class Command(BaseCommand):
    help = (
        "Write a study's annotations (current answers, or every revision with --history; "
        "without the excluded annotators with --curated) to PATH, and its provenance record "
        "(what was left out and why, open flags, the file's SHA-256) to PATH.provenance.json. "
        "If annotations change while the file is written, nothing is kept and the exit code "
        "is 2: run it again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study_id", type=int)
        parser.add_argument("--format", choices=list(CONTENT_TYPES), required=True)
        parser.add_argument(
            "--curated", action="store_true", help="Leave out the excluded annotators."
        )
        parser.add_argument("--history", action="store_true", help="Every revision.")
        parser.add_argument(
            "--annotators",
            choices=IDENTITIES,
            default=USERNAMES,
            help="Name annotators by username (default) or by stable per-study pseudonyms.",
        )
        parser.add_argument("--output", type=Path, required=True, help="The data file to write.")

    def handle(self, *args: Any, study_id: int, **options: Any) -> None:
        study = Study.objects.filter(pk=study_id).first()
        if study is None:
            raise CommandError(f"No study with id {study_id}.")
        fmt, output = options["format"], options["output"]
        export = {
            "curated": options["curated"],
            "include_history": options["history"],
            "identity": options["annotators"],
        }
        record = provenance(study=study, fmt=fmt, **export)
        sidecar = output.with_name(f"{output.name}.provenance.json")
        partial = output.with_name(f".{output.name}.partial")
        digest = hashlib.sha256()
        try:
            with partial.open("wb") as stream:
                for chunk in export_bytes(study=study, fmt=fmt, **export):
                    digest.update(chunk)
                    stream.write(chunk)
            if digest.hexdigest() != record["file"]["sha256"]:
                raise CommandError(
                    "The annotations changed while exporting; nothing was written. Run it again.",
                    returncode=2,
                )
            os.replace(partial, output)
            sidecar.write_text(provenance_json(record), encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot write {exc.filename}: {exc.strerror}.") from exc
        finally:
            partial.unlink(missing_ok=True)
        counts = record["counts"]
        self.stdout.write(
            f"{output}: {counts['rows_exported']} of {counts['rows_total']} rows, "
            f"{counts['annotators_kept']} of {counts['annotators_total']} annotators; "
            f"sha256 {record['file']['sha256']}\n{sidecar}"
        )
