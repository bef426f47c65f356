"""Label Studio JSON: real exports made by Label Studio imported as finished studies, and our
categorical answers exported as tasks that import back with the same agreement."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from analytics.selectors import latest_snapshot
from apps.annotations.exporting import annotation_export_rows
from apps.annotations.models import Annotation
from apps.exchange.label_studio import (
    label_studio_config,
    label_studio_import,
    label_studio_tasks,
)
from apps.items.models import Item
from apps.studies.models import Study
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

FILES = Path(__file__).parent / "label_studio"
SENTIMENT = FILES / "sentiment_choices_export.json"  # made by Label Studio: 1 task, choices
RECTANGLES = FILES / "rectangles_export.json"  # made by Label Studio: 2 tasks, bounding boxes


def load(path: Path) -> list[dict]:
    return json.loads(path.read_text())


def as_stream(tasks: list[dict]) -> io.BytesIO:
    return io.BytesIO(json.dumps(tasks).encode())


# The labelling configuration of the project behind SENTIMENT (Label Studio's sentiment
# template): the export itself names only the choices that were used.
CONFIG = """<View>
  <Text name="text" value="$text"/>
  <Choices name="sentiment" toName="text" choice="single">
    <Choice value="Positive"/><Choice value="Negative"/><Choice value="Neutral"/>
  </Choices>
