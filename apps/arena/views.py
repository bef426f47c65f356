"""Pages of the model arena: an annotator's votes and the managers' ranking."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from analytics.selectors import excluded_annotator_ids
from apps.annotations.models import Revision
from apps.arena.exporting import arena_preference_rows
from apps.arena.forms import VoteForm
from apps.arena.models import item_responses
from apps.arena.selectors import arena_questions, arena_results, arena_state
from apps.arena.services import arena_vote_record
from apps.exchange import formats
from apps.exchange.identity import PSEUDONYMS, USERNAMES, annotator_names
from apps.preferences.exporting import PREFERENCE_SCHEMA
from apps.recruitment.sessions import participant_elsewhere
from apps.studies.access import annotated_study, managed_study
from apps.studies.models import Question, Study
from apps.studies.selectors import instructions_for
from core.markdown import render_markdown


def _question(study: Study, key: str) -> Question:
    return get_object_or_404(arena_questions(study=study), key=key)


@login_required
@require_http_methods(["GET", "POST"])
def arena(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """Show an annotator a prompt and two models' responses; a POST votes on them.

    Without JavaScript the POST redirects back here (POST/redirect/GET); with htmx the response
    is the pair area alone, holding the next pair. Only the study's annotators have this page.
    """
    study = annotated_study(request, study_id)
    question = _question(study, question_key)
    here = reverse("arena:arena", args=[study.pk, question.key])
    if away := participant_elsewhere(request, study, here=here):
        return away
    failed = None
    if request.method == "POST":
        form = VoteForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            form.apply(
                arena_vote_record,
                question=question,
                annotator=request.user,
                item_id=data["item_id"],
                model_a=data["model_a"],
                model_b=data["model_b"],
                outcome=data["outcome"],
                idempotency_key=data["idempotency_key"],
                time_spent_ms=data["time_spent_ms"],
                source=Revision.Source.UI,
            )
        if not form.errors and (away := participant_elsewhere(request, study, here=here)):
            return away
        if not form.errors and not request.htmx:
            return redirect("arena:arena", study.pk, question.key)
        failed = form if form.errors else None
    state, problem = None, None
    if study.is_running:
        try:
            state = arena_state(question=question, annotator=request.user)
        except ValidationError as exc:  # settings a manager mistyped
            problem = " ".join(exc.messages)
    task = state.task if state else None
    responses = item_responses(task.item.metadata) if task else {}
    context = {
        "study": study,
        "question": question,
        "instructions": render_markdown(instructions_for(study=study, questions=[question])),
        "state": state,
        "problem": problem,
        "task": task,
        "response_a": responses.get(task.model_a) if task else None,
        "response_b": responses.get(task.model_b) if task else None,
        "form": VoteForm.for_task(task.item.pk, task.model_a, task.model_b)
        if task
        else VoteForm.for_task(None),
        "failed": failed,
    }
    template = "arena/arena.html#pair_area" if request.htmx else "arena/arena.html"
    return render(request, template, context, status=failed.http_status if failed else 200)


@login_required
@require_GET
def results(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """A manager's view of an arena question: the models ranked, with their intervals, and
    the votes, prompts and annotators the figures rest on."""
    study = managed_study(request, study_id)
    question = _question(study, question_key)
    found = arena_results(question=question)
    context = {"study": study, "question": question, "results": found}
    return render(request, "arena/results.html", context)


@login_required
@require_GET
def preferences_export(
    request: HttpRequest, study_id: int, question_key: str, fmt: str
) -> StreamingHttpResponse:
    """Download the votes of an arena question as preference pairs (``prompt``, ``chosen``,
    ``rejected``, the annotator's weight and the ranking's margin) as JSON Lines, Parquet or
    CSV: curated (the excluded annotators left out, and the ranking fitted without them)
    unless ``?curated=0``; ties left out unless ``?ties=keep``; ``?annotators=pseudonyms``
    names annotators by per-study pseudonyms."""
    study = managed_study(request, study_id)
    question = _question(study, question_key)
    curated = request.GET.get("curated") != "0"
    left_out = excluded_annotator_ids(study=study) if curated else set()
    found = arena_results(question=question, left_out=left_out, n_boot=0)
    identity = PSEUDONYMS if request.GET.get("annotators") == PSEUDONYMS else USERNAMES
    rows = arena_preference_rows(
        question=question,
        results=found,
        name=annotator_names(study_id=study.pk, identity=identity),
        left_out=left_out,
        ties=request.GET.get("ties") == "keep",
    )
    return formats.download(
        formats.encode(rows, columns=PREFERENCE_SCHEMA, fmt=fmt),
        request=request,
        fmt=fmt,
        filename=f"study{study.pk}-{question.key}-preferences{'' if curated else '-all'}.{fmt}",
    )
