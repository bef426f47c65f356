"""Every page of a study x every kind of visitor: the one policy of apps/studies/access.py.

Anonymous visitors are sent to sign in; non-members get 404 (the study does not exist for
them); members whose role does not fit get 403; the right role gets the page. The API answers
the same way (tests/api/test_permissions.py). A new study page fails
:func:`test_every_study_page_is_in_the_table` until it is added to :data:`PAGES`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from analytics.models import Flag
from apps.accounts.services import invitation_create
from apps.annotations.models import Assignment
from apps.items.models import Item
from apps.models_registry.models import ModelRun
from apps.models_registry.services import Upload
from apps.studies.models import Membership, Question, Study
from apps.studies.services import membership_add, question_create
from tests.apps.models_registry.simulation import (
    jsonl,
    prediction_rows,
    register_and_evaluate,
    simulated_study,
)
from tests.factories import UserFactory, running_study

pytestmark = pytest.mark.django_db

MANAGERS, ANNOTATORS, MEMBERS = "managers", "annotators", "members"
ADJUDICATORS = "adjudicators"  # managers and reviewers
VISITORS = ("anonymous", "non-member", "annotator", "reviewer", "manager")
# Study pages with a policy of their own, not the members' one tested here.
OWN_POLICY_NAMESPACES = frozenset({"recruitment"})


@dataclass
class Site:
    """A running study with a question of each kind, an answered item, a flag and a model run."""

    study: Study
    annotator: Any
    reviewer: Any
    assignment: Assignment
    item: Item
    flag: Flag
    run: ModelRun


@dataclass(frozen=True)
class Page:
    """Who may use a page, how to call it, and what the right visitor gets."""

    who: str
    kwargs: Callable[[Site], dict[str, Any]]
    method: str = "get"
    data: dict[str, str] | None = None
    ok: int = 200


def _study(site: Site) -> dict[str, Any]:
    return {"study_id": site.study.pk}


def _with(**extra: Callable[[Site], Any]) -> Callable[[Site], dict[str, Any]]:
    return lambda site: {**_study(site), **{key: get(site) for key, get in extra.items()}}


PAGES: dict[str, Page] = {
    "studies:overview": Page(MANAGERS, _study),
    "studies:edit": Page(MANAGERS, _study),
    "studies:status": Page(MANAGERS, _study, "post", {"status": "running"}, ok=302),
    "studies:question_create": Page(MANAGERS, _study),
    "studies:question_edit": Page(
        MANAGERS, _with(question_id=lambda s: s.study.questions.get(key="sentiment").pk)
    ),
    "annotations:queue": Page(ANNOTATORS, _study),
    "annotations:export": Page(MANAGERS, _with(fmt=lambda s: "csv")),
    "annotations:export_curated": Page(MANAGERS, _with(fmt=lambda s: "csv")),
    "annotations:export_provenance": Page(MANAGERS, _study),
    "annotations:export_huggingface": Page(MANAGERS, _study),
    "preferences:compare": Page(ANNOTATORS, _with(question_key=lambda s: "pair")),
    "preferences:undo": Page(  # no judgement to undo: the form says so
        ANNOTATORS, _with(question_key=lambda s: "pair"), "post", ok=422
    ),
    "preferences:results": Page(MANAGERS, _with(question_key=lambda s: "pair")),
    "preferences:scores_csv": Page(MANAGERS, _with(question_key=lambda s: "pair")),
    "preferences:judgements_csv": Page(MANAGERS, _with(question_key=lambda s: "pair")),
    "preferences:scores_file": Page(
        MANAGERS, _with(question_key=lambda s: "pair", fmt=lambda s: "jsonl")
    ),
    "preferences:judgements_file": Page(
        MANAGERS, _with(question_key=lambda s: "pair", fmt=lambda s: "jsonl")
    ),
    "preferences:preferences_file": Page(
        MANAGERS, _with(question_key=lambda s: "pair", fmt=lambda s: "parquet")
    ),
    "arena:arena": Page(ANNOTATORS, _with(question_key=lambda s: "arena")),
    "arena:results": Page(MANAGERS, _with(question_key=lambda s: "arena")),
    "arena:preferences_file": Page(
        MANAGERS, _with(question_key=lambda s: "arena", fmt=lambda s: "jsonl")
    ),
    "continuous:traces": Page(MANAGERS, _with(question_key=lambda s: "trace")),
    "continuous:record_next": Page(ANNOTATORS, _with(question_key=lambda s: "trace")),
    "continuous:record": Page(
        ANNOTATORS,
        _with(question_key=lambda s: "trace", assignment_id=lambda s: s.assignment.pk),
    ),
    "items:import": Page(MANAGERS, _study),
    "items:list": Page(MANAGERS, _study),
    "items:detail": Page(MANAGERS, _with(item_id=lambda s: s.item.pk)),
    "items:media": Page(
        MEMBERS, _with(item_id=lambda s: s.item.pk, name=lambda s: s.item.media.name.split("/")[-1])
    ),
    "accounts:annotators": Page(MANAGERS, _study),
    "accounts:member_remove": Page(MANAGERS, _with(user_id=lambda s: s.annotator.pk)),
    "accounts:invitation_revoke": Page(
        MANAGERS,
        _with(
            invitation_id=lambda s: (
                invitation_create(study=s.study, created_by=s.study.created_by)[0].pk
            )
        ),
        "post",
        ok=302,
    ),
    "analytics:dashboard": Page(MANAGERS, _study),
    "analytics:flag_review": Page(
        MANAGERS, _with(flag_id=lambda s: s.flag.pk), "post", {"action": "dismiss"}, ok=302
    ),
    "analytics:annotator_exclusion": Page(
        MANAGERS,
        _with(user_id=lambda s: s.annotator.pk),
        "post",
        {"action": "exclude", "reason": "answers at random"},
        ok=302,
    ),
    "analytics:competence": Page(
        MANAGERS,
        _with(question_id=lambda s: s.study.questions.get(key="sentiment").pk),
        "post",
        ok=302,
    ),
    "models_registry:leaderboard": Page(MANAGERS, _with(question_key=lambda s: "sentiment")),
    "models_registry:run": Page(MANAGERS, _with(run_id=lambda s: s.run.pk)),
    "models_registry:run_delete": Page(MANAGERS, _with(run_id=lambda s: s.run.pk)),
    "models_registry:upload": Page(  # no file: the form says so
        MANAGERS, _with(question_key=lambda s: "sentiment"), "post", {"name": "x"}, ok=422
    ),
    "models_registry:endpoint": Page(  # no URL: the form says so
        MANAGERS, _with(question_key=lambda s: "sentiment"), "post", {"model": "m"}, ok=422
    ),
    "models_registry:endpoint_predict": Page(  # no endpoint yet: back to the page, which says so
        MANAGERS, _with(question_key=lambda s: "sentiment"), "post", ok=302
    ),
    "models_registry:compare": Page(  # one run only: back to the leaderboard to tick two
        MANAGERS, _with(question_key=lambda s: "sentiment"), ok=302
    ),
    "adjudication:page": Page(ADJUDICATORS, _with(question_key=lambda s: "sentiment")),
    "adjudication:overlap": Page(
        MANAGERS,
        _with(question_key=lambda s: "sentiment"),
        "post",
        {"base_k": "2", "k_max": "3", "threshold": "0.5"},
        ok=302,
    ),
    "adjudication:predicted_overlap": Page(
        MANAGERS,
        _with(question_key=lambda s: "sentiment"),
        "post",
        {"threshold": "0.5", "k": "3"},
        ok=302,
    ),
    "adjudication:export": Page(MANAGERS, _with(fmt=lambda s: "csv")),
    "adjudication:export_provenance": Page(MANAGERS, _study),
}
ALLOWED = {
    MANAGERS: {"manager"},
    ANNOTATORS: {"annotator"},
    MEMBERS: {"manager", "annotator", "reviewer"},
    ADJUDICATORS: {"manager", "reviewer"},
}


def expected_status(page: Page, visitor: str) -> int:
    """The policy: sign in first, then 404 for non-members, 403 for the wrong role."""
    if visitor in ALLOWED[page.who]:
        return page.ok
    if visitor == "anonymous":
        return 404 if page.who == MEMBERS else 302  # a stimulus answers like any unknown file
    return 404 if visitor == "non-member" else 403


def _patterns(patterns: list, namespace: str = "") -> Iterator[tuple[str, str]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _patterns(pattern.url_patterns, pattern.namespace or namespace)
        elif isinstance(pattern, URLPattern) and pattern.name and namespace:
            yield f"{namespace}:{pattern.name}", str(pattern.pattern)


def test_every_study_page_is_in_the_table():
    pages = {
        name
        for name, route in _patterns(get_resolver().url_patterns)
        if "study_id" in route and name.split(":")[0] not in OWN_POLICY_NAMESPACES
    }
    assert pages == set(PAGES)


@pytest.fixture(scope="module")
def site_data(module_db, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The study every page is asked about, made once for the module's 300-odd requests (made
    per test, it cost 5 of the module's 6 minutes on PostgreSQL)."""
    with override_settings(MEDIA_ROOT=tmp_path_factory.mktemp("media")):
        yield _site()


