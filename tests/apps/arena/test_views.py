"""Pages, API and exports of the model arena: who sees what, voting by form and htmx, the
results page's figures, the downloads."""

from __future__ import annotations

import io
import json
import re
import uuid

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from apps.annotations.models import Revision
from apps.arena.selectors import arena_results, arena_state
from apps.preferences.exporting import PREFERENCE_SCHEMA
from tests.apps.arena.conftest import STRENGTH, make_arena_study, truthful, vote_all
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def arena_url(arena, name: str = "arena") -> str:
    return reverse(f"arena:{name}", args=[arena.study.pk, arena.question.key])


def export_url(arena, fmt: str = "jsonl") -> str:
    return reverse("arena:preferences_file", args=[arena.study.pk, arena.question.key, fmt])


def form_fields(html: str) -> dict[str, str]:
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', html))


@pytest.mark.parametrize(
    ("who", "page_status", "results_status"),
    [("annotator", 200, 403), ("manager", 403, 200), ("outsider", 404, 404)],
)
def test_access_matrix(client, who, page_status, results_status):
    arena = make_arena_study(n_prompts=1, n_annotators=1)
    user = {
        "annotator": arena.annotators[0],
        "manager": arena.manager,
        "outsider": UserFactory(manager=True),  # manages other studies, not this one
    }[who]
    client.force_login(user)
    assert client.get(arena_url(arena)).status_code == page_status
    assert client.get(arena_url(arena, "results")).status_code == results_status
    assert client.get(export_url(arena)).status_code == results_status


