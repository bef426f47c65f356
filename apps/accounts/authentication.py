"""API token authentication: knox's, reading one row per request.

knox's ``TokenAuthentication`` sweeps every other token of the user on each request (one more
query per API call, on the annotator's hot path). Here a request reads only the token it
presents (with its user): an expired one is deleted and refused as before. The user's other
expired tokens are swept when a new token is made (:func:`apps.accounts.services.
api_tokens_sweep_expired`); until then they authenticate nobody and are listed nowhere.
"""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.models import AuthToken
from knox.signals import token_expired


class TokenAuthentication(KnoxTokenAuthentication):
    """``Authorization: Token <key>``: one query per request (the token with its user)."""

    def _cleanup_token(self, auth_token: AuthToken) -> bool:
        """Delete ``auth_token`` and return ``True`` if it has expired."""
        if auth_token.expiry is None or auth_token.expiry >= timezone.now():
            return False
        username = auth_token.user.get_username()
        auth_token.delete()
        token_expired.send(sender=self.__class__, username=username, source="auth_token")
        return True


class TokenScheme(KnoxTokenScheme):
    """The OpenAPI security scheme of :class:`TokenAuthentication`: knox's, as before."""

    target_class = "apps.accounts.authentication.TokenAuthentication"
