"""Study pages: the home page, a manager's study overview, and study and question editing."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.forms.models import model_to_dict
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from apps.adjudication.forms import PredictedOverlapForm
from apps.adjudication.selectors import disagreement_forecasts, with_predicted_disagreement
from apps.annotations.selectors import item_coverage, study_has_answers, study_progress
from apps.studies.access import managed_study
from apps.studies.forms import QuestionEditor, StudyForm, StudyStatusForm
from apps.studies.kinds import kind_choices, question_kind
from apps.studies.models import Membership, Study
from apps.studies.selectors import (
    annotator_tasks,
    annotators_tasks,
    can_create_studies,
    questions_covering,
    studies_with_my_role,
)
from apps.studies.services import (
    question_create,
    question_update,
    study_create,
    study_set_status,
    study_update,
)
from core.forms import posted
from core.markdown import render_markdown

COVERAGE_PAGE_SIZE = 25
PROGRESS_PAGE_SIZE = 25  # annotators a page: each costs a few queries per question
STATUS_MESSAGES = {
    Study.Status.RUNNING: "The study is open: annotators can start labelling.",
    Study.Status.DRAFT: "The study is a draft: annotators cannot label until you open it.",
    Study.Status.CLOSED: "The study is closed; no more annotations are accepted.",
}


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """My studies with my role; annotators see one task per queue and per other question, each
    with its progress counted as its own page counts it (:meth:`QuestionKind.progress`)."""
    studies = list(studies_with_my_role(user=request.user))
    for study in studies:
        if study.my_role == Membership.Role.ANNOTATOR:
            study.tasks = annotator_tasks(study=study, annotator=request.user)
            study.all_done = bool(study.tasks) and all(
                task["progress"]["total"] and task["progress"]["done"] >= task["progress"]["total"]
                for task in study.tasks
            )
    context = {
        "studies": studies,
        "can_create": can_create_studies(user=request.user),
    }
    return render(request, "studies/home.html", context)


@login_required
def study_overview(request: HttpRequest, study_id: int) -> HttpResponse:
    """A manager's view of one study: status, questions, progress, coverage and downloads.

    With a disagreement forecast (text items, a categorical question), the coverage table shows
    each item's predicted disagreement (``?question=`` picks the question's forecast) and
    ``?sort=predicted`` puts the predicted-hardest first.
    """
    study = managed_study(request, study_id)
    forecasts = list(disagreement_forecasts(study=study))
    chosen = request.GET.get("question")
    forecast = next((f for f in forecasts if f.question.key == chosen), None) or next(
        iter(forecasts), None
    )
    sort = "predicted" if forecast and request.GET.get("sort") == "predicted" else ""
    items = item_coverage(study=study)
    if forecast is not None:
        items = with_predicted_disagreement(items, forecast=forecast, most_first=bool(sort))
    coverage = Paginator(items, COVERAGE_PAGE_SIZE).get_page(request.GET.get("page"))
    query = "".join(
        f"&{name}={value}"
        for name, value in (("question", forecast.question.key if forecast else ""), ("sort", sort))
        if value
    )
    context = {
        "study": study,
        "coverage": coverage,
        "forecast": forecast,
        "sorted": bool(sort),
        "sort_query": query,
    }
    if request.htmx:
        return render(request, "studies/overview.html#coverage", context)
    progress = Paginator(study_progress(study=study), PROGRESS_PAGE_SIZE).get_page(
        request.GET.get("annotators_page")
    )
    context |= {
        "instructions": render_markdown(study.instructions),
        "questions": questions_covering(study=study),
        "progress": progress,
        "progress_rows": annotators_tasks(study=study, rows=progress),
        "status_message": STATUS_MESSAGES[study.status],
        "has_answers": study_has_answers(study=study),
        "pseudonyms": request.GET.get("annotators") == "pseudonyms",
        "forecasts": forecasts,
        "overlap_form": PredictedOverlapForm(
            initial={
                "threshold": round(forecast.levels[1], 2) if forecast else 0.5,
                "k": (study.overlap or 2) + 1,
            }
        ),
    }
    return render(request, "studies/overview.html", context)


@login_required
@require_POST
def study_status(request: HttpRequest, study_id: int) -> HttpResponse:
    """Open, pause or close the study, then go back to its overview."""
    study = managed_study(request, study_id)
    form = StudyStatusForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Unknown study status.")
        return redirect("studies:overview", study.pk)
    try:
        study_set_status(study=study, status=form.cleaned_data["status"])
    except ValidationError as exc:
        for message in exc.messages:
            messages.error(request, message)
    else:
        messages.success(request, STATUS_MESSAGES[study.status])
    return redirect("studies:overview", study.pk)


@login_required
@require_http_methods(["GET", "POST"])
def study_new(request: HttpRequest) -> HttpResponse:
    """Create a study; its creator becomes its manager."""
    if not can_create_studies(user=request.user):
        raise PermissionDenied("You may not create studies.")
    form = StudyForm(posted(request))
    if form.is_valid() and (
        study := form.apply(study_create, creator=request.user, **form.cleaned_data)
    ):
        messages.success(
            request, "Study created. Next: add a question, import items and invite annotators."
        )
        return redirect("studies:overview", study.pk)
    return render(request, "studies/study_form.html", {"form": form}, status=form.http_status)


@login_required
@require_http_methods(["GET", "POST"])
def study_edit(request: HttpRequest, study_id: int) -> HttpResponse:
    """Change a study's name, instructions, overlap and repeat rate."""
    study = managed_study(request, study_id)
    form = StudyForm(posted(request), initial=model_to_dict(study, fields=StudyForm.Meta.fields))
    if form.is_valid() and form.apply(study_update, study=study, **form.cleaned_data):
        messages.success(request, "Study saved.")
        return redirect("studies:overview", study.pk)
    context = {"form": form, "study": study}
    return render(request, "studies/study_form.html", context, status=form.http_status)


