"""Data of the fault tests, run in a subprocess against the test's private database.

``python -m tests.faults.fixture_data seed N_ITEMS N_ANNOTATORS`` makes a running study and
prints JSON: the question, the manager's session cookie, and per annotator an API token and
their first-round assignment ids. ``backlog N_ITEMS N_ANNOTATORS`` does the same, then imports
an answer for every assignment and leaves them all unanalysed (pending, empty state): one big
batch for a worker. ``check QUESTION_ID`` prints the invariants: pending answers, whether the
stored statistics equal a rebuild from scratch, and the counts of annotations and revisions.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotate_site.settings")
django.setup()

from django.apps import apps  # noqa: E402
from django.conf import settings  # noqa: E402
from django.test import Client  # noqa: E402

from analytics.models import QualityState  # noqa: E402
from apps.annotations.importing import (  # noqa: E402
    FinishedAnnotation,
    annotations_import_finished,
)
from apps.annotations.models import Annotation, Assignment, Revision  # noqa: E402
from apps.categorical.quality import quality_stats  # noqa: E402
from apps.studies.models import Question  # noqa: E402
from core.auth import BACKEND  # noqa: E402
from tests.factories import running_study  # noqa: E402

LABELS = ("negative", "neutral", "positive")


def _token(user: Any) -> str:
    """An API token for ``user``, whichever token scheme the site runs."""
    if apps.is_installed("knox"):
        from knox.models import AuthToken

        return AuthToken.objects.create(user)[1]
    from rest_framework.authtoken.models import Token

    return Token.objects.create(user=user).key


def _session(user: Any) -> str:
    client = Client()
    client.force_login(user, backend=BACKEND)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def seed(n_items: int, n_annotators: int) -> dict[str, Any]:
    study, annotators = running_study(n_items=n_items, n_annotators=n_annotators, repeat_rate=0)
    question = study.questions.get()
    return {
        "study": study.pk,
        "question": question.pk,
        "manager_session": _session(study.created_by),
        "annotators": [
            {
                "username": user.username,
                "token": _token(user),
                "assignments": list(
                    Assignment.objects.filter(annotator=user, round=1)
                    .order_by("position")
                    .values_list("pk", flat=True)
                ),
            }
            for user in annotators
        ],
    }


def backlog(n_items: int, n_annotators: int) -> dict[str, Any]:
    """A study whose every answer is stored but none analysed yet."""
    found = seed(n_items, n_annotators)
    question = Question.objects.get(pk=found["question"])
    study = question.study
    records = [
        FinishedAnnotation(
            item=item.external_id,
            annotator=annotator["username"],
            question=question.key,
            value=LABELS[(k * 7 + j * 3 + k * j) % 3],
        )
        for k, item in enumerate(study.items.order_by("pk"))
        for j, annotator in enumerate(found["annotators"])
    ]
    annotations_import_finished(study=study, records=records)  # rebuilds once committed
    QualityState.objects.filter(question=question).delete()
    Annotation.objects.filter(question=question).update(
        analysis_pending=True, analysed_revision=None
    )
    return found


def check(question_id: int) -> dict[str, Any]:
    _, stored = quality_stats(question_id=question_id)
    _, fresh = quality_stats(question_id=question_id, fresh=True)
    annotations = Annotation.objects.filter(question_id=question_id)
    return {
        "pending": annotations.filter(analysis_pending=True).count(),
        "equals_rebuild": bool(stored.equals(fresh)),
        "annotations": annotations.count(),
        "without_revision": annotations.filter(current_revision__isnull=True).count(),
        "revisions": Revision.objects.filter(annotation__question_id=question_id).count(),
    }


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    handler = {"seed": seed, "backlog": backlog, "check": check}[command]
    print(json.dumps(handler(*map(int, args))))
