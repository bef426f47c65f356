"""The heatmap order and the MDS map are fitted once per snapshot window (issue 22).

Measured on the quality worker, one publish of a categorical question per pass: the order's
clustering took 7.6 ms at 128 annotators and 198 ms at 512, on every pass; the map (1.3 s at
512) was refitted whenever an annotator joined, which in a crowd's first minutes is nearly
every pass. Within a window a publish now keeps both: the order as it was with newcomers
appended at its end, the map without them until the next window's fit.
"""

from __future__ import annotations

import datetime as dt
import importlib
import uuid
from unittest import mock

import numpy as np
import pytest
from django.apps import apps as django_apps
from django.utils import timezone

from analytics import indicators
from analytics.config import quality_config
from analytics.indicators import pair_matrices
from analytics.models import QualitySnapshot, QualityState
from analytics.publishing import quality_publish
from apps.annotations.models import Assignment
from apps.annotations.services import annotations_submit
from tests.factories import running_study

pytestmark = pytest.mark.django_db

LABELS = ["negative", "neutral", "positive"]


def _answer(study, annotators, django_capture_on_commit_callbacks) -> None:
    """Each of ``annotators`` answers every open item (labels varying by item and person)."""
    question = study.questions.get()
    with django_capture_on_commit_callbacks(execute=True):
        for a, user in enumerate(annotators):
            open_ = Assignment.objects.filter(study=study, annotator=user, completed_at=None)
            for i, assignment in enumerate(open_.order_by("position")):
                annotations_submit(
                    annotator=user,
                    assignment=assignment,
                    answers={question: LABELS[(i + (a % 2) * (i % 2)) % 3]},
                    idempotency_key=uuid.uuid4(),
                )


def _latest(question) -> QualitySnapshot:
    return QualitySnapshot.objects.filter(question=question).order_by("-created_at", "-id")[0]


def _refit(question) -> dict:
    """Age the snapshots past the window and publish: the layout is fitted anew."""
    window = dt.timedelta(seconds=quality_config().snapshot_interval)
    QualitySnapshot.objects.filter(question=question).update(created_at=timezone.now() - 2 * window)
    quality_publish(question_id=question.pk)
    return _latest(question).matrices


def test_a_publish_within_the_window_keeps_the_layout_and_appends_newcomers(
    django_capture_on_commit_callbacks,
):
    study, annotators = running_study(n_items=12, n_annotators=6)
    question = study.questions.get()
    _answer(study, annotators[:5], django_capture_on_commit_callbacks)
    fitted = _refit(question)
    assert sorted(fitted["order"]) == [0, 1, 2, 3, 4]
    assert len(fitted["mds"]) == 5
    assert fitted["fitted_for"] == 5

    order = mock.patch.object(
        indicators, "agglomerative_order", wraps=indicators.agglomerative_order
    )
    embed = mock.patch.object(indicators, "mds_embedding", wraps=indicators.mds_embedding)
    with order as clustered, embed as embedded:
        _answer(study, annotators[5:], django_capture_on_commit_callbacks)  # a newcomer
    kept = _latest(question).matrices
    assert QualityState.objects.get(question=question).annotator_ids[5] == annotators[5].pk
    assert clustered.call_count == 0
    assert embedded.call_count == 0
    assert kept["order"] == [*fitted["order"], 5]  # appended, the others where they were
    assert kept["mds"] == fitted["mds"]  # on the map from the next fit on
    assert len(kept["kappa"]) == 6  # the figures themselves are current

    with order as clustered, embed as embedded:  # the next window: fitted with everyone
        refitted = _refit(question)
    assert clustered.call_count == 1
    assert embedded.call_count == 1
    assert sorted(refitted["order"]) == [0, 1, 2, 3, 4, 5]
    assert len(refitted["mds"]) == 6


def test_a_kept_layout_is_fitted_again_once_the_annotators_grew_by_a_quarter():
    kappa = np.full((8, 8), 0.5)
    np.fill_diagonal(kappa, 1.0)
    kept = {"order": [3, 1, 0, 2], "mds": [[0.0, 1.0]] * 4, "fitted_for": 7}
    assert pair_matrices(kappa, keep=kept)["order"] == [3, 1, 0, 2, 4, 5, 6, 7]
    assert pair_matrices(kappa, keep={**kept, "fitted_for": 6})["fitted_for"] == 8  # 8 >= 7.5
    assert sorted(pair_matrices(kappa, keep=None)["order"]) == list(range(8))
    kappa[2, 2] = np.nan  # no longer present: out of the kept order
    assert pair_matrices(kappa, keep=kept)["order"] == [3, 1, 0, 4, 5, 6, 7]


def test_a_snapshot_stored_before_layouts_were_kept_is_fitted_again(
    django_capture_on_commit_callbacks,
):
    study, annotators = running_study(n_items=12, n_annotators=4)
    question = study.questions.get()
    _answer(study, annotators, django_capture_on_commit_callbacks)
    latest = _latest(question)
    old = {k: v for k, v in latest.matrices.items() if k != "fitted_for"}
    QualitySnapshot.objects.filter(pk=latest.pk).update(matrices={**old, "order": [3, 2]})
    quality_publish(question_id=question.pk)  # in the window, but nothing to keep
    refitted = _latest(question).matrices
    assert refitted["fitted_for"] == 4
    assert sorted(refitted["order"]) == [0, 1, 2, 3]
    assert len(refitted["mds"]) == 4


def test_only_the_newest_snapshot_keeps_its_pair_matrices(django_capture_on_commit_callbacks):
    """A snapshot row a window (the trend lines read its indicators); only the newest one's
    pair matrices are ever drawn. Kept on every row, they grew the database by 2.3-2.6 MB a
    minute per question at 512 annotators (3.5 GB a day of a crowd study)."""
    study, annotators = running_study(n_items=8, n_annotators=4)
    question = study.questions.get()
    _answer(study, annotators, django_capture_on_commit_callbacks)
    for _ in range(3):
        _refit(question)
    rows = list(QualitySnapshot.objects.filter(question=question).order_by("-created_at", "-id"))
    assert len(rows) >= 3
    newest, *older = rows
    assert {"kappa", "overlap", "order"} <= newest.matrices.keys()
    assert [row.matrices for row in older] == [{}] * len(older)
    assert all(row.indicators == newest.indicators for row in older)  # the trend stays


def test_the_migration_empties_the_matrices_of_every_snapshot_but_each_question_s_newest():
    newest_only = importlib.import_module(
        "analytics.migrations.0005_snapshot_matrices_newest_only"
    ).newest_only
    matrices = {"kappa": [[1.0]], "overlap": [[3]], "order": [0]}
    now = timezone.now()
    kept = []
    for study in (running_study(n_annotators=1)[0], running_study(n_annotators=1)[0]):
        question = study.questions.get()
        for age in (3, 2, 0):  # minutes; the newest row last
            row = QualitySnapshot.objects.create(question=question, matrices=matrices)
            QualitySnapshot.objects.filter(pk=row.pk).update(
                created_at=now - dt.timedelta(minutes=age)
            )
        kept.append(row.pk)
    newest_only(django_apps, None)
    stored = dict(QualitySnapshot.objects.values_list("pk", "matrices"))
    assert {pk for pk, value in stored.items() if value} == set(kept)
    assert all(stored[pk] == matrices for pk in kept)