def _question_page(
    request: HttpRequest,
    *,
    study: Study,
    editor: QuestionEditor,
    action: str,
    save: Callable[..., Any],
    saved: str,
) -> HttpResponse:
    """The question editor's page and its htmx fragments: a row button redraws the label rows
    (the whole page without JavaScript), ``preview`` draws the preview, a save writes through
    ``save`` (a service) and goes back to the study."""
    context = {
        "editor": editor,
        "study": study,
        "question": editor.question,
        "kinds": kind_choices(),
    }
    context["preview"] = editor.preview_html(request)
    if action == "preview":
        return render(request, "studies/question_form.html#preview", context)
    if action != "save":
        if not request.htmx:
            return render(request, "studies/question_form.html", context)
        context["oob_preview"] = True  # the rows and, out of band, their preview
        return render(request, "studies/question_form.html#labels", context)
    if request.method == "POST" and editor.is_valid() and editor.apply(save):
        messages.success(request, saved)
        return redirect("studies:overview", study.pk)
    fragment = "#editor" if request.htmx and request.method == "GET" else ""
    return render(
        request, f"studies/question_form.html{fragment}", context, status=editor.http_status
    )


def _action(request: HttpRequest) -> str:
    """What a POST to the editor asks: ``save`` (the default), ``preview`` or a row button."""
    return request.POST.get("editor", "save") if request.method == "POST" else "save"


@login_required
@require_http_methods(["GET", "POST"])
def question_new(request: HttpRequest, study_id: int) -> HttpResponse:
    """Add a question of the kind chosen (``?kind=``, first registered kind by default): its
    fields, label rows and settings as the kind declares them."""
    study = managed_study(request, study_id)
    chosen = request.POST.get("kind") or request.GET.get("kind") or kind_choices()[0][0]
    try:
        kind = question_kind(chosen)
    except ValidationError:
        raise Http404("Unknown question kind.") from None
    typed = {name: request.GET[name] for name in ("key", "prompt") if name in request.GET}
    action = _action(request)
    editor = QuestionEditor(kind=kind, data=posted(request), initial=typed, action=action)
    return _question_page(
        request,
        study=study,
        editor=editor,
        action=action,
        save=partial(question_create, study=study, kind=kind.key),
        saved="Question added.",
    )


@login_required
@require_http_methods(["GET", "POST"])
def question_edit(request: HttpRequest, study_id: int, question_id: int) -> HttpResponse:
    """Edit a question; labels are kept by key, and a label with answers cannot be removed
    (nor a setting its answers depend on changed), so answers keep their meaning. The kind
    is fixed once the question exists."""
    study = managed_study(request, study_id)
    question = get_object_or_404(study.questions.prefetch_related("labels"), pk=question_id)
    kind = question_kind(question.kind)
    action = _action(request)
    editor = QuestionEditor(kind=kind, data=posted(request), question=question, action=action)
    return _question_page(
        request,
        study=study,
        editor=editor,
        action=action,
        save=partial(question_update, question=question),
        saved="Question saved.",
    )
