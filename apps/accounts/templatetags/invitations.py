"""``{% invitations_for_me %}``: the invitations addressed to the signed-in user, to accept."""

from __future__ import annotations

from typing import Any

from django import template

from apps.accounts.selectors import invitations_for

register = template.Library()


@register.inclusion_tag("accounts/_invitations_for_me.html", takes_context=True)
def invitations_for_me(context: dict[str, Any]) -> dict[str, Any]:
    """Render the signed-in user's open invitations (nothing for anonymous visitors)."""
    user = context["request"].user
    return {"invitations": invitations_for(user=user) if user.is_authenticated else []}