</View>"""


def test_a_real_label_studio_export_becomes_a_closed_study():
    manager = UserFactory(manager=True)
    with SENTIMENT.open("rb") as stream:
        study = label_studio_import(
            manager=manager, stream=stream, name="From Label Studio", label_config=CONFIG
        )
    assert study.status == Study.Status.CLOSED
    question = study.questions.get()
    assert (question.key, question.ordered) == ("sentiment", False)
    assert [label.name for label in question.labels.all()] == ["Positive", "Negative", "Neutral"]
    item = study.items.get()
    assert item.external_id == "6141"
    assert item.text.startswith("Calif. wildfires signal the arrival")
    assert item.metadata["label_studio"]["task"] == "6141"
    (row,) = annotation_export_rows(study=study)
    assert (row["annotator"], row["label"], row["time_spent_ms"]) == (
        f"ls{study.pk}-14",
        "positive",
        1849,
    )
    annotator = study.memberships.get(role="annotator").user
    assert not annotator.has_usable_password()


def test_unmappable_results_are_reported_by_task_and_nothing_is_stored():
    manager = UserFactory(manager=True)
    studies = Study.objects.count()
    with RECTANGLES.open("rb") as stream, pytest.raises(ValidationError) as caught:
        label_studio_import(manager=manager, stream=stream, name="Boxes")
    assert caught.value.messages == [
        "task 1, annotation 7: result type 'rectanglelabels' (from_name 'label') has no "
        "counterpart here; only choices and rating map to categorical questions.",
        "task 2, annotation 8: result type 'rectanglelabels' (from_name 'label') has no "
        "counterpart here; only choices and rating map to categorical questions.",
        "task 2, annotation 8: result type 'rectanglelabels' (from_name 'label') has no "
        "counterpart here; only choices and rating map to categorical questions.",
    ]
    assert Study.objects.count() == studies
    assert not Item.objects.exists()


def panel(n_items: int = 12) -> list[dict]:
    """The real export's task, as Label Studio writes it, repeated over ``n_items`` texts and
    annotated by three annotators: 14 and 15 agree, 16 picks the other label every time."""
    template = load(SENTIMENT)[0]
    tasks = []
    for n in range(n_items):
        task = copy.deepcopy(template)
        task["id"] = 7000 + n
        task["data"]["text"] = f"Sentence {n}."
        annotations = []
        for user in (14, 15, 16):
            annotation = copy.deepcopy(template["annotations"][0])
            annotation["completed_by"] = {**annotation["completed_by"], "id": user}
            agrees = user != 16
            choice = ["Positive", "Negative"][(n % 2) ^ (not agrees)]
            annotation["result"][0]["value"] = {"choices": [choice]}
            annotations.append(annotation)
        task["annotations"] = annotations
        tasks.append(task)
    return tasks


def test_without_the_configuration_a_single_choice_is_no_scale():
    manager = UserFactory(manager=True)
    with SENTIMENT.open("rb") as stream, pytest.raises(ValidationError, match="fewer than two"):
        label_studio_import(manager=manager, stream=stream, name="One label")
    config = CONFIG.replace('<Choice value="Positive"/>', "")
    with SENTIMENT.open("rb") as stream, pytest.raises(ValidationError) as caught:
        label_studio_import(manager=manager, stream=stream, name="X", label_config=config)
    assert caught.value.messages == [
        "task 6141, annotation 18047: 'sentiment': 'Positive' is not in the labelling "
        "configuration."
    ]


def test_the_imported_agreement_is_on_the_dashboard(client, django_capture_on_commit_callbacks):
    manager = UserFactory(manager=True)
    with django_capture_on_commit_callbacks(execute=True):
        study = label_studio_import(manager=manager, stream=as_stream(panel()), name="Panel")
    question = study.questions.get()
    assert Annotation.objects.filter(question=question).count() == 36
    snapshot = latest_snapshot(question=question)
    assert snapshot is not None
    assert snapshot.indicators["study"]["n_annotators"] == 3
    indicators = snapshot.indicators
    kappas = dict(zip(indicators["annotators"], indicators["values"]["cohen_kappa"], strict=True))
    by_name = {m.user.pk: m.user.username for m in study.memberships.select_related("user")}
    contrarian = next(pk for pk, name in by_name.items() if name.endswith("-16"))
    assert kappas[contrarian] < min(v for pk, v in kappas.items() if pk != contrarian)
    client.force_login(manager)
    page = client.get(reverse("analytics:dashboard", args=[study.pk]))
    assert page.status_code == 200


def test_ratings_map_to_an_ordered_scale_and_mixed_problems_are_listed():
    tasks = panel(2)
    for task in tasks:
        for annotation in task["annotations"]:
            annotation["result"] = [
                {
                    "type": "rating",
                    "from_name": "quality",
                    "to_name": "text",
                    "value": {"rating": 3},
                }
            ]
    manager = UserFactory(manager=True)
    study = label_studio_import(manager=manager, stream=as_stream(tasks), name="Ratings")
    question = study.questions.get()
    assert question.ordered
    assert [label.key for label in question.labels.all()] == ["1", "2", "3"]
    bad = panel(1)
    bad[0]["annotations"][0]["result"][0]["value"] = {"choices": ["Positive", "Negative"]}
    bad[0]["annotations"][1]["completed_by"] = None
    bad[0]["annotations"][2]["result"].append(
        {"type": "pairwise", "from_name": "pw", "to_name": "pw", "value": {"selected": "left"}}
    )
    with pytest.raises(ValidationError) as caught:
        label_studio_import(manager=manager, stream=as_stream(bad), name="Bad", label_config=CONFIG)
    assert [m.split(":")[1].strip() for m in caught.value.messages] == [
        "'sentiment'",
        "an annotation without completed_by.",
        "result type 'pairwise' (from_name 'pw') has no counterpart here; only choices and "
        "rating map to categorical questions.",
    ]
    with pytest.raises(ValidationError, match="Not a Label Studio JSON export"):
        label_studio_import(manager=manager, stream=io.BytesIO(b"{nope"), name="Broken")


def test_our_export_imports_back_with_the_same_answers(django_capture_on_commit_callbacks):
    manager = UserFactory(manager=True)
    with django_capture_on_commit_callbacks(execute=True):
        original = label_studio_import(manager=manager, stream=as_stream(panel()), name="Panel")
    tasks = label_studio_tasks(study=original)
    assert len(tasks) == 12
    assert tasks[0]["data"] == {"external_id": "7000", "text": "Sentence 0."}
    assert tasks[0]["annotations"][0]["result"] == [
        {
            "type": "choices",
            "from_name": "sentiment",
            "to_name": "stimulus",
            "value": {"choices": ["positive"]},
        }
    ]
    config = label_studio_config(study=original)
    assert '<Choices name="sentiment" toName="stimulus" choice="single">' in config
    assert '<Choice value="positive" hint="Positive"/>' in config
    with django_capture_on_commit_callbacks(execute=True):
        back = label_studio_import(manager=manager, stream=as_stream(tasks), name="Round trip")

    def answers(study: Study) -> list[tuple[str, str]]:
        items = dict(study.items.values_list("external_id", "text"))
        return sorted(
            (items[row["item"]], row["label"]) for row in annotation_export_rows(study=study)
        )

    assert answers(back) == answers(original)
    assert latest_snapshot(question=back.questions.get()).indicators["study"]["alpha"] == (
        pytest.approx(
            latest_snapshot(question=original.questions.get()).indicators["study"]["alpha"]
        )
    )


def test_api_import_and_export():
    manager = UserFactory(manager=True)
    client = APIClient()
    client.force_authenticate(manager)
    upload = io.BytesIO(SENTIMENT.read_bytes())
    upload.name = "project-1-at-2024-05-15.json"
    response = client.post(
        "/api/studies/import/label-studio/",
        {"file": upload, "name": "LS", "label_config": CONFIG},
        format="multipart",
    )
    assert response.status_code == 201, response.data
    study_id = response.data["id"]
    tasks = client.get(f"/api/studies/{study_id}/export/label-studio/")
    assert tasks.status_code == 200
    assert tasks.json()[0]["annotations"][0]["result"][0]["value"] == {"choices": ["positive"]}
    config = client.get(f"/api/studies/{study_id}/export/label-studio/", {"part": "config"})
    assert config["Content-Type"].startswith("application/xml")
    bad = io.BytesIO(RECTANGLES.read_bytes())
    bad.name = "boxes.json"
    refused = client.post(
        "/api/studies/import/label-studio/", {"file": bad, "name": "B"}, format="multipart"
    )
    assert refused.status_code == 400
    assert "rectanglelabels" in json.dumps(refused.data)
    client.force_authenticate(UserFactory())  # may not create studies
    upload.seek(0)
    forbidden = client.post(
        "/api/studies/import/label-studio/", {"file": upload, "name": "No"}, format="multipart"
    )
    assert forbidden.status_code == 403


def test_the_command_imports_a_file_or_lists_the_problems(tmp_path):
    manager = UserFactory(manager=True)
    config = tmp_path / "config.xml"
    config.write_text(CONFIG)
    out = io.StringIO()
    call_command(
        "import_label_studio",
        str(SENTIMENT),
        "--name",
        "CLI",
        "--manager",
        manager.username,
        "--label-config",
        str(config),
        stdout=out,
    )
    assert out.getvalue().strip().endswith("1 items, 1 question(s), 1 answers")
    err = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command(
            "import_label_studio",
            str(RECTANGLES),
            "--name",
            "B",
            "--manager",
            manager.username,
            stderr=err,
        )
    assert caught.value.returncode == 2
    assert "rectanglelabels" in err.getvalue()
