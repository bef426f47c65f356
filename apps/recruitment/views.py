"""Pages of recruitment: the link participants arrive by, their phases, the manager's page."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from csp.decorators import csp_replace, csp_update
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.forms.models import model_to_dict
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.clickjacking import xframe_options_exempt
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.continuous.config import trace_settings
from apps.continuous.selectors import green_signal_for_item
from apps.items.uploads import UploadLimits, limit_uploads
from apps.preferences.models import clean_pairwise_settings
from apps.recruitment.forms import (
    OUTCOME_NAMES,
    GoldSignalForm,
    GoldUseForm,
    RecruitmentForm,
    TrainingAnswerForm,
    consent_form,
)
from apps.recruitment.models import (
    PLATFORM_ID,
    GoldAnswer,
    Participant,
    Platform,
    Recruitment,
    TrainingAnswer,
)
from apps.recruitment.selectors import (
    gold_accuracy,
    gold_answers_of,
    gold_signal_items,
    gold_signals_of,
    gold_use_questions,
    package_of,
    package_plan,
    participant_of,
    participant_of_user,
    participant_page,
    participants_overview,
    payment_rows,
    recruitment_capacity,
    recruitment_open_by_token,
    training_next,
    training_progress,
    training_versus,
)
from apps.recruitment.services import (
    GOLD_USE_NONE,
    ParticipantIdTakenError,
    StudyFullError,
    gold_use_set,
    item_gold_signal_set,
    participant_consent,
    participant_enter,
    participant_finish,
    participant_start_work,
    participant_training_answer,
    participant_training_finish,
    participants_release_expired,
    recruitment_update,
)
from apps.recruitment.sessions import (
    RESUME_KEY,
    is_participant_session,
    participant_session_start,
)
from apps.recruitment.signal_files import MAX_SIGNAL_BYTES, signal_read
from apps.studies.access import managed_study
from apps.studies.models import Question, Study
from core.csv_files import csv_download
from core.forms import posted
from core.markdown import render_markdown

Status = Participant.Status
PROLIFIC_RETURN = "https://app.prolific.com/submissions/complete?cc={code}"
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
SIGNALS_PAGE_SIZE = 25  # gold signals per page of the manager's page
# Where MTurk shows an ExternalQuestion's frame from, and where its answers are posted.
MTURK_FRAMERS = ["https://worker.mturk.com", "https://workersandbox.mturk.com"]
MTURK_SUBMIT = {"https://www.mturk.com", "https://workersandbox.mturk.com"}
# The URL parameters each platform sends: (participant id, its study id, its session id).
PARAMETERS = {
    Platform.PROLIFIC: ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID"),
    Platform.MTURK: ("workerId", "hitId", "assignmentId"),
    Platform.GENERIC: ("pid", "", ""),
}
LINK_QUERIES = {
    Platform.PROLIFIC: "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}"
    "&SESSION_ID={{%SESSION_ID%}}",
    Platform.MTURK: "workerId=…&assignmentId=…&hitId=…&turkSubmitTo=… (added by MTurk)",
    Platform.GENERIC: "pid=<your panel's participant id>",
}


def _problem(request: HttpRequest, title: str, message: str, *, status: int) -> HttpResponse:
    context = {"title": title, "message": message}
    return render(request, "recruitment/problem.html", context, status=status)


@require_GET
def join(request: HttpRequest, token: str) -> HttpResponse:
    """The recruitment link: sign the participant in by their platform id and send them on."""
    recruitment = recruitment_open_by_token(token=token)
    if recruitment is None:
        raise Http404("No such recruitment link.")
    id_name, study_name, session_name = PARAMETERS[Platform(recruitment.platform)]
    if recruitment.platform == Platform.MTURK and (
        "turkSubmitTo" in request.GET or request.GET.get("assignmentId") == MTURK_PREVIEW
    ):
        return mturk_frame(request, recruitment)
    if request.user.is_authenticated and participant_of_user(user=request.user) is None:
        message = (
            f"You are signed in as {request.user.get_username()}. Sign out, or open the "
            "link in a private window, to take part as a participant."
        )
        return _problem(request, "Signed in already", message, status=409)
    platform_id = request.GET.get(id_name, "").strip()
    try:
        PLATFORM_ID(platform_id)
    except ValidationError:
        message = f"This link needs your participant id in its {id_name} parameter."
        return _problem(request, "Participant id missing", message, status=400)
    study_id = request.GET.get(study_name, "") if study_name else ""
    if recruitment.platform == Platform.PROLIFIC and recruitment.prolific_study_id not in (
        "",
        study_id,
    ):
        message = (
            "This link belongs to another Prolific study. Please return to Prolific and open "
            "the study from there."
        )
        return _problem(request, "Wrong study", message, status=403)
    session_id = request.GET.get(session_name, "").strip() if session_name else ""
    try:
        entry = participant_enter(
            recruitment=recruitment,
            platform_id=platform_id,
            study_id=study_id,
            session_id=session_id,
            resume_code=request.GET.get("resume", ""),
            same_browser=_same_browser(request, recruitment, platform_id),
        )
    except ParticipantIdTakenError:
        context = {"study": recruitment.study, "query": request.GET.dict()}
        return render(request, "recruitment/id_taken.html", context, status=409)
    except StudyFullError:
        code = recruitment.screen_out_code
        context = {
            "study": recruitment.study,
            "code": code,
            "return_url": return_url(recruitment, code),
        }
        return render(request, "recruitment/full.html", context)
    except ValidationError as exc:
        return _problem(request, "Not open", " ".join(exc.messages), status=403)
    participant_session_start(request, entry.participant)
    if entry.resume_code:
        request.session[RESUME_KEY] = entry.resume_code
    return redirect(participant_page(participant=entry.participant))


def _same_browser(request: HttpRequest, recruitment: Recruitment, platform_id: str) -> bool:
    """Whether this browser's session is the participant's who holds ``platform_id``."""
    if not is_participant_session(request):
        return False
    mine = participant_of_user(user=request.user)
    return (
        mine is not None
        and mine.study_id == recruitment.study_id
        and mine.platform == recruitment.platform
        and mine.platform_id == platform_id
    )


@xframe_options_exempt
@csp_replace({"frame-ancestors": MTURK_FRAMERS})
@csp_update({"form-action": sorted(MTURK_SUBMIT)})
def mturk_frame(request: HttpRequest, recruitment: Recruitment) -> HttpResponse:
    """The page MTurk shows inside the HIT (an ExternalQuestion): a link that opens the task in
    a tab of its own (signing in from inside a frame would need third-party cookies), and the
    form that submits the completion code to MTurk. No one is signed in or created here.
    """
    if request.GET.get("assignmentId") == MTURK_PREVIEW:
        return _problem(request, "Preview", "Accept the HIT to start the task.", status=200)
    submit_to = request.GET.get("turkSubmitTo", "").rstrip("/")
    if submit_to not in MTURK_SUBMIT:
        return _problem(request, "Unknown MTurk site", "This HIT link is malformed.", status=400)
    task = {key: request.GET.get(key, "") for key in ("workerId", "assignmentId", "hitId")}
    context = {
        "task_url": f"{request.path}?{urlencode(task)}",
        "submit_url": f"{submit_to}/mturk/externalSubmit",
        "assignment_id": task["assignmentId"],
    }
    return render(request, "recruitment/mturk_frame.html", context)


def _participant(request: HttpRequest, study_id: int) -> Participant:
    """The signed-in participant of the study; 404 for everyone else."""
    participant = participant_of(user=request.user, study=get_object_or_404(Study, pk=study_id))
    if participant is None:
        raise Http404("Only the study's recruited participants have this page.")
    return participant


def _elsewhere(participant: Participant, here: str) -> HttpResponse | None:
    """A redirect to the participant's current page if it is not ``here``."""
    page = participant_page(participant=participant)
    return None if page == reverse(here, args=[participant.study_id]) else redirect(page)


