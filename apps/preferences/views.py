"""Pages of pairwise preferences: an annotator's comparisons and the managers' results."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.exchange import formats
from apps.exchange.identity import PSEUDONYMS, USERNAMES, annotator_names
from apps.items.models import Item
from apps.preferences.exporting import (
    JUDGEMENT_SCHEMA,
    PREFERENCE_SCHEMA,
    judgement_rows,
    preference_rows,
    score_csv_text,
    score_rows,
    score_schema,
)
from apps.preferences.forms import JudgementForm, UndoForm
from apps.preferences.models import clean_pairwise_settings
from apps.preferences.scheduling import floor_rule
from apps.preferences.selectors import (
    annotator_reports,
    curated_scores,
    pairwise_questions,
    question_judgements,
    question_scores,
)
from apps.preferences.services import judgement_record, judgement_retract, pair_next
from apps.recruitment.sessions import participant_elsewhere
from apps.studies.access import annotated_study, managed_study
from apps.studies.models import Question, Study
from apps.studies.selectors import instructions_for
from core.markdown import render_markdown


def _question(study: Study, key: str) -> Question:
    return get_object_or_404(pairwise_questions(study=study), key=key)


@login_required
@require_http_methods(["GET", "POST"])
def compare(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """Show an annotator the next pair of a pairwise question; a POST answers it.

    Without JavaScript the POST redirects back here (POST/redirect/GET); with htmx the response
    is the pair area alone, holding the next pair. Only the study's annotators have this page.
    """
    study = annotated_study(request, study_id)
    question = _question(study, question_key)
    here = reverse("preferences:compare", args=[study.pk, question.key])
    if away := participant_elsewhere(request, study, here=here):
        return away
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
        # a participant whose last ranking this finished goes on (to the end, or other work)
        if not form.errors and (away := participant_elsewhere(request, study, here=here)):
            return away
        if not form.errors and not request.htmx:
            return redirect("preferences:compare", study.pk, question.key)
        failed = form if form.errors else None
    return _compare_page(request, study, question, failed=failed)


@login_required
@require_POST
def undo(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """Undo the annotator's latest judgement (key ``u`` or the Undo button): its pair returns.

    Answers like :func:`compare`'s POST: a redirect without JavaScript, the pair area with htmx.
    """
    study = annotated_study(request, study_id)
    question = _question(study, question_key)
    here = reverse("preferences:compare", args=[study.pk, question.key])
    if away := participant_elsewhere(request, study, here=here):
        return away
    form = UndoForm(request.POST)
    if form.is_valid():
        form.apply(
            judgement_retract,
            question=question,
            annotator=request.user,
            judgement_id=form.cleaned_data["judgement"],
        )
    if not form.errors and not request.htmx:
        return redirect("preferences:compare", study.pk, question.key)
    return _compare_page(request, study, question, failed=form if form.errors else None)


def _compare_page(
    request: HttpRequest,
    study: Study,
    question: Question,
    *,
    failed: JudgementForm | UndoForm | None,
) -> HttpResponse:
    """The comparison page (the pair area alone for htmx), with a failed form's errors."""
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
        "instructions": render_markdown(instructions_for(study=study, questions=[question])),
        "state": state,
        "problem": problem,
        "item_a": items.get(pair[0]) if pair else None,
        "item_b": items.get(pair[1]) if pair else None,
        "form": JudgementForm.for_pair(pair),
        "failed": failed,
    }
    template = "preferences/compare.html#pair_area" if request.htmx else "preferences/compare.html"
    return render(request, template, context, status=failed.http_status if failed else 200)


#: The results page lists the best this many items; the downloads hold every item.
SCORE_TABLE_ROWS = 500
#: ... with the count scores of this many annotators (table order); the downloads hold every
#: annotator's. 200 annotators x 500 rows made 100,000 cells, half a second of template work.
SCORE_TABLE_ANNOTATORS = 20


