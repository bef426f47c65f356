"""Names for type annotations shared by the apps (mypy checks services and selectors in CI).

``Account`` is the user model: to mypy the model ``settings.AUTH_USER_MODEL`` names (Django's
own ``User``), so django-stubs can check lookups such as ``filter(annotator=user)``; at run
time the abstract base every user model has. ``Visitor`` is whoever makes a request; the
request classes below type views' ``request`` argument.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest

if TYPE_CHECKING:
    from django.contrib.auth.models import User as Account
    from django_htmx.middleware import HtmxDetails
else:
    from django.contrib.auth.base_user import AbstractBaseUser as Account

Visitor: TypeAlias = "Account | AnonymousUser"


class HtmxHttpRequest(HttpRequest):
    """A request through django-htmx's middleware, which sets ``request.htmx`` (the typing
    recipe of the django-htmx docs)."""

    htmx: HtmxDetails


class SignedInHtmxRequest(HtmxHttpRequest):
    """A request to a ``login_required`` view: ``request.user`` is an account, never anonymous
    (django-stubs' recipe for authenticated requests)."""

    user: Account


__all__ = ["Account", "HtmxHttpRequest", "SignedInHtmxRequest", "Visitor"]
