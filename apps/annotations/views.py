"""The annotator queue and the managers' raw and curated annotation downloads."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from apps.annotations.exporting import (
    CONTENT_TYPES,
    export_filename,
    export_response,
    provenance,
    provenance_json,
)
from apps.annotations.forms import AnswerForm, QueueQuestion, UndoForm, queue_questions
from apps.annotations.selectors import (
    annotator_progress,
    answer_shown,
    assignment_next,
    queue_answers_shown,
)
from apps.annotations.services import annotation_undo_last, annotations_submit, assignment_skip
from apps.exchange.huggingface import LICENSES, dataset_response
from apps.exchange.identity import PSEUDONYMS, USERNAMES
from apps.recruitment.sessions import participant_elsewhere
from apps.studies.access import annotated_study, managed_study
from apps.studies.models import Study
from apps.studies.selectors import instructions_for
from core.forms import ServiceFormMixin
from core.markdown import render_markdown


def _queue_post(
    request: HttpRequest, study: Study, questions: list[QueueQuestion]
) -> ServiceFormMixin:
    """Carry out an answer, a skip or an undo; the returned form holds any errors."""
    if request.POST.get("action") == "undo":
        undo = UndoForm(request.POST)
        if undo.is_valid():
            reopened = undo.apply(
                annotation_undo_last,
                annotator=request.user,
                study=study,
                idempotency_key=undo.cleaned_data["idempotency_key"],
                assignment_id=undo.cleaned_data["assignment"],
            )
            undone = reopened and answer_shown(assignment=reopened)
            if not undo.errors:
                messages.info(
                    request,
                    f"Undone: {undone}; that item is shown again."
                    if undone
                    else "There is nothing to undo.",
                )
        return undo
    form = AnswerForm(request.POST, study=study, annotator=request.user, questions=questions)
    if form.is_valid():
        data = form.cleaned_data
        if data["action"] == AnswerForm.SKIP:
            if form.apply(assignment_skip, annotator=request.user, assignment=data["assignment"]):
                messages.info(request, "Skipped: that item comes back after the others.")
        else:
            form.apply(
                annotations_submit,
                annotator=request.user,
                assignment=data["assignment"],
                answers=data["answers"],
                idempotency_key=data["idempotency_key"],
                time_spent_ms=data["time_spent_ms"],
                suggestions=data["suggestions"],
            )
    return form


@login_required
@require_http_methods(["GET", "POST"])
def queue(request: HttpRequest, study_id: int) -> HttpResponse:
    """An annotator's queue, one item at a time.

    A POST answers, skips or undoes. Without JavaScript it redirects back here (POST/redirect/
    GET); with htmx the response is just the item area, holding the next item.
    """
    study = annotated_study(request, study_id)
    if away := participant_elsewhere(request, study, here=request.path):
        return away
    questions = queue_questions(study=study)
    failed = None
    if request.method == "POST":
        form = _queue_post(request, study, questions)
        if not form.errors and (away := participant_elsewhere(request, study, here=request.path)):
            return away
        if not form.errors and not request.htmx:
            return redirect("annotations:queue", study.pk)
        failed = form if form.errors else None
    scoped = [entry.question for entry in questions]
    assignment = (
        assignment_next(annotator=request.user, study=study, questions=scoped)
        if study.is_running
        else None
    )
    undo, earlier = queue_answers_shown(
        annotator=request.user, study=study, shown=assignment, questions=scoped
    )
    form = AnswerForm.for_assignment(
        study=study, annotator=request.user, assignment=assignment, questions=questions
    )
    asked = [entry.question for entry in form.questions] if assignment else scoped
    context = {
        "study": study,
        "queue_url": reverse("annotations:queue", args=[study.pk]),
        "instructions": render_markdown(instructions_for(study=study, questions=asked)),
        "item": assignment.item if assignment else None,
        "form": form,
        "undo": undo,
        "undo_form": UndoForm.fresh(undo=undo),
        "earlier": earlier,
        "progress": annotator_progress(annotator=request.user, study=study, questions=scoped),
        "failed": failed,
    }
    template = "annotations/queue.html#item_area" if request.htmx else "annotations/queue.html"
    return render(request, template, context, status=failed.http_status if failed else 200)


@login_required
@require_GET
def annotations_export(
    request: HttpRequest, study_id: int, fmt: str, curated: bool = False
) -> HttpResponse:
    """Download a study's annotations as CSV, JSONL or Parquet; ``?history=1`` adds every
    revision, ``?annotators=pseudonyms`` names annotators by per-study pseudonyms.

    ``curated`` (set by the URL) leaves out the annotators excluded on the quality dashboard.
    """
    study = managed_study(request, study_id)
    return export_response(
        request=request,
        study=study,
        fmt=fmt,
        include_history=request.GET.get("history") == "1",
        curated=curated,
        identity=_identity(request),
    )


@login_required
@require_GET
def dataset_export(request: HttpRequest, study_id: int) -> HttpResponseBase:
    """Download the curated study as a Hugging Face dataset (zip: Parquet files and card);
    ``?annotators=pseudonyms`` and ``?license=cc-by-4.0`` (see ``LICENSES``) as in the API."""
    study = managed_study(request, study_id)
    license = request.GET.get("license", "other")
    if license not in LICENSES:
        return HttpResponseBadRequest(f"Unknown licence; use one of {', '.join(LICENSES)}.")
    return dataset_response(study=study, identity=_identity(request), license=license)


def _identity(request: HttpRequest) -> str:
    """``?annotators=pseudonyms``, or usernames."""
    return PSEUDONYMS if request.GET.get("annotators") == PSEUDONYMS else USERNAMES


@login_required
@require_GET
def curated_provenance(request: HttpRequest, study_id: int) -> HttpResponse:
    """The provenance record (JSON) of the curated download
    ``?format=csv|jsonl|parquet&history=1&annotators=pseudonyms``.

    Its ``file.sha256`` is the checksum of that download as long as no one answers meanwhile.
    """
    study = managed_study(request, study_id)
    fmt = request.GET.get("format", "csv")
    if fmt not in CONTENT_TYPES:
        return HttpResponseBadRequest("Unknown format; use csv, jsonl or parquet.")
    options = {
        "include_history": request.GET.get("history") == "1",
        "curated": True,
        "identity": _identity(request),
    }
    record = provenance(study=study, fmt=fmt, **options)
    filename = export_filename(study=study, fmt=fmt, **options)
    return HttpResponse(
        provenance_json(record),
        content_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{filename}.provenance.json"'},
    )
