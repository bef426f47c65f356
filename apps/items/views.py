"""The item import page of a study's managers."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

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
