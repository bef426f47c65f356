"""``manage.py rebuild_quality [STUDY_ID ...]``: recompute quality states from scratch (every
question of a registered kind, with the kind's ``rebuild``)."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from analytics.pipeline import quality_rebuild
from apps.studies.kinds import question_kinds
from apps.studies.models import Question, Study


class Command(BaseCommand):
    help = "Recompute the quality state of studies from their current annotations."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("study_ids", nargs="*", type=int, help="Studies (default: all).")

    def handle(self, *args: Any, study_ids: list[int], **options: Any) -> None:
        studies = Study.objects.all()
        if study_ids:
            studies = studies.filter(pk__in=study_ids)
            missing = set(study_ids) - set(studies.values_list("pk", flat=True))
            if missing:
                raise CommandError(f"No study with id {', '.join(map(str, sorted(missing)))}.")
        questions = Question.objects.filter(
            study__in=studies, kind__in=list(question_kinds())
        ).select_related("study")
        for question in questions:
            started = time.perf_counter()
            quality_rebuild(question_id=question.pk)
            self.stdout.write(
                f"{question.study.name} / {question.key}: rebuilt in "
                f"{time.perf_counter() - started:.2f} s"
            )