@login_required
@require_http_methods(["GET", "POST"])
def consent(request: HttpRequest, study_id: int) -> HttpResponse:
    """The consent text and the pre-study questionnaire; agreeing starts the training."""
    participant = _participant(request, study_id)
    if away := _elsewhere(participant, "recruitment:consent"):
        return away
    recruitment = participant.study.recruitment
    form = consent_form(recruitment.questionnaire, posted(request))
    if request.method == "GET" and not (recruitment.consent_text or recruitment.questionnaire):
        participant = participant_consent(participant=participant, agree=True)
        return redirect(participant_page(participant=participant))
    if request.method == "POST":
        if request.POST.get("action") == "decline":
            participant = participant_consent(participant=participant, agree=False)
            return redirect(participant_page(participant=participant))
        if form.is_valid():
            participant = participant_consent(
                participant=participant, agree=True, answers=form.cleaned_data
            )
            return redirect(participant_page(participant=participant))
    context = {
        "study": participant.study,
        "consent_text": render_markdown(recruitment.consent_text),
        "form": form,
        "resume_code": request.session.get(RESUME_KEY, ""),
    }
    status = 422 if form.is_bound and form.errors else 200
    return render(request, "recruitment/consent.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def training(request: HttpRequest, study_id: int) -> HttpResponse:
    """Training items one at a time, each answer followed by feedback; then the verdict."""
    participant = _participant(request, study_id)
    if away := _elsewhere(participant, "recruitment:training"):
        return away
    shown = request.GET.get("feedback", "")
    feedback = (
        participant.training_answers.select_related("gold__item", "gold__question")
        .filter(gold_id=int(shown))
        .first()
        if shown.isdigit()
        else None
    )
    gold = training_next(participant=participant)
    form = None
    if feedback is None:
        if gold is None:
            participant = participant_training_finish(participant=participant)
            return redirect(participant_page(participant=participant))
        form = TrainingAnswerForm(posted(request), gold=gold)
        if form.is_valid() and form.cleaned_data["gold"] == gold.pk:
            answer = form.apply(
                participant_training_answer,
                participant=participant,
                gold=gold,
                value=form.answer_value(),
            )
            if answer is not None:
                return redirect(f"{request.path}?feedback={gold.pk}")
    shown_gold = feedback.gold if feedback else gold
    context = {
        "study": participant.study,
        "gold": shown_gold,
        "item": shown_gold.item,
        "versus": training_versus(gold=shown_gold),
        "form": form,
        "feedback": feedback,
        **(_feedback_texts(feedback) if feedback else {}),
        "trace": _trace_config(shown_gold) if form is not None else None,
        "progress": training_progress(participant=participant),
        "resume_code": request.session.get(RESUME_KEY, ""),
        # the task's own answer controls (label buttons with their keys; the pair's buttons)
        "labels": list(shown_gold.question.labels.all()),
        "strict": shown_gold.question.kind == Question.Kind.PAIRWISE
        and clean_pairwise_settings(shown_gold.question.settings).strict,
    }
    status = form.http_status if form is not None else 200
    return render(request, "recruitment/training.html", context, status=status)


def _feedback_texts(answer: TrainingAnswer) -> dict[str, Any]:
    """What the feedback says: the expected and the given answer (a trace: its kappa_SDA with
    the truth and the threshold)."""
    gold, question = answer.gold, answer.gold.question
    if question.kind == Question.Kind.CONTINUOUS:
        return {"kappa": answer.score, "needed": question.study.recruitment.trace_threshold}
    if question.kind == Question.Kind.PAIRWISE:
        names: dict[Any, str] = OUTCOME_NAMES
        expected, given = gold.value["outcome"], answer.value["outcome"]
    else:
        names = {lab.key: lab.name for lab in question.labels.all()}
        expected, given = gold.value.get("label"), answer.value.get("label")
    return {"expected": names.get(expected), "given": names.get(given)}


def _trace_config(gold: GoldAnswer) -> dict[str, Any] | None:
    """The training recorder's settings for a gold trace: the truth drives the green screen
    of an item without media (``signal``); an audio or video item plays its own media and its
    truth stays on the server, which scores the trace."""
    if gold.question.kind != Question.Kind.CONTINUOUS:
        return None
    settings = trace_settings(gold.question)
    config: dict[str, Any] = {
        "recording_rate_hz": settings.recording_rate_hz,
        "min": settings.scale_min,
        "max": settings.scale_max,
        "label_min": settings.label_min,
        "label_max": settings.label_max,
    }
    if (green := green_signal_for_item(gold.item)) is not None:
        config |= {"signal": green.array().round(4).tolist(), "rate_hz": green.rate_hz}
    return config


@login_required
@require_http_methods(["GET", "POST"])
def qualified(request: HttpRequest, study_id: int) -> HttpResponse:
    """Training passed: the button that hands out the work package."""
    participant = _participant(request, study_id)
    if away := _elsewhere(participant, "recruitment:qualified"):
        return away
    if request.method == "POST":
        try:
            participant = participant_start_work(participant=participant)
        except ValidationError as exc:
            messages.info(request, " ".join(exc.messages))
        else:
            if participant.has_ended:  # no work was left for them: the screen-out code
                return redirect(participant_page(participant=participant))
            package = package_of(participant=participant)
            messages.info(
                request,
                f"Your package has {package.total} items; please finish by "
                f"{package.deadline:%H:%M} UTC ({participant.study.recruitment.time_limit_minutes}"
                " minutes from now).",
            )
            return redirect(participant_page(participant=participant))
    recruitment = participant.study.recruitment
    context = {
        "study": participant.study,
        "participant": participant,
        "recruitment": recruitment,
        "resume_code": request.session.get(RESUME_KEY, ""),
    }
    return render(request, "recruitment/qualified.html", context)


def return_url(recruitment: Recruitment, code: str) -> str:
    """The platform address a participant goes back to with ``code`` ("" if none)."""
    template = recruitment.completion_url or (
        PROLIFIC_RETURN if recruitment.platform == Platform.PROLIFIC else ""
    )
    return template.replace("{code}", quote(code, safe="")) if template and code else ""


@login_required
@require_GET
def end(request: HttpRequest, study_id: int) -> HttpResponse:
    """The end of a visit: the completion code, or a polite goodbye with the screen-out code."""
    participant = _participant(request, study_id)
    if participant.status == Status.WORKING:
        participants_release_expired(study=participant.study)
        participant.refresh_from_db()
    if participant.status == Status.WORKING:
        try:
            participant = participant_finish(participant=participant)
        except ValidationError:
            return redirect(participant_page(participant=participant))
    if not participant.has_ended:
        return redirect(participant_page(participant=participant))
    recruitment = participant.study.recruitment
    context = {
        "study": participant.study,
        "participant": participant,
        "return_url": return_url(recruitment, participant.code_issued),
    }
    return render(request, "recruitment/end.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def manage(request: HttpRequest, study_id: int) -> HttpResponse:
    """The manager's page: link settings, the links to paste, participants, gold accuracy."""
    study = managed_study(request, study_id)
    recruitment = Recruitment.objects.filter(study=study).first()
    initial = model_to_dict(recruitment or Recruitment(study=study), RecruitmentForm.Meta.fields)
    form = RecruitmentForm(posted(request), initial=initial)
    if form.is_valid() and form.apply(recruitment_update, study=study, **form.cleaned_data):
        messages.success(request, "Recruitment saved.")
        return redirect("recruitment:manage", study.pk)
    return _manage_page(request, study, recruitment, form=form, signal_form=GoldSignalForm())


@csrf_exempt  # checked by _gold_signal, once the upload limit is in place
@login_required
@require_POST
def gold_signal(request: HttpRequest, study_id: int) -> HttpResponse:
    """Upload the true signal of an item (a gold trace); the form sits on the manager's page.

    A file over :data:`MAX_SIGNAL_BYTES` is dropped as it streams in (413): it was received
    whole before the limit was checked (200 MB: 132 s).
    """
    study = managed_study(request, study_id)
    limits = limit_uploads(request, file=MAX_SIGNAL_BYTES)
    return _gold_signal(request, study, limits)


@csrf_protect
def _gold_signal(request: HttpRequest, study: Study, limits: UploadLimits) -> HttpResponse:
    form = GoldSignalForm(request.POST, request.FILES)
    for refused in limits.refused:
        form.errors.pop(refused.field, None)  # not "required": it was sent, and dropped
        form.add_error(refused.field, str(refused))
    if not limits.refused and form.is_valid():
        data = form.cleaned_data
        item = study.items.filter(external_id=data["item"]).first()
        if item is None:
            form.add_error("item", f"No item {data['item']!r} in this study.")
        else:
            values = form.apply(
                signal_read, data=data["file"].read(MAX_SIGNAL_BYTES + 1), name=data["file"].name
            )
            if values is not None and form.apply(
                item_gold_signal_set,
                item=item,
                values=values,
                rate_hz=data["rate_hz"],
                description=data["description"],
            ):
                messages.success(request, f"True signal of {item.external_id} saved.")
                return redirect("recruitment:manage", study.pk)
    recruitment = Recruitment.objects.filter(study=study).first()
    initial = model_to_dict(recruitment or Recruitment(study=study), RecruitmentForm.Meta.fields)
    return _manage_page(
        request,
        study,
        recruitment,
        form=RecruitmentForm(initial=initial),
        signal_form=form,
        status=413 if limits.refused else None,
    )


def _manage_page(
    request: HttpRequest,
    study: Study,
    recruitment: Recruitment | None,
    *,
    form: RecruitmentForm,
    signal_form: GoldSignalForm,
    gold_form: GoldUseForm | None = None,
    status: int | None = None,
) -> HttpResponse:
    context: dict[str, Any] = {
        "study": study,
        "form": form,
        "recruitment": recruitment,
        "signal_form": signal_form,
    }
    signal_items = gold_signal_items(study=study)  # paged in the database
    signals_page = Paginator(signal_items, SIGNALS_PAGE_SIZE).get_page(request.GET.get("signals"))
    context |= {
        "signals_page": signals_page,
        "signals": gold_signals_of(items=signals_page),
    }
    if recruitment is not None:
        participants_release_expired(study=study)  # the list shows who timed out
        link = request.build_absolute_uri(reverse("recruitment:join", args=[recruitment.token]))
        participants = list(participants_overview(study=study))
        platform_ids = {
            row.participant.user_id: row.participant.platform_id for row in participants
        }
        context |= {
            "link_label": recruitment.get_platform_display(),
            "link": f"{link}?{LINK_QUERIES[recruitment.platform]}",
            "participants": participants,
            "capacity": recruitment_capacity(recruitment=recruitment),
            "plan": package_plan(recruitment=recruitment),
            "accuracy": [
                (row, platform_ids.get(row.annotator_id, ""))
                for row in gold_accuracy(study=study).values()
            ],
        }
    gold_form = gold_form or GoldUseForm(questions=gold_use_questions(study=study))
    context |= _gold_uses(request, study, gold_form)
    status = status or max(form.http_status, signal_form.http_status, gold_form.http_status)
    return render(request, "recruitment/manage.html", context, status=status)


GOLD_PAGE_SIZE = 50  # gold items per page of the manager's list


def _gold_uses(request: HttpRequest, study: Study, form: GoldUseForm) -> dict[str, Any]:
    """The gold section of the manager's page: the form and a page of the gold items."""
    gold = Paginator(gold_answers_of(study=study), GOLD_PAGE_SIZE)
    return {"study": study, "gold_form": form, "gold_page": gold.get_page(request.GET.get("gold"))}


@login_required
@require_POST
def gold_use(request: HttpRequest, study_id: int) -> HttpResponse:
    """Make an item a hidden check or a training item, or neither (the form on the manager's
    page; with htmx the gold section is swapped in place, errors with 422)."""
    study = managed_study(request, study_id)
    form = GoldUseForm(request.POST, questions=gold_use_questions(study=study))
    done = ""
    if form.is_valid():
        data = form.cleaned_data
        item = study.items.filter(external_id=data["item"]).first()
        if item is None:
            form.add_error("item", f"No item {data['item']!r} in this study.")
        else:
            question = form.chosen_question()
            form.apply(
                gold_use_set,
                item=item,
                question=question,
                use=data["use"],
                reason=data["reason"],
                value=form.value(),
            )
            if not form.errors:
                use = dict(form.fields["use"].choices)[data["use"]]
                done = f"{item.external_id}, {question.key}: {use.split(' (')[0].lower()}."
                if data["use"] == GOLD_USE_NONE:
                    done = f"{item.external_id} is no gold item of {question.key} any more."
    if not request.htmx:
        if done:
            messages.success(request, done)
            return redirect(reverse("recruitment:manage", args=[study.pk]) + "#gold-uses")
        recruitment = Recruitment.objects.filter(study=study).first()
        initial = model_to_dict(
            recruitment or Recruitment(study=study), RecruitmentForm.Meta.fields
        )
        return _manage_page(
            request,
            study,
            recruitment,
            form=RecruitmentForm(initial=initial),
            signal_form=GoldSignalForm(),
            gold_form=form,
        )
    if done:
        messages.success(request, done)  # shown out of band in the page's message area
        form = GoldUseForm(questions=gold_use_questions(study=study))
    context = _gold_uses(request, study, form) | {"gold_done": done}
    status = 422 if done == "" else 200
    return render(request, "recruitment/manage.html#gold_uses", context, status=status)


@login_required
@require_GET
def payments(request: HttpRequest, study_id: int) -> HttpResponse:
    """The payment file (CSV): id, items, minutes, code, gold accuracy, bonus eligibility."""
    study = managed_study(request, study_id)
    if not Recruitment.objects.filter(study=study).exists():
        raise Http404("This study has no recruitment link.")
    participants_release_expired(study=study)  # the file says who timed out
    return csv_download(payment_rows(study=study), filename=f"study-{study.pk}-payments.csv")
