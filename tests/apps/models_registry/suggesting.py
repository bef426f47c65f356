"""A running study whose categorical question suggests a registered model run's labels."""

from __future__ import annotations

from apps.models_registry.models import ModelRun
from apps.models_registry.services import Upload, model_run_register
from apps.studies.services import question_update
from tests.apps.models_registry.simulation import jsonl
from tests.factories import running_study


def suggesting_study(
    *, n_items: int = 12, n_annotators: int = 2, held_out: float = 0.5, label: str = "negative"
):
    """``(study, annotators, run)``: every item predicted ``label`` for every annotator, the
    question suggesting from that run with ``held_out``."""
    study, annotators = running_study(n_items=n_items, n_annotators=n_annotators)
    question = study.questions.get()
    rows = [
        {"item": item.external_id, "annotator": user.username, "label": label}
        for item in study.items.all()
        for user in annotators
    ]
    run = model_run_register(
        study=study,
        question=question,
        name="baseline",
        version="1",
        created_by=study.created_by,
        predictions=Upload(jsonl(rows), "jsonl"),
    )
    question_update(
        question=question,
        settings={"suggestion_run": run.pk, "suggestion_held_out": held_out},
    )
    return study, annotators, ModelRun.objects.get(pk=run.pk)
