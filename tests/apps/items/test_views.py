"""Item pages: the import (uploads, media files, row-numbered errors) and one item's answers."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from apps.items.models import Item
from apps.studies.models import Study
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def import_url(study: Study) -> str:
    return reverse("items:import", args=[study.pk])


@pytest.fixture
def draft(manager):
    return StudyFactory(created_by=manager)


def test_page_is_for_managers_only(client, study_setup, outsider):
    study, (annotator, *_) = study_setup
    assert client.get(import_url(study)).status_code == 302
    for user, status in ((annotator, 403), (outsider, 404)):
        client.force_login(user)
        assert client.get(import_url(study)).status_code == status


def test_page_shows_the_form_and_the_format(client, manager, draft):
    client.force_login(manager)
    html = client.get(import_url(draft)).content.decode()
    assert 'enctype="multipart/form-data"' in html
    assert 'name="file"' in html
    assert 'name="media"' in html
    assert "multiple" in html
    assert "external_id" in html


def test_csv_import_creates_items(client, manager, draft):
    client.force_login(manager)
    upload = SimpleUploadedFile("items.csv", b"external_id,text\na,Hello\nb,World\n")
    response = client.post(import_url(draft), {"file": upload}, follow=True)
    assert response.redirect_chain[-1][0] == reverse("studies:overview", args=[draft.pk])
    assert "2 new and 0 updated items" in response.content.decode()
    assert list(draft.items.values_list("external_id", "text")) == [("a", "Hello"), ("b", "World")]


def test_jsonl_import_with_a_media_file(client, manager, draft):
    client.force_login(manager)
    rows = b'{"external_id": "p1", "kind": "image", "media": "dot.png"}\n'
    data = {
        "file": SimpleUploadedFile("items.jsonl", rows),
        "media": [SimpleUploadedFile("dot.png", PNG, content_type="image/png")],
    }
    response = client.post(import_url(draft), data)
    assert response.status_code == 302
    item = Item.objects.get(study=draft)
    assert item.kind == "image"
    assert item.media.name.endswith(".png")


def test_row_errors_are_listed_by_line_and_nothing_is_stored(client, manager, draft):
    client.force_login(manager)
    csv = b"external_id,kind,text\na,text,Fine\nb,text,\nc,hologram,Hi\n"
    response = client.post(import_url(draft), {"file": SimpleUploadedFile("items.csv", csv)})
    html = response.content.decode()
    assert response.status_code == 422
    assert "Nothing was imported" in html
    assert '<td class="num">3</td>' in html
    assert '<td class="num">4</td>' in html
    assert "<code>kind</code>" in html
    assert not draft.items.exists()


def test_unknown_extension_is_a_field_error(client, manager, draft):
    client.force_login(manager)
    response = client.post(
        import_url(draft), {"file": SimpleUploadedFile("items.xlsx", b"external_id\na\n")}
    )
    html = response.content.decode()
    assert response.status_code == 422
    assert 'id="id_file_error"' in html
    assert "Cannot tell the format" in html


def test_missing_file_is_a_field_error(client, manager, draft):
    client.force_login(manager)
    response = client.post(import_url(draft), {})
    assert response.status_code == 422
    assert 'id="id_file_error"' in response.content.decode()


def test_item_page_shows_every_answer_with_its_revisions_to_managers_only(
    client, study_setup, outsider, django_assert_max_num_queries
):
    import uuid

    from apps.annotations.selectors import assignment_next
    from apps.annotations.services import annotation_undo_last, annotations_submit

    study, (ann, *_) = study_setup
    question = study.questions.get()
    assignment = assignment_next(annotator=ann, study=study)
    item = assignment.item
    for label in ("negative", "positive"):
        annotations_submit(
            annotator=ann,
            assignment=assignment,
            answers={question: label},
            idempotency_key=uuid.uuid4(),
            time_spent_ms=900,
        )
    annotation_undo_last(annotator=ann, study=study, idempotency_key=uuid.uuid4())
    annotations_submit(
        annotator=ann,
        assignment=assignment,
        answers={question: "neutral"},
        idempotency_key=uuid.uuid4(),
    )
    url = reverse("items:detail", args=[study.pk, item.pk])
    for user, status in ((ann, 403), (outsider, 404)):
        client.force_login(user)
        assert client.get(url).status_code == status
    client.force_login(study.created_by)
    with django_assert_max_num_queries(12):
        html = client.get(url).content.decode()
    assert item.text in html
    for text in ("Negative", "Positive", "retracted (undo)", "<strong>Neutral</strong> (counts)"):
        assert text in html
    assert html.index("Negative") < html.index("Positive") < html.index("retracted")
    dashboard_link = reverse("items:detail", args=[study.pk, item.pk])
    overview = client.get(reverse("studies:overview", args=[study.pk])).content.decode()
    assert dashboard_link in overview
