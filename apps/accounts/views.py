"""The annotators page of a study's managers, invitations, API tokens and the lockout page."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from apps.accounts.forms import (
    AccountForm,
    InvitationForm,
    JoinForm,
    MemberAddForm,
    TokenRevokeForm,
)
from apps.accounts.models import Invitation
from apps.accounts.selectors import api_tokens_for
from apps.accounts.services import (
    INVITED,
    annotator_create,
    api_tokens_revoke,
    invitation_accept,
    invitation_address,
    invitation_create,
    invitation_join,
    invitation_lookup,
    invitation_revoke,
    invitation_token_hash,
)
from apps.studies.access import managed_study
from apps.studies.models import Membership, Study
from apps.studies.selectors import study_role
from apps.studies.services import membership_remove
from core.auth import BACKEND
from core.forms import ServiceFormMixin, posted

ANNOTATOR_FORMS: dict[str, type[ServiceFormMixin]] = {
    "add": MemberAddForm,
    "create": AccountForm,
    "invite": InvitationForm,
}
# The session key holding the SHA-256 of the invitation link being opened (never the token).
INVITATION_SESSION_KEY = "invitation_token_hash"


def _annotator_add(request: HttpRequest, study: Study, form: MemberAddForm) -> bool:
    """Invite an existing account as annotator or reviewer; it joins when it accepts.

    The message is the same whether or not the username exists.
    """
    username = form.cleaned_data["username"]
    if form.apply(
        invitation_address,
        study=study,
        created_by=request.user,
        username=username,
        role=form.cleaned_data["role"],
    ):
        messages.success(request, f"{username}: {INVITED}")
    return not form.errors


def _annotator_create(request: HttpRequest, study: Study, form: AccountForm) -> bool:
    """Create an annotator account with the typed password."""
    user = form.apply(
        annotator_create,
        study=study,
        username=form.cleaned_data["username"],
        password=form.cleaned_data["password"],
    )
    if user:
        messages.success(
            request, f"Account {user.get_username()} created; give them its password to sign in."
        )
    return user is not None


def _invitation_link(request: HttpRequest, study: Study, form: InvitationForm) -> str | None:
    """Make a one-time invitation and return its full link (the token exists only now)."""
    made = form.apply(
        invitation_create,
        study=study,
        created_by=request.user,
        role=form.cleaned_data["role"],
        valid_days=form.cleaned_data["valid_days"],
    )
    if made is None:
        return None
    return request.build_absolute_uri(reverse("accounts:invitation", args=[made[1]]))


@login_required
@require_http_methods(["GET", "POST"])
def annotators(request: HttpRequest, study_id: int) -> HttpResponse:
    """Members of a study; invite existing users, create annotator accounts, make invitation links.

    Inviting and creating redirect back here (POST/redirect/GET). A new invitation link is shown
    in the response itself, once: only its hash is stored. With htmx, the invitation form
    gets just its own section back.
    """
    study = managed_study(request, study_id)
    forms = {name: form_class(prefix=name) for name, form_class in ANNOTATOR_FORMS.items()}
    invitation_link = None
    if request.method == "POST":
        name = request.POST.get("form")
        if name not in ANNOTATOR_FORMS:
            return HttpResponseBadRequest("Unknown form.")
        form = forms[name] = ANNOTATOR_FORMS[name](request.POST, prefix=name)
        if form.is_valid():
            if name == "invite":
                invitation_link = _invitation_link(request, study, form)
            elif (_annotator_add if name == "add" else _annotator_create)(request, study, form):
                return redirect("accounts:annotators", study.pk)
        if invitation_link:
            forms[name] = InvitationForm(prefix=name)
    context = {
        "study": study,
        "forms": forms,
        "invitation_link": invitation_link,
        "memberships": study.memberships.select_related("user"),
        "invitations": study.invitations.select_related("used_by")[:20],
    }
    status = max(form.http_status for form in forms.values())
    template = "accounts/annotators.html#invitation" if request.htmx else "accounts/annotators.html"
    return render(request, template, context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def member_remove(request: HttpRequest, study_id: int, user_id: int) -> HttpResponse:
    """Confirm, then take a member out of the study (POST). Their answers stay, attributed to
    them; they lose access at once. A refused removal (yourself, the last manager) is a 400."""
    study = managed_study(request, study_id)
    membership = get_object_or_404(
        Membership.objects.select_related("user"), study=study, user_id=user_id
    )
    member = membership.user
    errors: list[str] = []
    if request.method == "POST":
        try:
            withdrawn = membership_remove(study=study, user=member, by=request.user)
        except ValidationError as exc:
            errors = exc.messages
        else:
            text = f"{member.get_username()} is no longer a member; their answers stay."
            if withdrawn:
                text += f" {withdrawn} unanswered assignment{pluralize(withdrawn)} withdrawn."
            messages.success(request, text)
            return redirect("accounts:annotators", study.pk)
    context = {
        "study": study,
        "membership": membership,
        "answers": member.annotations.filter(question__study=study).count(),
        "errors": errors,
    }
    return render(request, "accounts/member_remove.html", context, status=400 if errors else 200)


@login_required
@require_POST
def invitation_revoke_view(request: HttpRequest, study_id: int, invitation_id: int) -> HttpResponse:
    """Withdraw a pending invitation; its link then says it was revoked."""
    study = managed_study(request, study_id)
    try:
        invitation_revoke(study=study, invitation_id=invitation_id, by=request.user)
    except ValidationError as exc:
        return HttpResponseBadRequest(" ".join(exc.messages))
    messages.success(request, "Invitation revoked: its link no longer works.")
    return redirect("accounts:annotators", study.pk)


def _invitation_unusable(request: HttpRequest, error: ValidationError) -> HttpResponse:
    """The page of a link that cannot be used: 410 once revoked, else 404."""
    revoked = error.code == "revoked"
    context = {"revoked": revoked}
    return render(
        request, "accounts/invitation_invalid.html", context, status=410 if revoked else 404
    )


@require_http_methods(["GET"])
def invitation(request: HttpRequest, token: str) -> HttpResponse:
    """Open a one-time invitation link: keep its hash in the session, go to a clean URL.

    The token thus appears in one request only; the page that follows, its forms and its
    sign-in link (``?next=``) carry no token, so it reaches neither access logs nor referrers.
    """
    token_hash = invitation_token_hash(token)
    try:
        invitation_lookup(token_hash=token_hash)
    except ValidationError as error:
        return _invitation_unusable(request, error)
    request.session[INVITATION_SESSION_KEY] = token_hash
    return redirect("accounts:invitation_accept")


@require_http_methods(["GET", "POST"])
def invitation_accept_page(request: HttpRequest) -> HttpResponse:
    """The invitation opened in this session: join as the signed-in user, or sign up, then start."""
    token_hash = request.session.get(INVITATION_SESSION_KEY, "")
    try:
        invite = invitation_lookup(token_hash=token_hash)
    except ValidationError as error:
        return _invitation_unusable(request, error)
    role = study_role(user=request.user, study=invite.study)
    signed_in = request.user.is_authenticated
    form = (JoinForm if signed_in else AccountForm)(posted(request))
    if role is None and form.is_valid():
        account = (
            {"user": request.user}
            if signed_in
            else {
                "username": form.cleaned_data["username"],
                "password": form.cleaned_data["password"],
            }
        )
        user = form.apply(invitation_accept, token_hash=token_hash, **account)
        if user is not None:
            request.session.pop(INVITATION_SESSION_KEY, None)
            if not signed_in:
                login(request, user, backend=BACKEND)
            messages.success(request, f"Welcome to {invite.study.name}!")
            return _study_start(invite)
    context = {"invitation": invite, "form": form, "role": role}
    return render(request, "accounts/invitation.html", context, status=form.http_status)


def _study_start(invite: Invitation) -> HttpResponse:
    """Where a new member starts: annotators in their queue, managers on the overview,
    reviewers on their home page (its adjudication links)."""
    if invite.role == Membership.Role.ANNOTATOR:
        return redirect("annotations:queue", invite.study.pk)
    if invite.role == Membership.Role.REVIEWER:
        return redirect("studies:home")
    return redirect("studies:overview", invite.study.pk)


@login_required
@require_POST
def invitation_join_view(request: HttpRequest, invitation_id: int) -> HttpResponse:
    """Accept an invitation addressed to the signed-in user (listed on their home page)."""
    try:
        invite = invitation_join(invitation_id=invitation_id, user=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
        return redirect("studies:home")
    messages.success(request, f"Welcome to {invite.study.name}!")
    return _study_start(invite)


@login_required
@require_http_methods(["GET", "POST"])
def api_tokens(request: HttpRequest) -> HttpResponse:
    """The signed-in user's API tokens (key, made, expires); revoke one or all."""
    if request.method == "POST":
        form = TokenRevokeForm(request.POST)
        if not form.is_valid() or not (form.cleaned_data["all"] or form.cleaned_data["key"]):
            return HttpResponseBadRequest("Say which token to revoke.")
        keys = None if form.cleaned_data["all"] else [form.cleaned_data["key"]]
        revoked = api_tokens_revoke(user=request.user, keys=keys)
        messages.success(request, f"{revoked} token{'' if revoked == 1 else 's'} revoked.")
        return redirect("accounts:api_tokens")
    context = {"tokens": api_tokens_for(user=request.user), "ttl": settings.REST_KNOX["TOKEN_TTL"]}
    return render(request, "accounts/api_tokens.html", context)


def locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict[str, Any]
) -> HttpResponse:
    """django-axes' lockout response: 429 with ``Retry-After``; JSON for the API, else a page."""
    cool_off = settings.AXES_COOLOFF_TIME
    minutes = int(cool_off.total_seconds() // 60)
    message = (
        "Too many failed sign-ins from this address or for this account. Signing in is "
        f"blocked for {minutes} minutes after the last failed attempt; please wait and "
        "try again."
    )
    if request.path.startswith(reverse("api-root")):
        response: HttpResponse = JsonResponse({"detail": message}, status=429)
    else:
        response = render(request, "accounts/locked_out.html", {"message": message}, status=429)
    response["Retry-After"] = str(int(cool_off.total_seconds()))
    return response
