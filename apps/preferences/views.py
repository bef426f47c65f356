"""Pages of pairwise preferences: an annotator's comparisons and the managers' results."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from apps.items.models import Item
from apps.preferences.exporting import csv_response
from apps.preferences.forms import JudgementForm
from apps.preferences.models import clean_pairwise_settings
from apps.preferences.selectors import (
    annotator_reports,
    judgement_rows,
    pairwise_questions,
    question_scores,
    score_rows,
)
from apps.preferences.services import judgement_record, pair_next
from apps.studies.markdown import render_markdown
from apps.studies.models import Membership, Question, Study
from apps.studies.selectors import studies_for_user, studies_managed_by, study_role


def _question(study: Study, key: str) -> Question:
    return get_object_or_404(pairwise_questions(study=study), key=key)


@login_required
@require_http_methods(["GET", "POST"])
def compare(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """Show an annotator the next pair of a pairwise question; a POST answers it.

    Without JavaScript the POST redirects back here (POST/redirect/GET); with htmx the response
    is the pair area alone, holding the next pair. Only the study's annotators have this page.
    """
    study = get_object_or_404(studies_for_user(user=request.user), pk=study_id)
    if study_role(user=request.user, study=study) != Membership.Role.ANNOTATOR:
        raise Http404("Only the study's annotators compare its items.")
    question = _question(study, question_key)
    failed = None
    if request.method == "POST":
        form = JudgementForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            form.apply(
                judgement_record,
                question=question,
                annotator=request.user,
                item_a=data["item_a"],
                item_b=data["item_b"],
                outcome=data["outcome"],
                idempotency_key=data["idempotency_key"],
                time_spent_ms=data["time_spent_ms"],
            )
        if not form.errors and not request.htmx:
            return redirect("preferences:compare", study.pk, question.key)
        failed = form if form.errors else None
    state, problem = None, None
    if study.is_running:
        try:
            state = pair_next(question=question, annotator=request.user)
        except ValidationError as exc:  # e.g. settings a manager mistyped
            problem = " ".join(exc.messages)
    pair = state.pending if state else None
    items = Item.objects.in_bulk(pair) if pair else {}
    context = {
        "study": study,
        "question": question,
        "instructions": render_markdown(study.instructions),
        "state": state,
        "problem": problem,
        "item_a": items.get(pair[0]) if pair else None,
        "item_b": items.get(pair[1]) if pair else None,
        "form": JudgementForm.for_pair(pair),
        "failed": failed,
    }
    template = "preferences/compare.html#pair_area" if request.htmx else "preferences/compare.html"
    return render(request, template, context, status=failed.http_status if failed else 200)


@login_required
@require_GET
def results(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """A manager's view of a pairwise question: scores, and each annotator's consistency."""
    study = get_object_or_404(studies_managed_by(user=request.user), pk=study_id)
    question = _question(study, question_key)
    try:
        settings, settings_error = clean_pairwise_settings(question.settings), None
    except ValidationError as exc:
        settings, settings_error = None, " ".join(exc.messages)
    reports = annotator_reports(question=question)
    context = {
        "study": study,
        "question": question,
        "settings": settings,
        "settings_error": settings_error,
        "reports": reports,
        "below_floor": [report for report in reports if report.below_floor],
        "scores": question_scores(question=question),
    }
    return render(request, "preferences/results.html", context)


@login_required
@require_GET
def scores_export(request: HttpRequest, study_id: int, question_key: str) -> StreamingHttpResponse:
    """Download the score table (Bradley-Terry and count scores per annotator) as CSV."""
    study = get_object_or_404(studies_managed_by(user=request.user), pk=study_id)
    question = _question(study, question_key)
    return csv_response(
        score_rows(question_scores(question=question)),
        filename=f"study{study.pk}-{question.key}-scores.csv",
    )


@login_required
@require_GET
def judgements_export(
    request: HttpRequest, study_id: int, question_key: str
) -> StreamingHttpResponse:
    """Download every raw judgement of a pairwise question as CSV."""
    study = get_object_or_404(studies_managed_by(user=request.user), pk=study_id)
    question = _question(study, question_key)
    return csv_response(
        judgement_rows(question=question),
        filename=f"study{study.pk}-{question.key}-judgements.csv",
    )
