"""Pages of the model registry: the leaderboard of a question's runs and one run's figures.

Managers of the study only; everyone else gets a 404 that does not reveal the study exists.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from apps.models_registry import plots
from apps.models_registry.evaluation import VECTOR_KINDS
from apps.models_registry.models import ModelRun, ModelRunEvaluation
from apps.models_registry.selectors import (
    answers_fingerprint,
    latest_evaluation,
    leaderboard,
    model_run_questions,
    reference_rows,
    usernames,
)
from apps.models_registry.services import model_runs_recompute
from apps.studies.models import Study
from apps.studies.selectors import studies_managed_by

MAP_TITLES = {
    "feature": "Feature level",
    "attention": "Region level (attention)",
    "predictions": "Predictions",
}


def _managed_study(request: HttpRequest, study_id: int) -> Study:
    """The study if the user manages it; 404 for everyone else."""
    return get_object_or_404(studies_managed_by(user=request.user), pk=study_id)


@login_required
@require_http_methods(["GET", "POST"])
def question_leaderboard(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """The question's model runs ranked by DIC, with the reference rows; POST recomputes."""
    study = _managed_study(request, study_id)
    question = get_object_or_404(model_run_questions(study=study), key=question_key)
    if request.method == "POST":
        count = model_runs_recompute(question_id=question.pk, force=True)
        messages.success(request, f"Recomputed {count} run(s) on the current answers.")
        return redirect("models_registry:leaderboard", study.pk, question.key)
    n_annotations, _ = answers_fingerprint(question_id=question.pk)
    context = {
        "study": study,
        "question": question,
        "board": leaderboard(question=question),
        "n_annotations": n_annotations,
    }
    return render(request, "models_registry/leaderboard.html", context)


@login_required
def run_detail(request: HttpRequest, study_id: int, run_id: int) -> HttpResponse:
    """One run: heatmaps with DIC, MDS maps with BAE, traditional metrics, reference rows."""
    study = _managed_study(request, study_id)
    run = get_object_or_404(
        ModelRun.objects.select_related("question", "created_by"), study=study, pk=run_id
    )
    evaluation = latest_evaluation(run=run)
    if evaluation is None:
        raise Http404("This run has no evaluation.")
    context = {
        "study": study,
        "run": run,
        "question": run.question,
        "evaluation": evaluation,
        "history": run.evaluations.all()[:10],
        **_figures_context(evaluation),
    }
    return render(request, "models_registry/run_detail.html", context)


def _figures_context(evaluation: ModelRunEvaluation) -> dict[str, Any]:
    """Plots and tables of an evaluation (nothing to draw when no cell was shared)."""
    figures = evaluation.figures
    ids: list[int] = figures.get("annotators", [])
    found = usernames(ids)
    names = [found.get(a, f"#{a}") for a in ids]
    if not figures.get("n_cells"):
        return {"figures": figures, "names": names}
    order = plots.heatmap_order(figures["m_true"])
    measure = figures.get("measure", "kappa")
    maps = []
    for kind in (*VECTOR_KINDS, "predictions"):
        pair = figures["maps"].get(kind)
        if pair is None:
            continue
        truth, model = plots.map_pair(pair, names=names)
        maps.append(
            {
                "kind": kind,
                "title": MAP_TITLES[kind],
                "bae": figures["bae"].get(kind),
                "truth": truth,
                "model": model,
                "left_out": len(ids) - len(pair["annotators"]),
            }
        )
    per_annotator = [
        {"name": name, "accuracy": accuracy, "pearson": pearson}
        for name, accuracy, pearson in zip(
            names, figures["accuracy"], figures["pearson"], strict=True
        )
    ]
    return {
        "figures": figures,
        "names": names,
        "measure": measure,
        "traces": measure != "kappa",
        "heatmap_true": plots.heatmap(figures["m_true"], names=names, order=order, what=measure),
        "heatmap_pred": plots.heatmap(figures["m_pred"], names=names, order=order, what=measure),
        "maps": maps,
        "per_annotator": per_annotator,
        "references": reference_rows(figures),
    }
