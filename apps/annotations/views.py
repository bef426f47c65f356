"""The annotator queue and the managers' raw and curated annotation downloads."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from apps.annotations.exporting import (
    CONTENT_TYPES,
    export_filename,
    export_response,
    provenance,
    provenance_json,
)
from apps.annotations.forms import AnswerForm, UndoForm
from apps.annotations.selectors import annotator_progress, assignment_next
from apps.annotations.services import annotation_undo_last, annotations_submit, assignment_skip
from apps.studies.forms import ServiceFormMixin
from apps.studies.markdown import render_markdown
from apps.studies.models import Membership, Study
from apps.studies.selectors import studies_for_user, studies_managed_by, study_role


def _queue_post(request: HttpRequest, study: Study) -> ServiceFormMixin:
    """Carry out an answer, a skip or an undo; the returned form holds any errors."""
    if request.POST.get("action") == "undo":
        undo = UndoForm(request.POST)
        if undo.is_valid():
            reopened = undo.apply(
                annotation_undo_last,
                annotator=request.user,
                study=study,
                idempotency_key=undo.cleaned_data["idempotency_key"],
            )
            if not undo.errors:
                messages.info(
                    request,
                    "Your last answer was undone; that item is shown again."
                    if reopened
                    else "There is nothing to undo.",
                )
        return undo
    form = AnswerForm(request.POST, study=study, annotator=request.user)
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
            )
    return form


@login_required
@require_http_methods(["GET", "POST"])
def queue(request: HttpRequest, study_id: int) -> HttpResponse:
    """An annotator's queue, one item at a time.

    A POST answers, skips or undoes. Without JavaScript it redirects back here (POST/redirect/
    GET); with htmx the response is just the item area, holding the next item.
    """
    study = get_object_or_404(studies_for_user(user=request.user), pk=study_id)
    if study_role(user=request.user, study=study) != Membership.Role.ANNOTATOR:
        raise Http404("Only the study's annotators have a queue.")
    failed = None
    if request.method == "POST":
        form = _queue_post(request, study)
        if not form.errors and not request.htmx:
            return redirect("annotations:queue", study.pk)
        failed = form if form.errors else None
    assignment = assignment_next(annotator=request.user, study=study) if study.is_running else None
    context = {
        "study": study,
        "instructions": render_markdown(study.instructions),
        "item": assignment.item if assignment else None,
        "form": AnswerForm.for_assignment(
            study=study, annotator=request.user, assignment=assignment
        ),
        "undo_form": UndoForm.fresh(),
        "progress": annotator_progress(annotator=request.user, study=study),
        "failed": failed,
    }
    template = "annotations/queue.html#item_area" if request.htmx else "annotations/queue.html"
    return render(request, template, context, status=failed.http_status if failed else 200)


@login_required
@require_GET
def annotations_export(
    request: HttpRequest, study_id: int, fmt: str, curated: bool = False
) -> HttpResponse:
    """Download a study's annotations as CSV or JSONL; ``?history=1`` adds every revision.

    ``curated`` (set by the URL) leaves out the annotators excluded on the quality dashboard.
    """
    study = get_object_or_404(studies_managed_by(user=request.user), pk=study_id)
    return export_response(
        request=request,
        study=study,
        fmt=fmt,
        include_history=request.GET.get("history") == "1",
        curated=curated,
    )


@login_required
@require_GET
def curated_provenance(request: HttpRequest, study_id: int) -> HttpResponse:
    """The provenance record (JSON) of the curated download ``?format=csv|jsonl&history=1``.

    Its ``file.sha256`` is the checksum of that download as long as no one answers meanwhile.
    """
    study = get_object_or_404(studies_managed_by(user=request.user), pk=study_id)
    fmt = request.GET.get("format", "csv")
    if fmt not in CONTENT_TYPES:
        return HttpResponseBadRequest("Unknown format; use csv or jsonl.")
    include_history = request.GET.get("history") == "1"
    record = provenance(study=study, curated=True, include_history=include_history, fmt=fmt)
    filename = export_filename(study=study, fmt=fmt, include_history=include_history, curated=True)
    return HttpResponse(
        provenance_json(record),
        content_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{filename}.provenance.json"'},
    )