@login_required
@require_GET
def results(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """A manager's view of a pairwise question: scores, and each annotator's consistency."""
    study = managed_study(request, study_id)
    question = _question(study, question_key)
    try:
        settings, settings_error = clean_pairwise_settings(question.settings), None
    except ValidationError as exc:
        settings, settings_error = None, " ".join(exc.messages)
    judgements = question_judgements(question=question)  # read once for both
    reports = annotator_reports(question=question, judgements=judgements)
    scores = question_scores(question=question, judgements=judgements)
    shown = scores.rows[:SCORE_TABLE_ROWS]
    items = Item.objects.only("external_id", "text").in_bulk([row.item.pk for row in shown])
    columns = scores.annotator_scores_of(limit=SCORE_TABLE_ANNOTATORS)
    context = {
        "study": study,
        "question": question,
        "settings": settings,
        "settings_error": settings_error,
        "reports": reports,
        "flagged": [report for report in reports if report.flagged],
        "floor_rule": floor_rule(),
        "scores": scores,
        "score_annotators": scores.annotator_weights[:SCORE_TABLE_ANNOTATORS],
        "score_rows": [
            (row, items[row.item.pk], [cells.get(row.item.pk) for cells in columns])
            for row in shown
        ],
    }
    return render(request, "preferences/results.html", context)


@login_required
@require_GET
def scores_export(
    request: HttpRequest, study_id: int, question_key: str, fmt: str = "csv"
) -> HttpResponse | StreamingHttpResponse:
    """Download the score table (Bradley-Terry and count scores per annotator) as ``fmt`` (CSV,
    JSON Lines or Parquet), every item. ``?annotators=pseudonyms`` names annotators by
    per-study pseudonyms."""
    study = managed_study(request, study_id)
    question = _question(study, question_key)
    scores = question_scores(question=question)
    name = annotator_names(study_id=study.pk, identity=_identity(request))
    if fmt == "csv":  # the generic writer's text, written without a call per cell
        chunks = (text.encode(formats.ENCODING) for text in score_csv_text(scores, name=name))
    else:
        chunks = formats.encode(
            score_rows(scores, name=name), columns=score_schema(scores, name=name), fmt=fmt
        )
    return formats.download(
        chunks,
        request=request,
        fmt=fmt,
        filename=f"study{study.pk}-{question.key}-scores.{fmt}",
    )


@login_required
@require_GET
def judgements_export(
    request: HttpRequest, study_id: int, question_key: str, fmt: str = "csv"
) -> StreamingHttpResponse:
    """Download every raw judgement of a pairwise question as ``fmt`` (CSV, JSON Lines or
    Parquet); ``?annotators=pseudonyms`` names annotators by per-study pseudonyms."""
    study = managed_study(request, study_id)
    question = _question(study, question_key)
    name = annotator_names(study_id=study.pk, identity=_identity(request))
    return formats.download(
        formats.encode(
            judgement_rows(question=question, name=name), columns=JUDGEMENT_SCHEMA, fmt=fmt
        ),
        request=request,
        fmt=fmt,
        filename=f"study{study.pk}-{question.key}-judgements.{fmt}",
    )


@login_required
@require_GET
def preferences_export(
    request: HttpRequest, study_id: int, question_key: str, fmt: str
) -> StreamingHttpResponse:
    """Download the preference pairs of a pairwise question for training a model (``prompt``,
    ``chosen``, ``rejected``, the annotator's weight and the Bradley-Terry margin) as JSON
    Lines or Parquet: curated (the excluded annotators left out, and the pooled fit made
    without them) unless ``?curated=0``; ties left out unless ``?ties=keep``;
    ``?annotators=pseudonyms`` names annotators by per-study pseudonyms."""
    study = managed_study(request, study_id)
    question = _question(study, question_key)
    curated = request.GET.get("curated") != "0"
    left_out, scores = curated_scores(question=question, curated=curated)
    name = annotator_names(study_id=study.pk, identity=_identity(request))
    rows = preference_rows(
        question=question,
        scores=scores,
        name=name,
        left_out=left_out,
        ties=request.GET.get("ties") == "keep",
    )
    return formats.download(
        formats.encode(rows, columns=PREFERENCE_SCHEMA, fmt=fmt),
        request=request,
        fmt=fmt,
        filename=f"study{study.pk}-{question.key}-preferences{'' if curated else '-all'}.{fmt}",
    )


def _identity(request: HttpRequest) -> str:
    """``?annotators=pseudonyms``, or usernames."""
    return PSEUDONYMS if request.GET.get("annotators") == PSEUDONYMS else USERNAMES
