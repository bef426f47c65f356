"""Adjudication pages: disputed items of a question, decided by keyboard; aggregated labels."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from analytics.selectors import excluded_annotator_ids
from apps.adjudication.exporting import (
    aggregated_filename,
    aggregated_provenance,
    aggregated_response,
)
from apps.adjudication.forms import AdjudicationForm, OverlapRuleForm, PredictedOverlapForm
from apps.adjudication.models import OverlapRule
from apps.adjudication.selectors import (
    QuestionAggregates,
    adjudication_history,
    categorical_questions,
    curated_aggregates,
    disputed_items,
    flagged_annotator_ids,
    item_answers,
    latest_adjudications,
    overlap_rule,
)
from apps.adjudication.services import (
    adjudication_record,
    overlap_rule_remove,
    overlap_rule_set,
    predicted_overlap_raise,
)
from apps.annotations.exporting import provenance_json
from apps.exchange.formats import FORMATS
from apps.items.models import Item
from apps.items.selectors import DISPUTED
from apps.studies.access import adjudicated_study, managed_study
from apps.studies.models import Membership, Question, Study

#: Disputed items listed beside the current one (the rest are reached by deciding these).
LISTED = 100


def _question(study: Study, key: str) -> Question:
    return get_object_or_404(categorical_questions(study=study), key=key)


def _suggestion(found: QuestionAggregates, item_id: int) -> dict[str, Any]:
    """The aggregate of one item as the page shows it and the adjudication keeps it."""
    row = found.row(item_id)
    if row is None:
        return {}
    agg = found.aggregates
    top = int(agg.votes[row].max())
    return {
        "n": int(agg.n_answers[row]),
        "majority": found.key(int(agg.majority[row])),
        "tied": [key for key, n in zip(found.value_keys, agg.votes[row], strict=True) if n == top]
        if agg.tied[row]
        else [],
        "ds_label": found.key(int(agg.ds_label[row])),
        "ds_posterior": {
            key: round(float(p), 4)
            for key, p in zip(found.value_keys, agg.posteriors[row], strict=True)
        },
        "disagreement": round(float(agg.disagreement[row]), 4),
    }


def _panel(question: Question, found: QuestionAggregates, item: Item) -> dict[str, Any]:
    """Everything the adjudicator reads about one item: answers, reliability, suggestion."""
    competence = dict(zip(found.annotator_ids, found.aggregates.competence.tolist(), strict=True))
    excluded = excluded_annotator_ids(study=question.study)
    flagged = flagged_annotator_ids(question=question)
    names = dict(zip(found.value_keys, found.label_names, strict=True))
    suggestion = _suggestion(found, item.pk)
    return {
        "item": item,
        "answers": [
            {
                "annotator": answer.annotator.get_username(),
                "label": answer.current_revision.label,
                "competence": competence.get(answer.annotator_id),
                "excluded": answer.annotator_id in excluded,
                "flagged": answer.annotator_id in flagged,
            }
            for answer in item_answers(question=question, item=item)
        ],
        "suggestion": suggestion,
        "majority_name": names.get(suggestion.get("majority") or ""),
        "tied_names": [names[key] for key in suggestion.get("tied", [])],
        "posterior": [
            {"name": names[key], "p": p, "percent": round(100 * p)}
            for key, p in suggestion.get("ds_posterior", {}).items()
        ],
        "history": list(adjudication_history(question=question, item=item)),
    }


def _context(
    request: HttpRequest,
    study: Study,
    question: Question,
    found: QuestionAggregates,
    form: AdjudicationForm | None,
) -> dict[str, Any]:
    """The page's context; the current item is the one asked for (``?item=``), the one a
    refused decision was about, or the most disputed undecided one."""
    latest = latest_adjudications(question=question)
    disputed = disputed_items(aggregates=found, adjudicated=latest.keys())
    wanted = request.POST.get("item") if form is not None else request.GET.get("item")
    current_id = int(wanted) if wanted and wanted.isdigit() else None
    if current_id is None:
        current_id = next((row["item_id"] for row in disputed if not row["adjudicated"]), None)
    panel = None
    if current_id is not None:
        item = get_object_or_404(study.items, pk=current_id)
        panel = _panel(question, found, item)
    labels = list(question.labels.order_by("position", "id"))
    listed = disputed[:LISTED]
    names = dict(  # the items' own names, as every other page shows them (not database ids)
        study.items.filter(pk__in=[row["item_id"] for row in listed]).values_list(
            "pk", "external_id"
        )
    )
    is_manager = study.role == Membership.Role.MANAGER  # type: ignore[attr-defined]
    rule = overlap_rule(question=question)
    return {
        "study": study,
        "question": question,
        "questions": categorical_questions(study=study),
        "labels": [{"label": label, "key": str(n)} for n, label in enumerate(labels[:9], 1)]
        + [{"label": label, "key": ""} for label in labels[9:]],
        "disputed": [{**row, "name": names.get(row["item_id"], "")} for row in listed],
        "n_disputed": len(disputed),
        "n_open": sum(not row["adjudicated"] for row in disputed),
        "panel": panel,
        "form": form,
        "is_manager": is_manager,
        "rule": rule,
        "rule_form": OverlapRuleForm(instance=rule, question=question) if is_manager else None,
        "n_excluded": len(found.left_out),
        "disputed_means": DISPUTED,
    }


@login_required
@require_http_methods(["GET", "POST"])
def adjudicate(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """Disputed items of a categorical question, most disputed first, and the current one.

    A POST records the final label or "genuinely ambiguous" of the posted item; without
    JavaScript it redirects back here (the next undecided item), with htmx the response is the
    workspace fragment. Managers and reviewers only.
    """
    study = adjudicated_study(request, study_id)
    question = _question(study, question_key)
    form = None
    found = curated_aggregates(question=question)
    if request.method == "POST":
        form = AdjudicationForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            item = get_object_or_404(study.items, pk=data["item"])
            if form.apply(
                adjudication_record,
                adjudicator=request.user,
                question=question,
                item=item,
                label_key=data["label"],
                note=data["note"],
                suggestion=_suggestion(found, item.pk),
            ):
                messages.success(request, f"Item {item.external_id} settled.")
        if not form.errors:
            if not request.htmx:
                return redirect("adjudication:page", study.pk, question.key)
            form = None
    context = _context(request, study, question, found, form)
    template = "adjudication/adjudicate.html"
    if request.htmx:
        template += "#workspace"
    status = form.http_status if form is not None else 200
    return render(request, template, context, status=status)


@login_required
@require_POST
def overlap(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """Set (or with ``action=remove`` remove) the question's adaptive overlap, then go back
    to the page the form is on: the adjudication page, or a trace question's traces page.
    Managers only."""
    study = managed_study(request, study_id)
    question = get_object_or_404(
        study.questions.filter(kind__in=list(OverlapRule.MEASURES_OF_KIND)), key=question_key
    )
    back = "continuous:traces" if question.kind == Question.Kind.CONTINUOUS else "adjudication:page"
    if request.POST.get("action") == "remove":
        if overlap_rule_remove(manager=request.user, question=question):
            messages.info(request, "Adaptive overlap removed: every item keeps its k.")
    else:
        form = OverlapRuleForm(
            request.POST, instance=overlap_rule(question=question), question=question
        )
        if form.is_valid() and form.apply(
            overlap_rule_set,
            manager=request.user,
            question=question,
            **form.cleaned_data,
        ):
            messages.success(request, "Adaptive overlap saved.")
        else:
            for field, errors in form.errors.items():
                messages.error(request, f"{field}: {' '.join(errors)}")
    return redirect(reverse(back, args=[study.pk, question.key]))


@login_required
@require_POST
def predicted_overlap(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """Give the question's predicted-hard items more annotators from the start. Managers only."""
    study = managed_study(request, study_id)
    question = _question(study, question_key)
    form = PredictedOverlapForm(request.POST)
    if form.is_valid():
        added = form.apply(
            predicted_overlap_raise, manager=request.user, question=question, **form.cleaned_data
        )
        if added is not None:
            messages.success(
                request,
                f"{added} assignments added: items predicted above "
                f"{form.cleaned_data['threshold']:g} now have {form.cleaned_data['k']} annotators.",
            )
    if form.errors:
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(errors)}")
    overview = reverse("studies:overview", args=[study.pk])
    return redirect(f"{overview}?question={question.key}&sort=predicted#coverage")


@login_required
@require_GET
def aggregated_export(request: HttpRequest, study_id: int, fmt: str) -> HttpResponseBase:
    """Download the aggregated labels; ``?curated=1`` leaves excluded annotators out."""
    study = managed_study(request, study_id)
    if fmt not in FORMATS:
        raise Http404("Unknown format.")
    return aggregated_response(
        request=request, study=study, fmt=fmt, curated=request.GET.get("curated") == "1"
    )


@login_required
@require_GET
def aggregated_provenance_view(request: HttpRequest, study_id: int) -> HttpResponse:
    """The provenance record (JSON) of ``aggregated.<format>?curated=1`` (``?format=``)."""
    study = managed_study(request, study_id)
    fmt = request.GET.get("format", "csv")
    if fmt not in FORMATS:
        return HttpResponseBadRequest("Unknown format; use csv, jsonl or parquet.")
    curated = request.GET.get("curated", "1") == "1"
    record = aggregated_provenance(study=study, fmt=fmt, curated=curated)
    filename = aggregated_filename(study=study, fmt=fmt, curated=curated)
    return HttpResponse(
        provenance_json(record),
        content_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{filename}.provenance.json"'},
    )
