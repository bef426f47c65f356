"""Item pages: the import and one item with every answer it got (managers); stimuli (members)."""

from __future__ import annotations

from pathlib import PurePath
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_http_methods, require_safe

from apps.annotations.models import Revision
from apps.annotations.selectors import item_history
from apps.items.forms import ItemImportForm, ItemListForm
from apps.items.importing import ItemImportError
from apps.items.media import media_response
from apps.items.selectors import (
    DISPUTED,
    ItemFilter,
    item_neighbours,
    items_listed,
    items_with_figures,
)
from apps.items.services import items_import
from apps.items.uploads import UploadLimits, limit_uploads
from apps.studies.access import managed_study, study_for
from apps.studies.kinds import question_kind
from apps.studies.models import Study
from core.forms import posted


@csrf_exempt  # checked by _item_import, once the upload limits are in place
@login_required
@require_http_methods(["GET", "POST"])
def item_import(request: HttpRequest, study_id: int) -> HttpResponse:
    """Upload a CSV or JSON Lines file of items (and their media); problems listed by line.

    Files over their limit (``settings.UPLOAD_MAX_IMPORT_BYTES`` for the item file,
    ``UPLOAD_MAX_MEDIA_BYTES`` for each media file) are dropped as they stream in: 413.
    """
    study = managed_study(request, study_id)
    limits = limit_uploads(
        request, file=settings.UPLOAD_MAX_IMPORT_BYTES, media=settings.UPLOAD_MAX_MEDIA_BYTES
    )
    return _item_import(request, study, limits)


@csrf_protect
def _item_import(request: HttpRequest, study: Study, limits: UploadLimits) -> HttpResponse:
    data = posted(request)
    form = ItemImportForm(data, request.FILES if data is not None else None)
    for refused in limits.refused:
        form.errors.pop(refused.field, None)  # not "required": it was sent, and dropped
        form.add_error(refused.field, str(refused))
    import_error = None
    if not limits.refused and form.is_valid():
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
    status = 413 if limits.refused else 422 if import_error else form.http_status
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


ITEMS_PAGE_SIZE = 50


def _list_params(form: ItemListForm) -> list[tuple[str, str]]:
    """The list's filters as ``(name, value)`` pairs, without the page and empty ones."""
    return [
        (name, value)
        for name, values in form.data.lists()
        if name != "page"
        for value in values
        if value != ""
    ]


@login_required
def item_list(request: HttpRequest, study_id: int) -> HttpResponse:
    """Every item of a study: search, filters, order and pages (managers only).

    Bad parameters answer 400 with the form's messages and list nothing.
    """
    study = managed_study(request, study_id)
    form = ItemListForm(request.GET)
    page, rows = None, []
    if form.is_valid():
        ids = items_listed(study=study, filters=form.filters()).values_list("pk", flat=True)
        page = Paginator(ids, ITEMS_PAGE_SIZE).get_page(form.cleaned_data["page"])
        rows = items_with_figures(study=study, ids=list(page))
    params = _list_params(form)
    context = {
        "study": study,
        "form": form,
        "page": page,
        "rows": rows,
        "disputed_means": DISPUTED,
        "list_params": params,
        "list_query": urlencode(params),
    }
    template = "items/item_list.html#results" if request.htmx else "items/item_list.html"
    return render(request, template, context, status=200 if page is not None else 400)


@login_required
def item_detail(request: HttpRequest, study_id: int, item_id: int) -> HttpResponse:
    """One item as annotators saw it, with every answer and its revisions (managers only)."""
    study = managed_study(request, study_id)
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
    cards = []
    for question in study.questions.all():
        kind = question_kind(question.kind)
        if kind.item_card:
            card = {"question": question} | kind.item_context(question=question, item=item)
            cards.append({"template": kind.item_card} | card)
    stimulus = next((card for card in cards if card.get("stimulus")), None)
    form = ItemListForm(request.GET)
    filters = form.filters() if form.is_valid() else ItemFilter()
    previous, following, position, count = item_neighbours(study=study, filters=filters, item=item)
    context = {
        "study": study,
        "item": item,
        "answers": answers,
        "cards": cards,
        "stimulus": stimulus,
        "neighbours": {"previous": previous, "next": following, "at": position, "count": count},
        "list_query": urlencode(_list_params(form)) if form.is_valid() else "",
    }
    return render(request, "items/item_detail.html", context)


@require_safe
def item_media(request: HttpRequest, study_id: int, item_id: int, name: str) -> HttpResponseBase:
    """An item's uploaded stimulus, for the members of its study (404 for anyone else)."""
    study = study_for(request, study_id)
    item = get_object_or_404(study.items.exclude(media=""), pk=item_id)
    if PurePath(item.media.name).name != name:
        raise Http404("The item's file has changed.")
    return media_response(request, item.media)