@pytest.fixture
def site(db, site_data: Site) -> Site:
    """:func:`site_data`; what a test writes is rolled back after it (``module_db``)."""
    return site_data


def _site() -> Site:
    sim = simulated_study(n_items=12)
    study = sim.study
    question_create(study=study, key="trace", prompt="How intense?", kind=Question.Kind.CONTINUOUS)
    question_create(study=study, key="pair", prompt="Which reads better?", kind="pairwise")
    question_create(study=study, key="arena", prompt="Which answer is better?", kind="arena")
    annotator = study.memberships.get(user__username=sim.usernames[0]).user
    assignment = Assignment.objects.filter(study=study, annotator=annotator).first()
    item = assignment.item
    item.kind = Item.Kind.IMAGE
    item.media.save("x.png", ContentFile(b"\x89PNG\r\n\x1a\n fake"))
    flag = Flag.objects.create(
        study=study,
        question=sim.question,
        annotator=annotator,
        indicator="kappa",
        reason="far from the others",
    )
    run = register_and_evaluate(
        study=study,
        question=sim.question,
        name="oracle",
        version="1",
        created_by=study.created_by,
        predictions=Upload(jsonl(prediction_rows(sim, sim.ratings)), "jsonl"),
    )
    reviewer = UserFactory()
    membership_add(study=study, user=reviewer, role=Membership.Role.REVIEWER)
    return Site(study, annotator, reviewer, assignment, item, flag, run)


