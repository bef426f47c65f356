"""Websocket origin check: the page that opens a dashboard socket must be this site's own.

Channels' ``AllowedHostsOriginValidator`` compares the ``Origin`` header's host with
``ALLOWED_HOSTS`` only, so ``Origin: http://localhost:9999`` (another port, another scheme:
another origin, which a browser keeps apart) was accepted. Here the origin must be the one the
socket was requested on, as Django's CSRF check requires of a POST: the same scheme (``http``
for ``ws``, ``https`` for ``wss``, or ``https`` when the TLS proxy says so), host and port as
the ``Host`` header, whose host is in ``ALLOWED_HOSTS``; or one of ``CSRF_TRUSTED_ORIGINS``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(scheme: str, netloc: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of ``scheme://netloc``, the default port filled in."""
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return None
    return (scheme, (parts.hostname or "").lower(), port) if port else None


def allowed_origin(scope: dict[str, Any]) -> bool:
    """Whether the websocket ``scope``'s ``Origin`` is the site's own (module docstring)."""
    headers = {
        name.decode("latin1").lower(): value.decode("latin1")
        for name, value in scope.get("headers", [])
    }
    origin_header = headers.get("origin")
    if not origin_header or origin_header == "null":
        return False
    sent = urlsplit(origin_header)
    origin = _origin(sent.scheme, sent.netloc)
    if origin is None:
        return False
    trusted = {
        _origin(urlsplit(o).scheme, urlsplit(o).netloc) for o in settings.CSRF_TRUSTED_ORIGINS
    }
    if origin in trusted:
        return True
    host = headers.get("host", "")
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    secure = scope.get("scheme") == "wss" or _forwarded_https(headers)
    return origin == _origin("https" if secure else "http", host)


def _forwarded_https(headers: dict[str, str]) -> bool:
    """The TLS proxy's word that the request came over HTTPS (``SECURE_PROXY_SSL_HEADER``)."""
    header = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if not header:
        return False
    name, value = header
    return headers.get(name.removeprefix("HTTP_").replace("_", "-").lower()) == value


class SameOriginValidator:
    """ASGI middleware: deny a websocket whose ``Origin`` is not the site's own."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not allowed_origin(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
