"""Pages of the model registry: a question's leaderboard (upload, compare, the model endpoint
and its status), a run, its deletion.

Managers of the study only (apps/studies/access.py: 404 for outsiders, 403 for annotators).
Runs are evaluated off the request (apps/models_registry/services.py): while one is, the
leaderboard and the run's page say "evaluating…" and poll themselves (htmx, ``?evaluating=1``)
until it is done, then reload to show the new figures.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRefresh

from apps.items.uploads import UploadLimits, limit_uploads
from apps.models_registry import plots
from apps.models_registry.evaluation import VECTOR_KINDS
from apps.models_registry.forms import UPLOAD_FIELDS, ModelEndpointForm, ModelRunUploadForm
from apps.models_registry.models import ModelRun, ModelRunEvaluation
from apps.models_registry.selectors import (
    answers_fingerprint,
    endpoint_status,
    latest_evaluation,
    leaderboard,
    model_run_questions,
    question_endpoint,
    reference_rows,
    usernames,
)
from apps.models_registry.services import (
    model_endpoint_request,
    model_endpoint_save,
    model_run_delete,
    model_run_register,
    model_runs_request,
)
from apps.studies.access import managed_study
from apps.studies.models import Question, Study
from core.forms import posted

MAP_TITLES = {
    "feature": "Feature level",
    "attention": "Region level (attention)",
    "predictions": "Predictions",
}


@login_required
@require_http_methods(["GET", "POST"])
def question_leaderboard(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """The question's model runs ranked by DIC, with the reference rows; POST recomputes."""
    study = managed_study(request, study_id)
    question = get_object_or_404(model_run_questions(study=study), key=question_key)
    if request.method == "POST":
        count = model_runs_request(question_id=question.pk)
        messages.success(
            request, f"Evaluating {count} run(s) on the current answers in the background."
        )
        return redirect("models_registry:leaderboard", study.pk, question.key)
    if _polling(request):
        evaluating = question.model_runs.filter(_EVALUATING).count()
        done = ModelRunEvaluation.objects.filter(run__question=question).exists()
        return _poll_answer(request, evaluating, has_figures=done)
    return _leaderboard_page(request, study, question, ModelRunUploadForm())


_EVALUATING = Q(evaluation_requested_at__isnull=False) | Q(evaluation_started_at__isnull=False)


def _polling(request: HttpRequest) -> bool:
    """Whether this is the "evaluating…" notice asking whether the evaluation is done."""
    return bool(request.htmx) and request.GET.get("evaluating") == "1"


def _poll_answer(request: HttpRequest, evaluating: int, *, has_figures: bool) -> HttpResponse:
    """The notice again while runs are evaluating; once done, reload the page (HX-Refresh)."""
    if not evaluating:
        return HttpResponseClientRefresh()
    context = {"evaluating": evaluating, "poll_url": request.path, "has_figures": has_figures}
    return render(request, "models_registry/_evaluating.html", context)


def _leaderboard_page(
    request: HttpRequest,
    study: Study,
    question: Question,
    form: ModelRunUploadForm,
    status: int = 200,
    endpoint_form: ModelEndpointForm | None = None,
) -> HttpResponse:
    n_annotations, _ = answers_fingerprint(question_id=question.pk)
    endpoint = question_endpoint(question=question)
    board = leaderboard(question=question)
    evaluating = [row for row in board.rows if row.run is not None and row.run.evaluating]
    context = {
        "study": study,
        "question": question,
        "board": board,
        "evaluating": len(evaluating),
        "has_figures": any(row.evaluation for row in evaluating),
        "poll_url": request.path,
        "n_annotations": n_annotations,
        "form": form,
        "max_bytes": settings.UPLOAD_MAX_MODEL_RUN_BYTES,
        "endpoints": question.kind == Question.Kind.CATEGORICAL,
        "endpoint": endpoint,
        "endpoint_status": endpoint and endpoint_status(endpoint=endpoint),
        "endpoint_form": endpoint_form or ModelEndpointForm.of(endpoint),
    }
    return render(request, "models_registry/leaderboard.html", context, status=status)


