"""Schemathesis against the API's own OpenAPI schema: no server error, every response as documented.

Every operation of ``/api/schema/`` gets generated requests (valid and invalid bodies, query
strings and path parameters), sent in-process to the WSGI application with a manager's, with
an annotator's and with no API token over a seeded study (categorical, pairwise and continuous
questions, items, answers). Two checks: ``not_a_server_error`` (no 5xx) and
``response_schema_conformance`` (the body matches the schema of its status code).

Bounded: ``API_FUZZ_EXAMPLES`` generated requests per operation, each sent with both tokens
(default 20: about two and a half minutes in all); ``API_FUZZ_COVERAGE=1`` adds schemathesis'
boundary-value phase (several minutes more). PostgreSQL pass only (``postgres`` marker): the
database the server runs on in production. Each request runs in a savepoint rolled back after
it: every request meets the seeded data, and a request that broke the transaction cannot poison
the next one.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections, transaction
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from knox.models import AuthToken
from schemathesis.checks import not_a_server_error, response_schema_conformance
from schemathesis.config import SchemathesisConfig

from apps.annotations.models import Assignment
from apps.annotations.services import annotations_submit
from apps.studies.models import Question
from apps.studies.services import question_create
from tests.factories import running_study

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

EXAMPLES = int(os.environ.get("API_FUZZ_EXAMPLES", "20"))
# Operations that end the very session the fuzzer uses (its token would be revoked).
SESSION_ENDING = r"^/api/auth/(logout|logoutall|tokens/\{key\})/$"


def _api_schema() -> schemathesis.openapi.OpenApiSchema:
    """The schema ``/api/schema/`` serves, sent to the WSGI application in-process."""
    document = json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(public=True)))
    config = SchemathesisConfig.from_dict(
        {"phases": {"coverage": {"enabled": os.environ.get("API_FUZZ_COVERAGE", "0") == "1"}}}
    )
    loaded = schemathesis.openapi.from_dict(document, config=config)
    loaded = loaded.exclude(path_regex=SESSION_ENDING)
    loaded.app = WSGIHandler()
    return loaded


schema = _api_schema()


@pytest.fixture(autouse=True)
def _keep_the_test_connection():
    """Requests keep the test's database connection (and its transaction), as Django's own
    test client arranges: a finished request would otherwise close it."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@dataclass
class Seeded:
    study_pk: int
    tokens: dict[str, str]


@pytest.fixture
def seeded() -> Seeded:
    """A running study: a categorical, a pairwise and a continuous question, answers."""
    study, annotators = running_study(n_items=6, n_annotators=2)
    question_create(study=study, key="fluency", prompt="Which?", kind=Question.Kind.PAIRWISE)
    question_create(study=study, key="arousal", prompt="How?", kind=Question.Kind.CONTINUOUS)
    sentiment = study.questions.get(key="sentiment")
    for assignment in Assignment.objects.filter(annotator=annotators[0])[:3]:
        annotations_submit(
            annotator=annotators[0],
            assignment=assignment,
            answers={sentiment: "positive"},
            idempotency_key=uuid.uuid4(),
        )
    tokens = {
        "manager": AuthToken.objects.create(user=study.created_by)[1],
        "annotator": AuthToken.objects.create(user=annotators[1])[1],
        "anonymous": "",
    }
    return Seeded(study.pk, tokens)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_api_answers_as_documented(case, seeded):
    if "study_pk" in (case.path_parameters or {}):
        case.path_parameters["study_pk"] = seeded.study_pk  # a real study, not a random 404
    for token in seeded.tokens.values():  # the manager's, the annotator's, then none
        before = transaction.savepoint()
        try:
            response = case.call(headers={"Authorization": f"Token {token}"} if token else {})
        finally:
            transaction.savepoint_rollback(before)  # every request meets the seeded data
        case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])
