"""``manage.py register_model_run``: register a model's per-annotator outputs and evaluate them."""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.models_registry.importing import upload_format
from apps.models_registry.models import ModelRun
from apps.models_registry.selectors import latest_evaluation
from apps.models_registry.services import (
    Upload,
    model_run_register,
    model_runs_evaluate_pending,
)
from apps.studies.models import Membership, Study


class Command(BaseCommand):
    help = (
        "Register a model run (per-annotator predictions, optional feature and attention "
        "vectors; CSV, JSON Lines or NPZ, the format from the extension) and print its DIC and "
        "BAE. All or nothing: on any error nothing is stored, each error is printed with its "
        "file, line and field, and the exit code is 2."
    )

    def add_base_argument(self, parser: CommandParser, *args: Any, **kwargs: Any) -> None:
        """Leave out Django's ``--version`` (the program's): here it is the run's version."""
        if "--version" not in args:
            super().add_base_argument(parser, *args, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--study", type=int, required=True, help="The study's id.")
        parser.add_argument("--question", required=True, help="The question's key.")
        parser.add_argument("--name", required=True)
        parser.add_argument("--version", dest="run_version", metavar="VERSION", required=True)
        parser.add_argument("--predictions", type=Path, required=True)
        parser.add_argument("--features", type=Path)
        parser.add_argument("--attention", type=Path)
        parser.add_argument("--metadata", default="{}", help="A JSON object.")
        parser.add_argument(
            "--user", help="Username recorded as creator (default: the study's creator)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        study = Study.objects.filter(pk=options["study"]).first()
        if study is None:
            raise CommandError(f"No study with id {options['study']}.")
        question = study.questions.filter(key=options["question"]).first()
        if question is None:
            raise CommandError(f"Study {study.pk} has no question {options['question']!r}.")
        creator = study.created_by
        if options["user"]:
            creator = (
                get_user_model()
                .objects.filter(
                    username=options["user"],
                    memberships__study=study,
                    memberships__role=Membership.Role.MANAGER,
                )
                .first()
            )
            if creator is None:
                raise CommandError(f"{options['user']!r} is not a manager of study {study.pk}.")
        try:
            metadata = json.loads(options["metadata"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--metadata is not JSON: {exc.msg}.", returncode=2) from exc
        if not isinstance(metadata, dict):
            raise CommandError("--metadata must be a JSON object.", returncode=2)
        with ExitStack() as files:
            uploads: dict[str, Upload | None] = {}
            for field in ("predictions", "features", "attention"):
                path: Path | None = options[field]
                if path is None:
                    uploads[field] = None
                    continue
                try:
                    fmt = upload_format(path.name)
                    uploads[field] = Upload(files.enter_context(path.open("rb")), fmt)
                except OSError as exc:
                    raise CommandError(f"Cannot read {path}: {exc.strerror}.") from exc
                except ValidationError as exc:
                    raise CommandError(" ".join(exc.messages), returncode=2) from exc
            try:
                run = model_run_register(
                    study=study,
                    question=question,
                    name=options["name"],
                    version=options["run_version"],
                    created_by=creator,
                    metadata=metadata,
                    predictions=uploads["predictions"],  # type: ignore[arg-type]
                    features=uploads["features"],
                    attention=uploads["attention"],
                )
            except ValidationError as exc:
                count = 0
                for field, messages in exc.message_dict.items():
                    for message in messages:
                        self.stderr.write(f"{field}: {message}")
                        count += 1
                raise CommandError(
                    f"{count} error(s); nothing was registered.", returncode=2
                ) from exc
        self.stdout.write(_summary(_evaluated(run)))


def _evaluated(run: ModelRun, timeout: float = 600.0) -> ModelRun:
    """The run once evaluated: a command is no request, so it evaluates the run itself (or,
    when the background evaluation claimed it first, waits for that one; the claim keeps the
    two from evaluating it twice)."""
    model_runs_evaluate_pending(question_id=run.question_id)
    deadline = time.monotonic() + timeout
    run.refresh_from_db()
    while run.evaluating and time.monotonic() < deadline:
        time.sleep(0.2)
        run.refresh_from_db()
    return run


def _summary(run: ModelRun) -> str:
    """One line with the run's id, DIC and BAE."""
    evaluation = latest_evaluation(run=run)
    figures = evaluation.figures if evaluation else {}

    def fmt(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.3f}"

    bae = figures.get("bae", {})
    return (
        f"registered run {run.pk} ({run}): DIC {fmt(figures.get('dic'))}, "
        f"BAE feature {fmt(bae.get('feature'))}, BAE region {fmt(bae.get('attention'))}"
    )
