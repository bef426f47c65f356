"""``manage.py load_demo``: idempotent demo accounts and studies, and the real-data study."""

from __future__ import annotations

import io
import time
from collections import Counter
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from apps.annotations.models import Annotation, Assignment, Revision
from apps.demo.management.commands.load_demo import (
    DEMO_PASSWORD,
    EMOTIONS_NAME,
    RZHETSKY_NAME,
    SENTENCES,
    datasets_dir,
)
from apps.items.models import Item
from apps.studies.models import Label, Membership, Study

pytestmark = pytest.mark.django_db


def counts() -> dict[str, int]:
    models = (get_user_model(), Study, Membership, Label, Item, Assignment, Annotation, Revision)
    return {model.__name__: model.objects.count() for model in models}


def load(*args: str) -> str:
    out = io.StringIO()
    call_command("load_demo", *args, stdout=out)
    return out.getvalue()


def test_refuses_to_run_in_production(settings):
    """The demo's accounts have a published password: never in a production database."""
    settings.PRODUCTION = True
    with pytest.raises(CommandError, match="STUDIO_PRODUCTION"):
        load("--skip-real-data")
    assert counts()["User"] == 0


def test_running_twice_changes_nothing():
    output = load("--skip-real-data")
    first = counts()
    assert "already there" not in output
    assert "already there" in load("--skip-real-data")
    assert counts() == first
    assert not Study.objects.filter(name=RZHETSKY_NAME).exists()


def test_demo_accounts_and_logins():
    output = load("--skip-real-data")
    User = get_user_model()
    for username in ("admin", "manager", "ann1", "ann2", "ann3"):
        assert User.objects.get(username=username).check_password(DEMO_PASSWORD)
        assert username in output
    assert DEMO_PASSWORD in output
    assert User.objects.get(username="admin").is_superuser
    assert User.objects.get(username="manager").has_perm("studies.manage_studies")
    assert not User.objects.get(username="ann1").has_perm("studies.manage_studies")


def test_emotions_study_is_running_with_simulated_annotators():
    load("--skip-real-data")
    study = Study.objects.get(name=EMOTIONS_NAME)
    assert study.status == Study.Status.RUNNING
    assert (study.overlap, study.repeat_rate) == (None, 0.1)
    question = study.questions.get()
    labels = list(question.labels.values_list("key", "shortcut", "valence", "arousal"))
    assert [shortcut for _, shortcut, _, _ in labels] == list("1234567")
    assert ("joy", "1", 4.1, 3.6) in labels
    assert ("disgust", "7", 2.0, 3.2) in labels
    assert study.items.count() == len(SENTENCES)
    assert "Du & Hoste" in study.instructions

    done = Counter(
        Assignment.objects.filter(study=study, completed_at__isnull=False).values_list(
            "annotator__username", flat=True
        )
    )
    assert done["ann1"] == 0
    assert done["ann2"] >= 0.8 * len(SENTENCES)
    assert done["ann3"] >= 0.8 * len(SENTENCES)
    assert Assignment.objects.filter(study=study, round=2).exists()

    def accuracy(username: str) -> float:
        rows = Annotation.objects.filter(
            question=question, annotator__username=username, round=1
        ).values_list("item__external_id", "current_revision__label__key")
        return sum(SENTENCES[item][1] == label for item, label in rows) / len(rows)

    assert accuracy("ann2") > accuracy("ann3") + 0.2


def test_rzhetsky_study_is_skipped_when_its_data_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("STUDIO_DATASETS_DIR", str(tmp_path))
    assert datasets_dir() == tmp_path
    assert "skipped" in load()
    assert not Study.objects.filter(name=RZHETSKY_NAME).exists()


@pytest.mark.slow
@pytest.mark.skipif(
    not (datasets_dir() or Path("/nonexistent"))
    .joinpath("rzhetsky2009", "annotations.csv")
    .exists(),
    reason="the Rzhetsky et al. (2009) data set is not in STUDIO_DATASETS_DIR",
)
def test_real_rzhetsky_data_loads_as_a_closed_study():
    started = time.perf_counter()
    load()
    print(f"load_demo with Rzhetsky et al. (2009): {time.perf_counter() - started:.1f} s")
    study = Study.objects.get(name=RZHETSKY_NAME)
    assert study.status == Study.Status.CLOSED
    assert study.items.count() == 15_521
    annotators = Membership.objects.filter(study=study, role=Membership.Role.ANNOTATOR)
    assert annotators.count() == 8
    annotations = Annotation.objects.filter(question__study=study)
    assert annotations.count() == 3 * 15_521
    assert not annotations.filter(current_revision__isnull=True).exists()
    assert set(
        Revision.objects.filter(annotation__in=annotations).values_list("source", flat=True)
    ) == {Revision.Source.IMPORT}
    per_item = Counter(annotations.values_list("item_id", flat=True))
    assert set(per_item.values()) == {3}
    assignments = Assignment.objects.filter(study=study)
    assert assignments.count() == 3 * 15_521
    assert not assignments.filter(completed_at__isnull=True).exists()
    assert "pyAnno" in study.instructions
    assert "BSD" in study.instructions
    before = counts()
    assert "already there" in load()
    assert counts() == before
