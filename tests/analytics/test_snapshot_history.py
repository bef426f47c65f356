"""The dashboard's trends read only the parts of past snapshots they draw.

A snapshot's indicators hold every series and the intervals (about 30 KB of JSON with 64
annotators); the trends need the annotators, one series and a few study figures, which the
database now extracts. These tests hold the extracted points equal to what the whole rows say.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from django.utils import timezone

from analytics.dashboard import dashboard_context
from analytics.models import QualitySnapshot
from analytics.plotting import sparkline
from analytics.selectors import snapshot_history
from tests.factories import running_study


def snapshots(question, annotators, n: int) -> list[QualitySnapshot]:
    """``n`` snapshots a minute apart, each with several series and study figures;
    the first lacks ``alpha`` and the kappa series (as an early snapshot can)."""
    made = []
    start = timezone.now() - dt.timedelta(hours=1)
    ids = [a.pk for a in annotators]
    for k in range(n):
        values = {"aad": [0.5 + k, 0.6, 0.7], "items_done": [k + 1, k + 1, k]}
        study = {"n_ratings": 10 * (k + 1), "labels": ["neg", "neu", "pos"]}
        if k:
            values["cohen_kappa"] = [0.1 * k, None, 0.3]
            study["alpha"] = 0.05 * k
        snapshot = QualitySnapshot.objects.create(
            question=question,
            indicators={"annotators": ids, "values": values, "study": study, "intervals": {}},
        )
        QualitySnapshot.objects.filter(pk=snapshot.pk).update(
            created_at=start + dt.timedelta(minutes=k)
        )
        made.append(snapshot)
    return made


@pytest.mark.django_db
def test_history_points_are_the_parts_of_the_whole_rows_oldest_first() -> None:
    study, annotators = running_study(n_annotators=3)
    question = study.questions.get()
    snapshots(question, annotators, 5)
    points = snapshot_history(
        question=question, indicator="cohen_kappa", study_keys=["alpha", "n_ratings"], limit=4
    )
    whole = list(QualitySnapshot.objects.order_by("-created_at", "-id")[:4])[::-1]
    assert [p["created_at"] for p in points] == [s.created_at for s in whole]
    for point, snapshot in zip(points, whole, strict=True):
        indicators = snapshot.indicators
        assert point["annotators"] == indicators["annotators"]
        assert point["values"] == indicators["values"]["cohen_kappa"]
        assert point["study"] == {
            "alpha": indicators["study"]["alpha"],
            "n_ratings": indicators["study"]["n_ratings"],
        }
    first = snapshot_history(question=question, indicator="cohen_kappa", study_keys=["alpha"])[0]
    assert first["values"] == []  # absent, not an error
    assert first["study"] == {"alpha": None}


@pytest.mark.django_db
def test_the_dashboard_trends_follow_the_history() -> None:
    study, annotators = running_study(n_annotators=3)
    question = study.questions.get()
    made = snapshots(question, annotators, 3)
    context = dashboard_context(study=study, question=question, plots=False)
    median = next(t for t in context["trends"] if t["label"].startswith("Median"))
    kappas = [s.indicators["values"]["cohen_kappa"] for s in made[1:]]
    expected = [None, *(float(np.median([v for v in k if v is not None])) for k in kappas)]
    assert median["points"] == sparkline(expected) != ""
    assert context["trends"][-1]["points"] == sparkline([10, 20, 30])  # the answers counted
    row = next(r for r in context["rows"] if r.user_id == annotators[0].pk)
    assert row.trend == sparkline([None, 0.1, 0.2])  # the first annotator's own kappa
