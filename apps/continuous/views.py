"""Pages: the annotator's trace recorder and the manager's overlay of traces with calibration."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from apps.adjudication.forms import OverlapRuleForm
from apps.adjudication.selectors import overlap_rule
from apps.continuous.config import trace_settings
from apps.continuous.selectors import (
    MEDIA_KINDS,
    calibration_report,
    continuous_questions,
    first_traced_item,
    green_signal_for_item,
    has_trace,
    item_overlay,
    next_trace_assignment,
    overlay_items,
    stimulus_duration,
    trace_assignments,
    trace_progress,
)
from apps.recruitment.sessions import participant_elsewhere
from apps.studies.access import annotated_study, managed_study
from apps.studies.models import Question, Study
from apps.studies.selectors import instructions_for
from core.markdown import render_markdown


def _question(study: Study, question_key: str) -> Question:
    """The study's continuous question of that key (404 if there is none)."""
    return get_object_or_404(continuous_questions(study=study), key=question_key)


@login_required
def record_next(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """Send the annotator to their next item without a trace, or say they are done."""
    question = _question(annotated_study(request, study_id), question_key)
    if away := participant_elsewhere(request, question.study, here=request.path):
        return away
    assignment = next_trace_assignment(annotator=request.user, question=question)
    if assignment is not None and question.study.status == Study.Status.RUNNING:
        return redirect("continuous:record", study_id, question_key, assignment.pk)
    context = {
        "study": question.study,
        "question": question,
        "progress": trace_progress(annotator=request.user, question=question),
    }
    return render(request, "continuous/record.html", context)


@login_required
def record(
    request: HttpRequest, study_id: int, question_key: str, assignment_id: int
) -> HttpResponse:
    """The recorder for one assigned item: player, slider, live trace, chunked upload."""
    question = _question(annotated_study(request, study_id), question_key)
    here = reverse("continuous:record_next", args=[study_id, question_key])
    if away := participant_elsewhere(request, question.study, here=here):
        return away
    assignment = get_object_or_404(
        trace_assignments(annotator=request.user, question=question), pk=assignment_id
    )
    settings = trace_settings(question)
    item = assignment.item
    # A gold item with audio or video plays it like any item; its signal stays on the server.
    green = green_signal_for_item(item)
    api = {
        action: reverse(f"study-trace-{action}", kwargs={"study_pk": question.study_id})
        for action in ("chunks", "finish", "resume")
    }
    config = {
        "assignment": assignment.pk,
        "question": question.key,
        "settings": settings.as_dict(),
        "duration": stimulus_duration(item),
        "gold": {"values": green.array().round(6).tolist(), "rate_hz": green.rate_hz}
        if green
        else None,
        "api": api,
        "csrf": get_token(request),
    }
    progress = trace_progress(annotator=request.user, question=question)
    context = {
        "study": question.study,
        "question": question,
        "item": item,
        "green": green,
        "settings": settings,
        "config": config,
        "progress": progress,
        "instructions": render_markdown(
            instructions_for(study=question.study, questions=[question])
        ),
        "done_after": progress["done"] + (not has_trace(assignment=assignment, question=question)),
        "next_url": reverse("continuous:record_next", args=[study_id, question_key]),
        "running": question.study.status == Study.Status.RUNNING,
        "playable": green is not None or item.kind in MEDIA_KINDS,
    }
    return render(request, "continuous/record.html", context)


@login_required
def traces(request: HttpRequest, study_id: int, question_key: str) -> HttpResponse:
    """A manager's view: one item's traces of all annotators overlaid, and the calibration."""
    question = _question(managed_study(request, study_id), question_key)
    settings = trace_settings(question)
    items = overlay_items(question=question)
    chosen = next((i for i in items if str(i.pk) == request.GET.get("item")), None)
    chosen = chosen or first_traced_item(question=question, items=items)
    shown = item_overlay(question=question, item=chosen) if chosen else None
    context = {
        "study": question.study,
        "question": question,
        "settings": settings,
        "items": items,
        "chosen": chosen,
        "gold": shown.gold if shown else None,
        "recordings": shown.recordings if shown else [],
        "plot": shown.plot if shown else None,
    }
    if request.htmx:
        return render(request, "continuous/traces.html#overlay", context)
    context["calibration"] = calibration_report(question=question)
    context["rule"] = rule = overlap_rule(question=question)
    context["rule_form"] = OverlapRuleForm(instance=rule, question=question)
    return render(request, "continuous/traces.html", context)
