"""The question editor: a form per kind, label rows, settings fields, preview and errors."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.urls import reverse

from apps.annotations.models import Assignment
from apps.annotations.services import annotations_submit
from apps.continuous.config import MAX_RECORDING_RATE_HZ, trace_settings
from apps.continuous.forms import TraceSettingsForm
from apps.continuous.kind import CONTINUOUS
from apps.preferences.forms import PairwiseSettingsForm
from apps.preferences.models import KAPPA_FLOOR_RANGE, range_text
from apps.studies.forms import LABEL_FIELDS
from apps.studies.models import Question
from apps.studies.services import question_create
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db

ROWS = [
    {"key": "joy", "name": "Joy", "shortcut": "j", "valence": "4.1", "arousal": "3.6"},
    {"key": "calm", "name": "", "shortcut": "c", "valence": "3.0", "arousal": "2.0"},
]
SETTINGS_FORMS = {"continuous": TraceSettingsForm, "pairwise": PairwiseSettingsForm}


def page(study, question=None, **query: str) -> str:
    if question is None:
        url = reverse("studies:question_create", args=[study.pk])
        return url + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")
    return reverse("studies:question_edit", args=[study.pk, question.pk])


def posted(
    kind: str = "categorical",
    *,
    rows: list[dict[str, str]] | None = None,
    settings: dict[str, Any] | None = None,
    editor: str = "save",
    **fields: str,
) -> dict[str, Any]:
    """What the browser posts: the fields, every label row, every setting (defaults unless
    given; unticked boxes absent)."""
    data: dict[str, Any] = {"key": "q", "prompt": "Which?", "kind": kind, "editor": editor}
    data |= fields
    if kind == "categorical":
        rows = ROWS if rows is None else rows
        data |= {"labels-TOTAL_FORMS": len(rows), "labels-INITIAL_FORMS": len(rows)}
        for i, row in enumerate(rows):
            data |= {f"labels-{i}-{name}": row.get(name, "") for name in LABEL_FIELDS}
    if form := SETTINGS_FORMS.get(kind):
        values = {name: field.initial for name, field in form.base_fields.items()}
        for name, value in (values | (settings or {})).items():
            if value is True:
                data[f"settings-{name}"] = "on"
            elif value is not False:
                data[f"settings-{name}"] = value
    return data


@pytest.fixture
def study(client):
    study = StudyFactory()
    client.force_login(study.created_by)
    return study


# ---------- a form per kind ----------


def test_each_kind_shows_only_the_fields_that_apply_to_it(client, study):
    categorical = client.get(page(study, kind="categorical")).content.decode()
    assert 'name="labels-0-key"' in categorical
    assert "Ordered scale" in categorical
    # its settings: the model run that suggests and the held-out share, the queue's active
    # order with its run and natural share (issue 28), no other
    assert set(re.findall(r'name="settings-([a-z_]+)"', categorical)) == {
        "suggestion_run",
        "suggestion_held_out",
        "queue_order",
        "queue_order_run",
        "queue_order_natural_share",
    }
    pairwise = client.get(page(study, kind="pairwise")).content.decode()
    assert 'name="settings-strict"' in pairwise
    assert 'name="settings-kappa_floor"' in pairwise
    assert "Ordered scale" not in pairwise
    assert "labels-TOTAL_FORMS" not in pairwise
    continuous = client.get(page(study, kind="continuous")).content.decode()
    assert 'name="settings-recording_rate_hz"' in continuous
    assert 'name="settings-strict"' not in continuous
    assert "Ordered scale" not in continuous
    assert client.get(page(study, kind="stars")).status_code == 404


def test_choosing_a_kind_with_htmx_redraws_the_editor_keeping_key_and_prompt(client, study):
    response = client.get(
        page(study, kind="pairwise", key="fluency", prompt="Better"), HTTP_HX_REQUEST="true"
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="editor"')
    assert 'value="fluency"' in html
    assert 'value="Better"' in html
    assert 'name="settings-strict"' in html


def test_a_categorical_question_is_saved_from_its_rows(client, study):
    rows = [*ROWS, dict.fromkeys(LABEL_FIELDS, "")]  # a blank row is left out
    response = client.post(page(study), posted(rows=rows, ordered="on"))
    assert response.status_code == 302
    question = Question.objects.get(study=study)
    assert question.ordered
    assert list(question.labels.values_list("key", "name", "shortcut", "valence")) == [
        ("joy", "Joy", "j", 4.1),  # coordinates on any scale (the help says so)
        ("calm", "calm", "c", 3.0),
    ]


def test_settings_are_saved_from_their_fields(client, study):
    data = posted("pairwise", settings={"strict": True, "audit_rate": "0.2"})
    assert client.post(page(study), data).status_code == 302
    settings = study.questions.get().settings
    assert settings["strict"] is True
    assert settings["audit_rate"] == 0.2
    assert settings["calibration_triplets"] == 10
    data = posted("continuous", key="arousal", settings={"orientation": "vertical"})
    assert client.post(page(study), data).status_code == 302
    assert study.questions.get(key="arousal").settings["orientation"] == "vertical"


# ---------- help and validation from the same constants ----------


def test_help_texts_quote_the_limits_the_validators_use(client, study):
    pairwise = client.get(page(study, kind="pairwise")).content.decode()
    assert f"a number in {range_text(KAPPA_FLOOR_RANGE)}" in pairwise
    response = client.post(page(study), posted("pairwise", settings={"kappa_floor": "1.5"}))
    assert response.status_code == 422
    assert f"Give a number in {range_text(KAPPA_FLOOR_RANGE)}." in field_errors(
        response, "settings-kappa_floor"
    )
    continuous = client.get(page(study, kind="continuous")).content.decode()
    assert f"at most {MAX_RECORDING_RATE_HZ:g}." in continuous
    too_fast = {"recording_rate_hz": MAX_RECORDING_RATE_HZ + 1}
    response = client.post(page(study), posted("continuous", settings=too_fast))
    assert f"(0, {MAX_RECORDING_RATE_HZ:g}]" in field_errors(response, "settings-recording_rate_hz")
    categorical = client.get(page(study)).content.decode()
    assert "from -1 to 1" not in categorical
    assert "1 to 5" in categorical


def field_errors(response, name: str) -> str:
    """The error list rendered right after the field ``name`` (Django's ``<id>_error``)."""
    html = response.content.decode()
    start = html.index(f'id="id_{name}_error"')
    return html[start : html.index("</ul>", start)]


def test_every_settings_error_shows_at_its_field_at_once(client, study):
    bad = {"scale_min": "1", "scale_max": "0", "analysis_rate_hz": "30"}
    response = client.post(page(study), posted("continuous", key="bad key", settings=bad))
    assert response.status_code == 422
    assert "scale_max must be above scale_min" in field_errors(response, "settings-scale_max")
    assert "at most recording_rate_hz" in field_errors(response, "settings-analysis_rate_hz")
    assert "letters, numbers" in field_errors(response, "key")
    assert not study.questions.exists()


def test_label_errors_point_at_their_row_and_field(client, study):
    rows = [
        {"key": "ok", "shortcut": "1"},
        {"key": "bad key", "shortcut": "s"},
        {"key": "x", "valence": "0.5"},
    ]
    response = client.post(page(study), posted(rows=rows))
    assert response.status_code == 422
    assert "letters, digits" in field_errors(response, "labels-1-key")
    assert "kept for skip (s) and undo (u)" in field_errors(response, "labels-1-shortcut")
    assert "Give both valence and arousal, or neither." in response.content.decode()
    rows = [{"key": "a", "shortcut": "1"}, {"key": "b", "shortcut": "1"}, {"key": "a"}]
    html = client.post(page(study), posted(rows=rows)).content.decode()
    assert "The shortcut &#x27;1&#x27; is already label 1&#x27;s" in html
    assert "The key &#x27;a&#x27; is already label 1&#x27;s" in html
    html = client.post(page(study), posted(rows=ROWS[:1])).content.decode()
    assert "at least two labels" in html
    assert not study.questions.exists()


def test_advanced_json_reports_line_and_column(client, study):
    data = posted("pairwise", advanced='{\n  "quality": {,}\n}')
    response = client.post(page(study), data)
    assert response.status_code == 422
    assert "Line 2, column 15: Expecting property name enclosed in double quotes." in (
        field_errors(response, "advanced")
    )
    response = client.post(page(study), posted("pairwise", advanced='{"strictly": 1}'))
    assert "Unknown pairwise settings: strictly" in field_errors(response, "advanced")


def test_quality_overrides_typed_as_json_are_kept_and_shown_again(client, study):
    override = '{"quality": {"min_evidence": {"traces": 3}}}'
    response = client.post(page(study), posted("continuous", advanced=override))
    assert response.status_code == 302
    question = study.questions.get()
    assert question.settings["quality"]["min_evidence"] == {"traces": 3}
    assert trace_settings(question).recording_rate_hz == 10.0  # the kind ignores "quality"
    html = client.get(page(study, question)).content.decode()
    assert "&quot;min_evidence&quot;" in html


# ---------- label rows without JavaScript and with htmx ----------


def rows_shown(html: str) -> list[str]:
    import re

    return re.findall(r'name="labels-\d+-key" value="([^"]*)"', html)


def test_row_buttons_work_without_javascript(client, study):
    rows = [{"key": "a"}, {"key": "b"}, {"key": "c"}]
    added = client.post(page(study), posted(rows=rows, editor="add"))
    html = added.content.decode()
    assert added.status_code == 200
    assert 'name="labels-TOTAL_FORMS" value="4"' in html
    assert "errorlist" not in html  # nothing is checked before saving
    assert rows_shown(
        client.post(page(study), posted(rows=rows, editor="remove-1")).content.decode()
    ) == ["a", "c"]
    assert rows_shown(
        client.post(page(study), posted(rows=rows, editor="up-2")).content.decode()
    ) == ["a", "c", "b"]
    assert rows_shown(
        client.post(page(study), posted(rows=rows, editor="down-0")).content.decode()
    ) == ["b", "a", "c"]
    assert not study.questions.exists()


def test_row_buttons_with_htmx_redraw_the_rows_and_their_preview(client, study):
    response = client.post(page(study), posted(editor="add"), HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith('<fieldset id="label-rows"')
    assert '<div id="preview-body" hx-swap-oob="innerHTML">' in html  # and their preview
    assert html.count("label-button") == 2
    assert rows_shown(html) == ["joy", "calm"]


# ---------- preview ----------


def preview(client, study, data) -> str:
    response = client.post(page(study), {**data, "editor": "preview"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div class="question-preview__frame" inert>')
    return html


def test_preview_draws_the_annotators_controls_as_typed(client, study):
    html = preview(client, study, posted(prompt="How do you feel?"))
    assert "How do you feel?" in html
    assert 'data-shortcut="j"' in html
    assert "<span>Joy</span>" in html
    assert "<span>calm</span>" in html  # the key stands in for an empty name
    strict = preview(client, study, posted("pairwise", settings={"strict": True}))
    assert "A is better" in strict
    assert "Equal" not in strict
    assert "Equal" in preview(client, study, posted("pairwise"))
    vertical = {"orientation": "vertical", "label_max": "Very tense"}
    html = preview(client, study, posted("continuous", settings=vertical))
    assert "trace-recorder--vertical" in html
    assert "Very tense" in html
    # a setting that does not pass yet is drawn with its default, the rest as typed
    html = preview(
        client,
        study,
        posted("continuous", settings={"recording_rate_hz": "999", "label_min": "Calm"}),
    )
    assert "Calm" in html
    assert "trace-recorder--horizontal" in html


def test_preview_names_a_refused_shortcut_as_it_is_typed(client, study):
    """'s' is the queue's skip key: the preview drew a label button with it and the error
    came only on save."""
    rows = [{"key": "joy", "name": "Joy", "shortcut": "s"}, {"key": "calm", "shortcut": "c"}]
    html = preview(client, study, posted(rows=rows))
    assert "Label 1 (Joy): &#x27;s&#x27; is kept for skip (s) and undo (u)." in html
    assert 'data-shortcut="s"' not in html  # not drawn as a key the queue would refuse
    assert 'data-shortcut="c"' in html


# ---------- editing answered questions keeps the answers' meaning ----------


@pytest.fixture
def answered(client, study_setup, manager):
    """The sentiment question with two answers to 'negative'."""
    study, annotators = study_setup
    question = study.questions.get()
    for annotator in annotators[:2]:
        assignment = Assignment.objects.filter(annotator=annotator, study=study).first()
        annotations_submit(
            annotator=annotator,
            assignment=assignment,
            answers={question: "negative"},
            idempotency_key=uuid.uuid4(),
        )
    client.force_login(manager)
    return question


def rows_of(question: Question) -> list[dict[str, str]]:
    return [
        {name: "" if value is None else str(value) for name, value in row.items()}
        for row in question.labels.values(*LABEL_FIELDS)
    ]


def test_the_edit_page_counts_each_labels_answers_and_offers_no_removal(client, answered):
    html = client.get(page(answered.study, answered)).content.decode()
    assert 'Label 1 <span class="muted">· 2 answers</span>' in html
    assert 'value="remove-0"' not in html
    assert 'value="remove-1"' in html


def test_removing_a_label_with_answers_is_refused_with_its_count(client, answered):
    rows = rows_of(answered)[1:]
    data = posted(rows=rows, key=answered.key, prompt=answered.prompt, ordered="on")
    response = client.post(page(answered.study, answered), data)
    assert response.status_code == 422
    assert "&#x27;Negative&#x27; (negative) has 2 answers: keep it" in response.content.decode()
    assert answered.labels.count() == 3


def test_an_answered_ordered_scale_keeps_its_order(client, answered):
    rows = rows_of(answered)
    rows[0], rows[2] = rows[2], rows[0]
    data = posted(rows=rows, key=answered.key, prompt=answered.prompt, ordered="on")
    response = client.post(page(answered.study, answered), data)
    assert "must stay in the order negative" in response.content.decode()
    renamed = rows_of(answered)
    renamed[0]["name"] = "Bad"  # renaming keeps the answers' meaning
    data = posted(rows=renamed, key=answered.key, prompt=answered.prompt, ordered="on")
    assert client.post(page(answered.study, answered), data).status_code == 302
    assert answered.labels.get(key="negative").name == "Bad"


def test_an_answered_trace_keeps_its_scale(client, study, monkeypatch):
    question = question_create(study=study, key="arousal", prompt="?", kind="continuous")
    monkeypatch.setattr(CONTINUOUS, "answered", lambda question: True)
    data = posted("continuous", key="arousal", prompt="?", settings={"scale_max": "5"})
    response = client.post(page(study, question), data)
    assert "cannot change once the question has answers" in field_errors(
        response, "settings-scale_max"
    )
    data = posted("continuous", key="arousal", prompt="?", settings={"label_max": "Tense"})
    assert client.post(page(study, question), data).status_code == 302
    question.refresh_from_db()
    assert question.settings["label_max"] == "Tense"
    assert question.settings["scale_max"] == 1.0


def test_the_kind_is_fixed_on_the_edit_page(client, study):
    question = question_create(study=study, key="fluency", prompt="?", kind="pairwise")
    data = posted("pairwise", key="fluency", prompt="Better?") | {"kind": "categorical"}
    assert client.post(page(study, question), data).status_code == 302
    question.refresh_from_db()
    assert question.kind == "pairwise"
    assert question.prompt == "Better?"