def test_the_page_shows_the_prompt_and_two_anonymous_responses_and_a_vote_moves_on(client):
    arena = make_arena_study(n_prompts=2, n_annotators=1)
    user = arena.annotators[0]
    client.force_login(user)
    task = arena_state(question=arena.question, annotator=user).task
    html = client.get(arena_url(arena)).content.decode()
    assert task.item.text in html
    responses = task.item.metadata["responses"]
    assert html.index(responses[task.model_a]) < html.index(responses[task.model_b])
    for model in STRENGTH:  # the model names are never shown
        assert f">{model}<" not in html
    for key in ("ArrowLeft", "=", "ArrowRight"):  # the pairwise kind's keys
        assert f'data-key="{key}"' in html
    assert ">Tie<" in html
    assert "0 of 12 done" in html
    fields = form_fields(html)
    response = client.post(arena_url(arena), {**fields, "outcome": "-1"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert "1 of 12 done" in response.content.decode()
    assert "<html" not in response.content.decode()  # the pair area alone
    (revision,) = Revision.objects.all()
    assert revision.value["votes"] == [
        {"model_a": task.model_a, "model_b": task.model_b, "outcome": -1}
    ]
    # the same form sent again (a double click) stores nothing more
    again = client.post(arena_url(arena), {**fields, "outcome": "-1"})
    assert again.status_code == 302
    assert Revision.objects.count() == 1


def test_a_forged_ticket_is_refused(client):
    arena = make_arena_study(n_prompts=1, n_annotators=1)
    client.force_login(arena.annotators[0])
    fields = form_fields(client.get(arena_url(arena)).content.decode())
    response = client.post(arena_url(arena), {**fields, "ticket": "x" + fields["ticket"]})
    assert response.status_code == 422
    assert "out of date" in response.content.decode()
    assert not Revision.objects.exists()


def test_the_results_page_prints_the_ranking_and_what_it_rests_on(client):
    arena = make_arena_study(n_prompts=3, n_annotators=2)
    for user in arena.annotators:
        vote_all(arena.question, user)
    client.force_login(arena.manager)
    html = client.get(arena_url(arena, "results")).content.decode()
    found = arena_results(question=arena.question)
    assert re.search(r"data-votes>36<", html)
    assert re.search(r"data-prompts>3 ", html)
    assert re.search(r"data-annotators>2<", html)
    models = re.findall(r'<tr data-model="(\w+)">', html)
    assert models == [row.model for row in found.rows] == ["alpaca", "bison", "camel", "dingo"]
    thetas = [float(x) for x in re.findall(r'data-theta="([-0-9.e]+)"', html)]
    assert thetas == pytest.approx([row.log_strength for row in found.rows])
    assert html.count('<svg class="interval-plot"') == 1
    assert "(unmeasured)" in html  # no pairwise question in this study
    assert "data-few-votes" in html  # 6 votes per pair of models


def tie_bison_camel(model_a: str, model_b: str) -> int:
    """Truthful, except that bison and camel tie."""
    return 0 if {model_a, model_b} == {"bison", "camel"} else truthful(model_a, model_b)


def test_the_preference_export_has_the_pairwise_schema_and_the_ranking_margin(client):
    arena = make_arena_study(n_prompts=2, n_annotators=1)
    vote_all(arena.question, arena.annotators[0], answer=tie_bison_camel)
    client.force_login(arena.manager)
    body = b"".join(client.get(export_url(arena)).streaming_content).decode()
    rows = [json.loads(line) for line in body.splitlines()]
    assert list(rows[0]) == [column.name for column in PREFERENCE_SCHEMA]
    assert len(rows) == 10  # 12 votes, 2 ties left out
    found = {row.model: row.log_strength for row in arena_results(question=arena.question).rows}
    for row in rows:
        assert STRENGTH[row["chosen_id"]] > STRENGTH[row["rejected_id"]]
        assert row["chosen"].startswith(row["chosen_id"])  # the response text
        assert row["prompt"].startswith("Prompt number")
        assert row["annotator_weight"] == 1.0
        margin = found[row["chosen_id"]] - found[row["rejected_id"]]
        assert row["bt_margin"] == pytest.approx(margin)
    with_ties = b"".join(client.get(export_url(arena) + "?ties=keep").streaming_content)
    assert len(with_ties.decode().splitlines()) == 12
    csv_body = b"".join(client.get(export_url(arena, "csv")).streaming_content).decode()
    assert csv_body.splitlines()[0].startswith("prompt,chosen,rejected,tie")


def test_the_studys_answer_export_holds_the_arena_votes(client):
    arena = make_arena_study(n_prompts=2, n_annotators=1)
    vote_all(arena.question, arena.annotators[0])
    client.force_login(arena.manager)
    for fmt in ("csv", "jsonl", "parquet"):
        url = reverse("annotations:export", args=[arena.study.pk, fmt])
        response = client.get(url)
        assert response.status_code == 200
        body = b"".join(response.streaming_content)
        assert body
    url = reverse("annotations:export", args=[arena.study.pk, "jsonl"])
    rows = [json.loads(line) for line in b"".join(client.get(url).streaming_content).splitlines()]
    assert len(rows) == 2  # one answer per prompt
    assert sum(len(row["value"]["votes"]) for row in rows) == 12
    history = client.get(url + "?history=1")
    assert history.status_code == 200
    provenance = client.get(reverse("annotations:export_provenance", args=[arena.study.pk]))
    assert provenance.status_code == 200


def test_the_api_gives_the_next_pair_anonymised_and_takes_votes_idempotently():
    arena = make_arena_study(n_prompts=1, n_annotators=1)
    user = arena.annotators[0]
    client = APIClient()
    client.force_authenticate(user)
    base = f"/api/studies/{arena.study.pk}/arena/{arena.question.key}"
    task = client.get(f"{base}/next/")
    assert task.status_code == 200, task.data
    assert set(task.data) == {"item", "prompt", "response_a", "response_b", "ticket", "progress"}
    assert task.data["progress"] == {"done": 0, "total": 6, "percent": 0}
    key = str(uuid.uuid4())
    vote = {"ticket": task.data["ticket"], "outcome": 1, "idempotency_key": key}
    first = client.post(f"{base}/vote/", vote, format="json")
    assert first.status_code == 201, first.data
    again = client.post(f"{base}/vote/", vote, format="json")
    assert again.status_code == 200
    assert again.data["revision"] == first.data["revision"]
    repeated = client.post(
        f"{base}/vote/", {**vote, "idempotency_key": str(uuid.uuid4())}, format="json"
    )
    assert repeated.status_code == 400  # that pair of that prompt was judged
    forged = client.post(f"{base}/vote/", {**vote, "ticket": "nope"}, format="json")
    assert forged.status_code == 400
    assert client.get(f"{base}/ranking/").status_code == 403  # managers only
    manager = APIClient()
    manager.force_authenticate(arena.manager)
    assert manager.get(f"{base}/next/").status_code == 403
    ranking = manager.get(f"{base}/ranking/")
    assert ranking.status_code == 200
    assert ranking.data["n_votes"] == 1
    outsider = APIClient()
    outsider.force_authenticate(UserFactory(manager=True))
    assert outsider.get(f"{base}/ranking/").status_code in (403, 404)


def test_the_home_page_links_the_annotator_to_the_arena(client):
    arena = make_arena_study(n_prompts=1, n_annotators=1)
    client.force_login(arena.annotators[0])
    html = client.get(reverse("studies:home")).content.decode()
    assert arena_url(arena) in html
    client.force_login(arena.manager)
    overview = client.get(reverse("studies:overview", args=[arena.study.pk])).content.decode()
    assert arena_url(arena, "results") in overview


def test_the_studys_other_pages_take_an_arena_question(client):
    """The dashboard, the question editor (with its preview), the item page and the quality
    sweep meet an arena question with votes without failing."""
    from analytics.pipeline import quality_sweep
    from apps.annotations.models import Annotation
    from apps.arena.kind import ARENA

    arena = make_arena_study(n_prompts=1, n_annotators=1)
    vote_all(arena.question, arena.annotators[0])
    assert Annotation.objects.filter(analysis_pending=True).count() == 1  # the outbox row
    assert ARENA.process(question_id=arena.question.pk) == 1
    assert quality_sweep() == []  # nothing left waiting: the sweep does not come back to it
    client.force_login(arena.manager)
    study = arena.study.pk
    pages = [
        reverse("analytics:dashboard", args=[study]) + f"?question={arena.question.pk}",
        reverse("studies:question_edit", args=[study, arena.question.pk]),
        reverse("items:detail", args=[study, arena.items[0].pk]),
        reverse("studies:overview", args=[study]),
    ]
    for url in pages:
        assert client.get(url).status_code == 200, url
    editor = client.get(pages[1]).content.decode()
    assert "Places to settle" in editor  # the settings form
    assert ">Tie<" in editor  # the preview's buttons


def test_the_hugging_face_dataset_holds_the_arena_votes_as_preference_pairs(tmp_path):
    import zipfile

    import pyarrow.parquet as pq

    from apps.exchange.huggingface import dataset_zip

    arena = make_arena_study(n_prompts=2, n_annotators=1)
    vote_all(arena.question, arena.annotators[0], answer=tie_bison_camel)
    stream = io.BytesIO()
    record = dataset_zip(study=arena.study, stream=stream)
    with zipfile.ZipFile(stream) as archive:
        archive.extractall(tmp_path)
    table = pq.read_table(tmp_path / "data" / f"{arena.question.key}.parquet").to_pylist()
    assert len(table) == 12  # every vote, the 2 ties flagged
    assert sum(row["tie"] for row in table) == 2
    assert list(table[0]) == [column.name for column in PREFERENCE_SCHEMA]
    (summary,) = record["questions"]
    assert summary["kind"] == "arena"