@pytest.mark.parametrize("visitor", VISITORS)
@pytest.mark.parametrize("name", sorted(PAGES))
def test_page_answers_each_visitor_by_the_policy(client: Client, site: Site, name, visitor):
    page = PAGES[name]
    user = {
        "anonymous": None,
        "non-member": UserFactory(manager=True),
        "annotator": site.annotator,
        "reviewer": site.reviewer,
        "manager": site.study.created_by,
    }[visitor]
    if user is not None:
        client.force_login(user)
    url = reverse(name, kwargs=page.kwargs(site))
    response = getattr(client, page.method)(url, page.data or {})
    assert response.status_code == expected_status(page, visitor), url
    if response.status_code == 302 and visitor == "anonymous":
        assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("study_id", ["%C2%B2", "0", str(2**63), "007x"])
def test_a_study_id_that_names_no_study_answers_404_on_the_api(study_id):
    """The API's router passes the URL's segment as a string; a superscript digit or a number
    beyond a BIGINT names no study (the study is read with SQL built once for int ids)."""
    study, (annotator, *_) = running_study(n_items=1, n_annotators=1)
    client = Client()
    client.force_login(annotator)
    assert client.get(f"/api/studies/{study_id}/next/").status_code == 404
    assert client.get(f"/api/studies/{study.pk}/next/").status_code == 200


def test_a_study_id_beyond_a_bigint_answers_404_on_pages(db):
    manager = UserFactory(manager=True)
    client = Client()
    client.force_login(manager)
    for url in (f"/studies/{2**64}/", f"/studies/{2**64}/export/annotations.csv"):
        assert client.get(url).status_code == 404
