"""API token authentication: knox's, reading one row per request from SQL built once.

knox's ``TokenAuthentication`` sweeps every other token of the user on each request (one more
query per API call, on the annotator's hot path). Here a request reads only the token it
presents (with its user): an expired one is deleted and refused as before. The user's other
expired tokens are swept when a new token is made (:func:`apps.accounts.services.
api_tokens_sweep_expired`); until then they authenticate nobody and are listed nowhere.

That read is SQL built once (:mod:`core.compiled_queries`), not by the ORM on every request:
the last statement of an API answer the ORM built besides the revision's insert.
"""

from __future__ import annotations

import binascii
from hmac import compare_digest
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext as _
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.crypto import hash_token
from knox.models import AuthToken
from knox.settings import CONSTANTS, knox_settings
from knox.signals import token_expired
from rest_framework import exceptions

from core.compiled_queries import CompiledQuery

#: The tokens whose key (the first characters of the token) is the one presented.
_TOKENS = CompiledQuery(
    lambda key: AuthToken.objects.filter(token_key=key).select_related("user"), text=("key",)
)


class TokenAuthentication(KnoxTokenAuthentication):
    """``Authorization: Token <key>``: one query per request (the token with its user)."""

    def authenticate_credentials(self, token: bytes) -> tuple[Any, AuthToken]:
        """knox's check of the presented token (its digest compared in constant time), with
        the token's row read by :data:`_TOKENS`."""
        message = _("Invalid token.")
        try:
            presented = token.decode("utf-8")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed(message) from None
        for auth_token in _TOKENS.all(key=presented[: CONSTANTS.TOKEN_KEY_LENGTH]):
            if self._cleanup_token(auth_token):
                continue
            try:
                digest = hash_token(presented)
            except (TypeError, binascii.Error):
                raise exceptions.AuthenticationFailed(message) from None
            if compare_digest(digest, auth_token.digest):
                if knox_settings.AUTO_REFRESH and auth_token.expiry:
                    self.renew_token(auth_token)
                return self.validate_user(auth_token)
        raise exceptions.AuthenticationFailed(message)

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
