"""The annotators page of a study's managers, and one-time invitation links."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from apps.accounts.forms import AccountForm, InvitationForm, JoinForm, MemberAddForm
from apps.accounts.services import (
    annotator_create,
    invitation_accept,
    invitation_create,
    invitation_lookup,
)
from apps.studies.forms import ServiceFormMixin, posted
from apps.studies.models import Membership, Study
from apps.studies.selectors import studies_managed_by, study_role
from apps.studies.services import membership_add

ANNOTATOR_FORMS: dict[str, type[ServiceFormMixin]] = {
    "add": MemberAddForm,
    "create": AccountForm,
    "invite": InvitationForm,
}


def _annotator_add(request: HttpRequest, study: Study, form: MemberAddForm) -> bool:
    """Add an existing account as annotator, unless it already has a role in the study."""
    user = form.cleaned_data["username"]
    role = study_role(user=user, study=study)
    if role is not None:
        form.add_error("username", f"{user.get_username()} is already a {role} of this study.")
        return False
    if form.apply(membership_add, study=study, user=user, role=Membership.Role.ANNOTATOR):
        messages.success(request, f"{user.get_username()} is now an annotator of this study.")
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
        valid_days=form.cleaned_data["valid_days"],
    )
    if made is None:
        return None
    return request.build_absolute_uri(reverse("accounts:invitation", args=[made[1]]))


@login_required
@require_http_methods(["GET", "POST"])
def annotators(request: HttpRequest, study_id: int) -> HttpResponse:
    """Members of a study; add existing users, create annotator accounts, make invitation links.

    Adding and creating redirect back here (POST/redirect/GET). A new invitation link is shown
    in the response itself, once: only its hash is stored. With htmx, the invitation form
    gets just its own section back.
    """
    study = get_object_or_404(studies_managed_by(user=request.user), pk=study_id)
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


@require_http_methods(["GET", "POST"])
def invitation(request: HttpRequest, token: str) -> HttpResponse:
    """Open a one-time invitation: join as the signed-in user, or sign up, then start."""
    try:
        invite = invitation_lookup(token=token)
    except ValidationError:
        return render(request, "accounts/invitation_invalid.html", status=404)
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
        user = form.apply(invitation_accept, token=token, **account)
        if user is not None:
            if not signed_in:
                login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(request, f"Welcome to {invite.study.name}!")
            if invite.role == Membership.Role.ANNOTATOR:
                return redirect("annotations:queue", invite.study.pk)
            return redirect("studies:overview", invite.study.pk)
    context = {"invitation": invite, "form": form, "role": role}
    return render(request, "accounts/invitation.html", context, status=form.http_status)
