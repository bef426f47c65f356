"""Pages of the analytics app: the live quality dashboard and its forms (managers only)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from analytics.dashboard import dashboard_context, dashboard_page_context, dashboard_questions
from analytics.models import Flag
from analytics.publishing import quality_publish
from analytics.selectors import excludable_annotators
from analytics.services import annotator_exclude, annotator_include, flag_confirm, flag_dismiss
from apps.models_registry.selectors import MODEL_RUN_KINDS, leaderboard
from apps.studies.access import managed_study
from apps.studies.models import Question, Study
from core.types import Account, SignedInHtmxRequest


def _question(study: Study, question_id: str | int | None) -> Question | None:
    questions = dashboard_questions(study)
    first = questions[0] if questions else None
    return next((q for q in questions if str(q.pk) == str(question_id)), first)


def _back(study: Study, question_id: int | None) -> HttpResponse:
    url = reverse("analytics:dashboard", args=[study.pk])
    return redirect(f"{url}?question={question_id}" if question_id else url)


def _annotators_fragment(
    request: SignedInHtmxRequest, study: Study, question: Question | None
) -> HttpResponse:
    context = dashboard_context(study=study, question=question)
    return render(request, "analytics/dashboard.html#annotators", context)


@login_required
def dashboard(request: SignedInHtmxRequest, study_id: int) -> HttpResponse:
    """The quality dashboard of one question (``?question=<id>``, default the first; for a
    continuous question ``?item=<id>`` chooses the item of the traces card). htmx gets the live
    cards, or only the summary with ``?part=summary`` (polled while answers wait)."""
    study = managed_study(request, study_id)
    question = _question(study, request.GET.get("question"))
    summary = request.htmx and request.GET.get("part") == "summary"
    context = dashboard_context(study=study, question=question, plots=not summary)
    if request.htmx:
        fragment = "summary" if summary else "live"
        return render(request, f"analytics/dashboard.html#{fragment}", context)
    context.update(dashboard_page_context(question=question, query=request.GET))
    if question is not None and question.kind in MODEL_RUN_KINDS:
        context["model_board"] = leaderboard(question=question, limit=5)
    return render(request, "analytics/dashboard.html", context)


@login_required
@require_POST
def flag_review(request: SignedInHtmxRequest, study_id: int, flag_id: int) -> HttpResponse:
    """Confirm or dismiss a flag (``action`` = confirm | dismiss, optional ``note``)."""
    study = managed_study(request, study_id)
    flag = get_object_or_404(Flag, pk=flag_id, study=study)
    action, note = request.POST.get("action"), request.POST.get("note", "")
    if action == "confirm":
        flag_confirm(flag=flag, actor=request.user, note=note)
    elif action == "dismiss":
        flag_dismiss(flag=flag, actor=request.user, note=note)
    else:
        return HttpResponse("Unknown action.", status=400)
    if request.htmx:
        return _annotators_fragment(request, study, flag.question)
    messages.success(request, f"Flag {action}ed." if action == "confirm" else "Flag dismissed.")
    return _back(study, flag.question_id)


def _exclusion_form(
    request: SignedInHtmxRequest,
    study: Study,
    question: Question | None,
    annotator: Account,
    error: ValidationError,
) -> HttpResponse:
    """The exclusion form again with the service's messages, writing nothing: 422 like every
    form with errors (htmx swaps it in place of the form; without JavaScript a page of its own).
    """
    context = {
        "study": study,
        "question": question,
        "user_id": annotator.pk,
        "name": annotator.get_username(),
        "reason": request.POST.get("reason", ""),
        "errors": error.messages,
    }
    template = "analytics/_exclusion_form.html" if request.htmx else "analytics/exclusion.html"
    response = render(request, template, context, status=422)
    if request.htmx:
        # the form itself shows the error: "this" needs no look-up, so it holds even when a
        # live push has redrawn the row meanwhile (a selector would be looked up from the
        # detached form and fail with htmx:targetError)
        response["HX-Retarget"], response["HX-Reswap"] = "this", "outerHTML"
    return response


@login_required
@require_POST
def annotator_exclusion(request: SignedInHtmxRequest, study_id: int, user_id: int) -> HttpResponse:
    """Exclude an annotator from curated exports (``action=exclude`` with a required
    ``reason``), or undo it (``action=include``)."""
    study = managed_study(request, study_id)
    annotator = get_object_or_404(excludable_annotators(study=study), pk=user_id)
    question = _question(study, request.POST.get("question") or request.GET.get("question"))
    action = request.POST.get("action")
    if action == "exclude":
        try:
            annotator_exclude(
                study=study,
                annotator=annotator,
                by=request.user,
                reason=request.POST.get("reason", ""),
            )
        except ValidationError as error:
            return _exclusion_form(request, study, question, annotator, error)
        text = f"{annotator.get_username()} is excluded from curated exports."
    elif action == "include":
        annotator_include(study=study, annotator=annotator, by=request.user)
        text = f"{annotator.get_username()} is included again."
    else:
        return HttpResponse("Unknown action.", status=400)
    if request.htmx:  # the forms target the table (found when the request leaves)
        return _annotators_fragment(request, study, question)
    messages.success(request, text)
    return _back(study, question.pk if question else None)


@login_required
@require_POST
def competence_refresh(
    request: SignedInHtmxRequest, study_id: int, question_id: int
) -> HttpResponse:
    """Refit Dawid-Skene on every answer of the question now (a full-data pass)."""
    study = managed_study(request, study_id)
    question = get_object_or_404(Question, pk=question_id, study=study)
    quality_publish(question_id=question.pk, refresh_competence=True)
    messages.success(request, "Dawid-Skene competence refitted.")
    return _back(study, question.pk)
