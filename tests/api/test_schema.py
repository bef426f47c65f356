"""The OpenAPI schema validates without a single warning, and its pages are served."""

from __future__ import annotations

from pathlib import Path

import yaml
from django.core.management import call_command
from rest_framework.test import APIClient

from tests.factories import UserFactory


def test_schema_validates_without_warnings(tmp_path: Path) -> None:
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    paths = yaml.safe_load(out.read_text())["paths"]
    assert {"/api/annotations/", "/api/studies/{study_pk}/next/"} <= set(paths)
    submit = paths["/api/annotations/"]["post"]["responses"]
    assert {"200", "201", "400"} <= set(submit)
    assert set(paths["/api/studies/{study_pk}/next/"]["get"]["responses"]) == {"200", "204"}


def test_schema_and_docs_pages_render(db) -> None:
    client = APIClient()
    assert client.get("/api/schema/").status_code == 401  # signed-in users only
    docs = client.get("/api/docs/")
    assert docs.status_code == 302
    assert docs["Location"].startswith("/accounts/login/")
    client.force_login(UserFactory())
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert schema["Content-Type"].startswith("application/vnd.oai.openapi")
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content
    start = client.get("/api/docs/?script=")  # Swagger UI's start-up script, a file (CSP)
    assert b"/api/schema/" in start.content
