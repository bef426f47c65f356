"""Item pages of a study's managers: the import, and one item with every answer it got."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from apps.annotations.models import Revision
from apps.annotations.selectors import item_history
from apps.items.forms import ItemImportForm
from apps.items.importing import ItemImportError
from apps.items.services import items_import
from apps.studies.forms import posted
from apps.studies.selectors import studies_managed_by


@login_required
@require_http_methods(["GET", "POST"])
def item_import(request: HttpRequest, study_id: int) -> HttpResponse:
    """Upload a CSV or JSON Lines file of items (and their media); problems listed by line."""
    study = get_object_or_404(studies_managed_by(user=request.user), pk=study_id)
    data = posted(request)
    form = ItemImportForm(data, request.FILES if data is not None else None)
    import_error = None
    if form.is_valid():
        try:
            summary = items_import(
                study=study,
                stream=form.cleaned_data["file"],
                fmt=form.cleaned_data["format"],
                files=form.files_by_name(),
            )
        except ItemImportError as exc:
            import_error = exc
        except ValidationError as exc:
            form.add_service_error(exc)
        else:
            messages.success(
                request,
                f"Import done: {summary.created} new and {summary.updated} updated items.",
            )
            return redirect("studies:overview", study.pk)
    context = {
        "study": study,
        "form": form,
        "import_error": import_error,
        "item_count": study.items.count(),
    }
    status = 422 if import_error else form.http_status
    return render(request, "items/import.html", context, status=status)


def _answer_text(revision: Revision) -> str:
    """A revision's answer in words: the label's name, a trace's length, or the undo."""
    value = revision.value
    if value is None:
        return "retracted (undo)"
    if revision.label is not None:
        return revision.label.name
    if isinstance(value, dict) and "trace" in value:
        return f"trace of {value['n']} samples at {value['rate_hz']:g} Hz"
    return str(value)


@login_required
def item_detail(request: HttpRequest, study_id: int, item_id: int) -> HttpResponse:
    """One item as annotators saw it, with every answer and its revisions (managers only)."""
    study = get_object_or_404(studies_managed_by(user=request.user), pk=study_id)
    item = get_object_or_404(study.items, pk=item_id)
    answers = [
        {
            "annotation": annotation,
            "revisions": [
                {"revision": revision, "text": _answer_text(revision)}
                for revision in annotation.revisions.all()
            ],
        }
        for annotation in item_history(item=item)
    ]
    return render(
        request, "items/item_detail.html", {"study": study, "item": item, "answers": answers}
    )
