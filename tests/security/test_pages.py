"""Pages and the API docs: the Content-Security-Policy, no third-party scripts, password rules."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.password_validation import validate_password
from django.contrib.staticfiles import finders
from django.core.exceptions import ValidationError

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

ADDRESS = re.compile(r'(?:src|href)="([^"]+)"')


def policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {
        name: values
        for name, *values in (directive.split() for directive in header.split(";") if directive)
    }


def test_pages_carry_a_policy_without_inline_script_style_or_eval(client):
    client.force_login(UserFactory())
    directives = policy(client.get("/"))
    assert directives["default-src"] == ["'self'"]
    assert directives["script-src"] == ["'self'"]
    assert directives["style-src"] == ["'self'"]
    assert directives["connect-src"] == ["'self'"]
    assert directives["object-src"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"]
    assert "'self'" in directives["media-src"]
    assert "'self'" in directives["img-src"]
    assert not any("unsafe" in value for values in directives.values() for value in values)
    assert "Content-Security-Policy" in client.get("/api/schema/")


def test_api_docs_load_swagger_ui_from_this_origin_only(client):
    client.force_login(UserFactory())
    response = client.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    addresses = ADDRESS.findall(html)
    assert any("swagger-ui-bundle.js" in address for address in addresses)
    assert not [address for address in addresses if re.match(r"(?:https?:)?//", address)]
    assert "<style" not in html
    assert not re.search(r"<script>|<script\s+(?![^>]*\bsrc=)", html)  # no inline scripts
    for address in addresses:
        if address.startswith("/static/"):
            assert finders.find(address.removeprefix("/static/")), address
    script = next(address for address in addresses if "script=" in address)
    start = client.get(script.replace("&amp;", "&"))
    assert start.status_code == 200
    assert start["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle(" in start.content.decode()


def test_all_digit_passwords_are_refused():
    with pytest.raises(ValidationError, match="entirely numeric"):
        validate_password("73920518462")
    validate_password("calm-harbour-tiles")