@login_required
@require_POST
def endpoint_save(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """Configure the question's model endpoint from the leaderboard's form; its labels are
    fetched in the background. Errors are shown on the form (422)."""
    study = managed_study(request, study_id)
    question = get_object_or_404(
        model_run_questions(study=study), key=question_key, kind=Question.Kind.CATEGORICAL
    )
    form = ModelEndpointForm(request.POST)
    if form.is_valid():
        endpoint = form.apply(
            model_endpoint_save,
            question=question,
            created_by=request.user,
            **form.service_arguments(),
        )
        if endpoint is not None:
            messages.success(
                request,
                f"Saved the model endpoint; its labels go to run {endpoint.run} "
                f"(id {endpoint.run_id}) in the background.",
            )
            return redirect("models_registry:leaderboard", study.pk, question.key)
    return _leaderboard_page(
        request, study, question, ModelRunUploadForm(), form.http_status, endpoint_form=form
    )


@login_required
@require_POST
def endpoint_predict(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """Call the endpoint again for the items its run lacks; refused when the budget is spent."""
    study = managed_study(request, study_id)
    question = get_object_or_404(model_run_questions(study=study), key=question_key)
    endpoint = question_endpoint(question=question)
    if endpoint is None:
        messages.error(request, "This question has no model endpoint yet: configure one below.")
        return redirect("models_registry:leaderboard", study.pk, question.key)
    try:
        model_endpoint_request(endpoint=endpoint)
    except ValidationError as exc:
        for message in exc.messages:
            messages.error(request, message)
    else:
        messages.success(request, "Calling the endpoint for the items without a label.")
    return redirect("models_registry:leaderboard", study.pk, question.key)


@csrf_exempt  # checked by _run_upload, once the upload limits are in place
@login_required
@require_POST
def run_upload(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """Register a run from the leaderboard's form, all or nothing; errors shown on the form.

    Each file over ``settings.UPLOAD_MAX_MODEL_RUN_BYTES`` is dropped as it streams in: 413.
    """
    study = managed_study(request, study_id)
    question = get_object_or_404(model_run_questions(study=study), key=question_key)
    limits = limit_uploads(
        request, **dict.fromkeys(UPLOAD_FIELDS, settings.UPLOAD_MAX_MODEL_RUN_BYTES)
    )
    return _run_upload(request, study, question, limits)


@csrf_protect
def _run_upload(
    request: HttpRequest, study: Study, question: Question, limits: UploadLimits
) -> HttpResponse:
    form = ModelRunUploadForm(posted(request), request.FILES)
    for refused in limits.refused:
        form.errors.pop(refused.field, None)  # not "required": it was sent, and dropped
        form.add_error(refused.field, str(refused))
    if not limits.refused and form.is_valid():
        data = form.cleaned_data
        run = form.apply(
            model_run_register,
            study=study,
            question=question,
            name=data["name"],
            version=data["version"],
            created_by=request.user,
            predictions=data["predictions"],
            features=data["features"],
            attention=data["attention"],
        )
        if run is not None:
            messages.success(request, f"Registered {run}; evaluating it in the background.")
            return redirect("models_registry:leaderboard", study.pk, question.key)
    status = 413 if limits.refused else form.http_status
    return _leaderboard_page(request, study, question, form, status)


@login_required
@require_http_methods(["GET", "POST"])
def run_delete(request: HttpRequest, study_id: int, run_id: int) -> HttpResponse:
    """GET asks to confirm; POST deletes the run with its predictions and figures."""
    study = managed_study(request, study_id)
    run = get_object_or_404(ModelRun.objects.select_related("question"), study=study, pk=run_id)
    if request.method == "POST":
        model_run_delete(run=run)
        messages.success(request, f"Deleted {run}.")
        return redirect("models_registry:leaderboard", study.pk, run.question.key)
    return render(
        request,
        "models_registry/run_delete.html",
        {"study": study, "run": run, "question": run.question},
    )


@login_required
def run_compare(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """Two runs of a question side by side (``?run=A&run=B``): figures and model's maps."""
    study = managed_study(request, study_id)
    question = get_object_or_404(model_run_questions(study=study), key=question_key)
    ids = request.GET.getlist("run")
    if len(ids) != 2 or not all(i.isdigit() for i in ids) or ids[0] == ids[1]:
        messages.error(request, "Tick exactly two runs to compare.")
        return redirect("models_registry:leaderboard", study.pk, question.key)
    found = ModelRun.objects.select_related("created_by").in_bulk(
        [int(i) for i in ids], field_name="pk"
    )
    sides = []
    for run_id in ids:
        run = found.get(int(run_id))
        if run is None or run.question_id != question.pk:
            raise Http404("No such run of this question.")
        evaluation = latest_evaluation(run=run)
        if evaluation is None:
            raise Http404("This run has no evaluation.")
        sides.append({"run": run, "evaluation": evaluation, **_figures_context(evaluation)})
    context = {"study": study, "question": question, "sides": sides}
    return render(request, "models_registry/run_compare.html", context)


@login_required
def run_detail(request: HttpRequest, study_id: int, run_id: int) -> HttpResponse:
    """One run: heatmaps with DIC, MDS maps with BAE, traditional metrics, reference rows."""
    study = managed_study(request, study_id)
    run = get_object_or_404(
        ModelRun.objects.select_related("question", "created_by"), study=study, pk=run_id
    )
    if _polling(request):
        return _poll_answer(request, int(run.evaluating), has_figures=run.evaluations.exists())
    evaluation = latest_evaluation(run=run)
    context = {
        "study": study,
        "run": run,
        "question": run.question,
        "evaluation": evaluation,
        "poll_url": request.path,
        "history": run.evaluations.all()[:10],
        **(_figures_context(evaluation) if evaluation else {}),
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
                "bae_interval": figures.get("bae_interval", {}).get(kind),
                "truth": truth,
                "model": model,
                "left_out": len(ids) - len(pair["annotators"]),
            }
        )
    n = len(names)  # evaluations made before the accuracy intervals have none
    per_annotator = [
        {
            "name": name,
            "accuracy": accuracy,
            "accuracy_interval": interval,
            "n": compared,
            "pearson": pearson,
        }
        for name, accuracy, interval, compared, pearson in zip(
            names,
            figures["accuracy"],
            figures.get("accuracy_interval") or [None] * n,
            figures.get("accuracy_n") or [None] * n,
            figures["pearson"],
            strict=True,
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
        "outside": _outside(figures),
    }


def _outside(figures: dict[str, Any]) -> list[dict[str, Any]]:
    """The figures that lie outside their own bootstrap interval, with the bootstrap's bias
    (mean replicate minus figure): a distance near the end of its range (DIC near 0, BAE
    near 1) from few items per pair, which sampling noise pushes away from that end."""
    found = [("DIC", figures.get("dic"), figures.get("dic_interval"), figures.get("dic_bias"))]
    for kind, label in (("feature", "BAE feature level"), ("attention", "BAE region level")):
        found.append(
            (
                label,
                figures.get("bae", {}).get(kind),
                figures.get("bae_interval", {}).get(kind),
                figures.get("bae_bias", {}).get(kind),
            )
        )
    return [
        {"label": label, "bias": bias}
        for label, value, interval, bias in found
        if value is not None and interval and not interval[0] <= value <= interval[1]
    ]
