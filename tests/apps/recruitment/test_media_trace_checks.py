"""A gold-trace attention check among video items (issue #13): the true signal uploaded for a
video item is its known answer, not its stimulus. The check's recorder plays its video like
every other item of the package (no green canvas, no signal in the page, its caption as
usual), and a finished trace of it is still scored against the signal."""

from __future__ import annotations

import json
import uuid
from html.parser import HTMLParser

import numpy as np
import pytest
from django.urls import reverse

from apps.annotations.models import Assignment
from apps.continuous.selectors import gold_signal_for_item, trace_resume_state
from apps.continuous.services import trace_chunk_store, trace_finish
from apps.items.models import Item
from apps.items.services import items_bulk_create
from apps.recruitment.selectors import gold_accuracy
from apps.recruitment.services import (
    gold_answer_set,
    item_gold_signal_set,
    participant_consent,
    participant_enter,
    participant_start_work,
    participant_training_finish,
    recruitment_update,
)
from apps.studies.models import Question, Study
from apps.studies.services import question_create, study_set_status
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db
SECONDS = 30


def truth() -> np.ndarray:
    t = np.arange(SECONDS + 1, dtype=float)
    return 0.5 + 0.4 * np.sin(t / 3.0)


def video_study_with_a_check():
    """Five video clips with captions; the true signal of ``clip-4`` uploaded, a check."""
    study = StudyFactory()
    question = question_create(
        study=study,
        kind=Question.Kind.CONTINUOUS,
        key="arousal",
        prompt="How tense is the scene?",
        settings={"allow_seek": True},
    )
    rows = [
        {
            "external_id": f"clip-{n}",
            "kind": "video",
            "url": f"https://media.example.org/clip-{n}.mp4",
            "text": f"Scene {n}",
        }
        for n in range(5)
    ]
    items_bulk_create(study=study, rows=rows)
    check = Item.objects.get(study=study, external_id="clip-4")
    item_gold_signal_set(item=check, values=truth(), rate_hz=1.0)
    gold_answer_set(item=check, question=question, value={}, use="check")
    study_set_status(study=study, status=Study.Status.RUNNING)
    recruitment = recruitment_update(
        study=study, is_open=True, items_per_participant=4, check_rate=0.25, trace_threshold=0.3
    )
    participant = participant_enter(recruitment=recruitment, platform_id="P1").participant
    participant = participant_consent(participant=participant, agree=True)
    participant = participant_start_work(
        participant=participant_training_finish(participant=participant)
    )
    return study, question, check, participant


class Shape(HTMLParser):
    """The recorder's markup as (tag, attribute names) in document order, and its config."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = 0
        self.tags: list[tuple[str, tuple[str, ...]]] = []
        self.config = ""
        self._in_config = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = dict(attrs)
        if "data-trace-recorder" in names:
            self.inside += 1
        if names.get("id") == "trace-config":
            self._in_config = True
        if self.inside:
            self.tags.append((tag, tuple(sorted(names))))

    def handle_endtag(self, tag: str) -> None:
        self._in_config = False

    def handle_data(self, data: str) -> None:
        if self._in_config:
            self.config += data


def recorder_of(client, study: Study, question: Question, assignment: Assignment) -> Shape:
    url = reverse("continuous:record", args=[study.pk, question.key, assignment.pk])
    response = client.get(url)
    assert response.status_code == 200
    shape = Shape()
    shape.feed(response.content.decode())
    assert shape.tags, "no recorder on the page"
    return shape


def test_a_video_check_plays_its_video_like_every_item_of_the_package(client):
    study, question, check, participant = video_study_with_a_check()
    package = list(Assignment.objects.filter(annotator=participant.user).select_related("item"))
    assert check.pk in {a.item_id for a in package}
    assert len(package) == 5  # four regular clips and the check
    client.force_login(participant.user)
    shapes = {a.item.external_id: recorder_of(client, study, question, a) for a in package}
    seen = shapes.pop("clip-4")
    for regular in shapes.values():
        assert seen.tags == regular.tags  # same elements with the same attributes
        config, other = json.loads(seen.config), json.loads(regular.config)
        assert config.keys() == other.keys()
        assert (
            (config["gold"], config["duration"])
            == (other["gold"], other["duration"])
            == (
                None,
                None,
            )
        )
    assert ("video", ("class", "playsinline", "preload", "src")) in seen.tags
    check_page = client.get(
        reverse(
            "continuous:record",
            args=[study.pk, question.key, check_assignment(participant, check).pk],
        )
    ).content.decode()
    assert "trace-stimulus" not in check_page  # the green canvas's class
    assert "Scene 4" in check_page  # its caption, as every clip shows its own


def check_assignment(participant, check: Item) -> Assignment:
    return Assignment.objects.get(annotator=participant.user, item=check)


def test_the_resume_state_of_a_video_check_names_no_duration_of_its_signal():
    _, question, check, participant = video_study_with_a_check()
    assignment = check_assignment(participant, check)
    assert trace_resume_state(assignment=assignment, question=question).duration is None


def test_a_trace_of_the_video_check_is_still_scored_against_the_true_signal():
    study, question, check, participant = video_study_with_a_check()
    assert gold_signal_for_item(check) is not None
    assignment = check_assignment(participant, check)
    times = np.round(np.arange(0, SECONDS + 0.05, 0.5), 6)
    recording = uuid.uuid4()
    trace_chunk_store(
        annotator=participant.user,
        assignment=assignment,
        question=question,
        recording_uuid=recording,
        sequence=0,
        times=times.tolist(),
        values=np.interp(times, np.arange(SECONDS + 1), truth()).tolist(),
        duration=float(SECONDS),  # the video's length, as the page reads it from the player
    )
    trace_finish(annotator=participant.user, recording_uuid=recording)
    found = gold_accuracy(study=study)[participant.user_id]
    assert (found.correct, found.checked) == (1, 1)


def test_training_on_a_video_gold_trace_plays_the_video_and_sends_no_signal(client):
    study, question, check, _ = video_study_with_a_check()
    gold_answer_set(item=check, question=question, value={}, use="training")
    recruitment = recruitment_update(study=study, qualification_threshold=1.0)
    participant = participant_enter(recruitment=recruitment, platform_id="P2").participant
    participant = participant_consent(participant=participant, agree=True)
    client.force_login(participant.user)
    page = client.get(reverse("recruitment:training", args=[study.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'src="https://media.example.org/clip-4.mp4" data-training-stimulus' in html
    assert "trace-stimulus" not in html  # no green canvas
    config = page.context["trace"]
    assert "signal" not in config
    assert "rate_hz" not in config
    assert "Scene 4" in html  # the clip's caption, as in the work


def test_the_item_page_shows_a_video_checks_video_and_its_truth_not_a_green_strip(client):
    study, _, check, _ = video_study_with_a_check()
    client.force_login(study.created_by)
    page = client.get(reverse("items:detail", args=[study.pk, check.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'src="https://media.example.org/clip-4.mp4"' in html  # the clip, as annotators see it
    assert "green-stimulus" not in html
    (card,) = page.context["cards"]
    assert card["traces"].gold is not None  # the truth is still drawn with the traces
    assert card["traces"].truth
