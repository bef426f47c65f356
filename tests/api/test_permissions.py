"""Who may call what: every endpoint and method x anonymous, outsider, annotator, manager.

The outsider manages a study of their own and has the ``manage_studies`` permission, so every
refusal below is about *this* study, not about being a lesser user. Another study's objects
answer 404 (their existence is never revealed); a member lacking the role answers 403; an
anonymous caller answers 401 with a ``WWW-Authenticate`` challenge.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from apps.annotations.models import Annotation
from apps.annotations.selectors import assignment_next
from apps.annotations.services import annotations_submit
from tests.api.helpers import ClientFor
from tests.factories import PASSWORD, StudyFactory, UserFactory, running_study

ROLES = ("anonymous", "outsider", "annotator", "manager")


@dataclass
class World:
    study: int
    question: int
    item: int
    annotation: int
    open_assignment: int
    newcomer: str
    users: dict[str, Any]


@pytest.fixture(scope="module")
def world_data(module_db) -> World:
    """:func:`world`, made once for the module's few hundred requests."""
    study, (annotator, *_) = running_study()
    outsider = UserFactory(manager=True)
    StudyFactory(created_by=outsider)
    question = study.questions.get()
    done = assignment_next(annotator=annotator, study=study)
    annotations_submit(
        annotator=annotator,
        assignment=done,
        answers={question: "neutral"},
        idempotency_key=uuid.uuid4(),
    )
    return World(
        study=study.pk,
        question=question.pk,
        item=done.item_id,
        annotation=Annotation.objects.get().pk,
        open_assignment=assignment_next(annotator=annotator, study=study).pk,
        newcomer=UserFactory().username,
        users={
            "anonymous": None,
            "outsider": outsider,
            "annotator": annotator,
            "manager": study.created_by,
        },
    )


@pytest.fixture
def world(db, world_data: World) -> World:
    """A running study (one answer given) and an outsider who manages a study of their own;
    what a test writes is rolled back after it (``module_db``)."""
    return world_data


Body = Callable[[World], Any] | None
S = "/api/studies/{study}"

# (method, path, body, expected status for anonymous, outsider, annotator, manager)
MATRIX: list[tuple[str, str, Body, tuple[int, int, int, int]]] = [
    ("get", "/api/studies/", None, (401, 200, 200, 200)),
    ("post", "/api/studies/", lambda w: {"name": "New"}, (401, 201, 403, 201)),
    ("get", S + "/", None, (401, 404, 200, 200)),
    ("patch", S + "/", lambda w: {"name": "Renamed"}, (401, 404, 403, 200)),
    ("put", S + "/", lambda w: {"name": "Renamed"}, (401, 405, 405, 405)),
    ("delete", S + "/", None, (401, 405, 405, 405)),
    ("post", S + "/status/", lambda w: {"status": "running"}, (401, 404, 403, 200)),
    ("get", S + "/questions/", None, (401, 404, 200, 200)),
    (
        "post",
        S + "/questions/",
        lambda w: {"key": "mood", "prompt": "Mood?", "labels": [{"key": "up"}, {"key": "down"}]},
        (401, 404, 403, 201),
    ),
    ("get", S + "/questions/{question}/", None, (401, 404, 200, 200)),
    ("patch", S + "/questions/{question}/", lambda w: {"prompt": "?"}, (401, 404, 403, 200)),
    ("delete", S + "/questions/{question}/", None, (401, 404, 403, 405)),
    ("get", S + "/items/", None, (401, 404, 200, 200)),
    ("get", S + "/items/{item}/", None, (401, 404, 200, 200)),
    (
        "post",
        S + "/items/bulk/",
        lambda w: [{"external_id": "new-1", "text": "Hello."}],
        (401, 404, 403, 200),
    ),
    ("get", S + "/memberships/", None, (401, 404, 403, 200)),
    ("post", S + "/memberships/", lambda w: {"username": w.newcomer}, (401, 404, 403, 202)),
    (
        "post",
        S + "/memberships/new-annotator/",
        lambda w: {"username": "fresh-annotator", "password": PASSWORD},
        (401, 404, 403, 201),
    ),
    ("post", S + "/invitations/", lambda w: {}, (401, 404, 403, 201)),
    ("get", S + "/next/", None, (401, 404, 200, 403)),
    ("post", S + "/skip/", lambda w: {"assignment": w.open_assignment}, (401, 404, 200, 403)),
    ("post", S + "/undo/", lambda w: {"idempotency_key": str(uuid.uuid4())}, (401, 404, 200, 403)),
    ("get", S + "/export/", None, (401, 404, 403, 200)),
    ("get", "/api/annotations/", None, (401, 200, 200, 200)),
    (
        "post",
        "/api/annotations/",
        lambda w: {
            "assignment": w.open_assignment,
            "answers": {"sentiment": "positive"},
            "idempotency_key": str(uuid.uuid4()),
        },
        # Someone else's assignment is an invalid reference (400), whoever asks.
        (401, 400, 201, 400),
    ),
    ("get", "/api/annotations/{annotation}/", None, (401, 404, 200, 200)),
    ("delete", "/api/annotations/{annotation}/", None, (401, 405, 405, 405)),
    ("get", "/api/annotations/{annotation}/revisions/", None, (401, 404, 200, 200)),
]

CASES = [
    pytest.param(method, path, body, role, codes[i], id=f"{method.upper()} {path} as {role}")
    for method, path, body, codes in MATRIX
    for i, role in enumerate(ROLES)
]


@pytest.mark.parametrize(("method", "path", "body", "role", "expected"), CASES)
def test_permission_matrix(
    world: World,
    client_for: ClientFor,
    method: str,
    path: str,
    body: Body,
    role: str,
    expected: int,
) -> None:
    client = client_for(world.users[role])
    url = path.format(**vars(world))
    data = body(world) if body else None
    response = getattr(client, method)(url, data, format="json")
    assert response.status_code == expected, getattr(response, "data", response)
    if expected == 401:
        assert response["WWW-Authenticate"] == "Token"


OPTIONS_CASES = [
    pytest.param(path, role, id=f"OPTIONS {path} as {role}")
    for method, path, _, codes in MATRIX
    if method == "post"
    for i, role in enumerate(ROLES)
    if 200 <= codes[i] < 300 and role != "outsider"
]


@pytest.mark.parametrize(("path", "role"), OPTIONS_CASES)
def test_options_describes_what_may_be_posted(
    world: World, client_for: ClientFor, path: str, role: str
) -> None:
    response = client_for(world.users[role]).options(path.format(**vars(world)))
    assert response.status_code == 200
    assert "POST" in response.data["actions"]
