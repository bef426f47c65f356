"""Items through the API: who sees which, and bulk creation."""

from __future__ import annotations

from django.utils import timezone

from apps.annotations.models import Assignment
from apps.items.models import Item
from tests.factories import ItemFactory, running_study


def test_annotator_sees_only_assigned_items_manager_sees_all(db, client_for) -> None:
    """An annotator lists the items they answered, never the work ahead (its attention checks
    would stand out); a manager every item."""
    study, annotators = running_study(n_items=6, n_annotators=3, overlap=1)
    annotator = annotators[0]
    assigned = Assignment.objects.filter(annotator=annotator)
    mine = set(assigned.values_list("item_id", flat=True))
    assert 0 < len(mine) < 6
    assert client_for(annotator).get(f"/api/studies/{study.pk}/items/").data["count"] == 0
    assigned.update(completed_at=timezone.now())
    listed = client_for(annotator).get(f"/api/studies/{study.pk}/items/").data
    assert {item["id"] for item in listed["results"]} == mine
    assert listed["count"] == len(mine)
    listed = client_for(study.created_by).get(f"/api/studies/{study.pk}/items/").data
    assert listed["count"] == 6


def test_annotator_cannot_open_an_item_not_assigned_to_them(db, client_for) -> None:
    study, (annotator, *_) = running_study(n_items=6, n_annotators=3, overlap=1)
    other = Item.objects.filter(study=study).exclude(assignments__annotator=annotator).first()
    response = client_for(annotator).get(f"/api/studies/{study.pk}/items/{other.pk}/")
    assert response.status_code == 404
    response = client_for(study.created_by).get(f"/api/studies/{study.pk}/items/{other.pk}/")
    assert response.status_code == 200


def test_item_shows_what_to_annotate_but_not_its_metadata(study_setup, client_for) -> None:
    study, _ = study_setup
    item = ItemFactory(study=study, metadata={"gold": "positive"})
    response = client_for(study.created_by).get(f"/api/studies/{study.pk}/items/{item.pk}/")
    assert response.data == {
        "id": item.pk,
        "external_id": item.external_id,
        "kind": "text",
        "text": item.text,
        "url": "",
        "media": None,
        "position": item.position,
    }


def test_bulk_creates_then_updates_and_fills_queues(study_setup, client_for) -> None:
    study, (annotator, *_) = study_setup
    client = client_for(study.created_by)
    url = f"/api/studies/{study.pk}/items/bulk/"
    rows = [
        {"external_id": "a", "text": "First."},
        {"external_id": "b", "kind": "image", "url": "https://example.org/b.png", "lang": "en"},
    ]
    response = client.post(url, rows, format="json")
    assert response.status_code == 200
    assert response.data == {"created": 2, "updated": 0}
    assert Item.objects.get(study=study, external_id="b").metadata == {"lang": "en"}
    assert Assignment.objects.filter(annotator=annotator, item__external_id="a").exists()
    response = client.post(url, [{"external_id": "a", "text": "First, edited."}], format="json")
    assert response.data == {"created": 0, "updated": 1}
    assert Item.objects.get(study=study, external_id="a").text == "First, edited."


def test_bulk_with_a_bad_row_stores_nothing(study_setup, client_for) -> None:
    study, _ = study_setup
    before = Item.objects.count()
    rows = [
        {"external_id": "ok", "text": "Fine."},
        {"external_id": "bad", "kind": "image", "url": "not a url"},
        {"text": "No id."},
    ]
    response = client_for(study.created_by).post(
        f"/api/studies/{study.pk}/items/bulk/", rows, format="json"
    )
    assert response.status_code == 400
    errors = response.data["non_field_errors"]
    assert any(error.startswith("line 2, field url") for error in errors)
    assert any(error.startswith("line 3, field external_id") for error in errors)
    assert Item.objects.count() == before


def test_bulk_needs_a_list_of_objects(study_setup, client_for) -> None:
    study, _ = study_setup
    client = client_for(study.created_by)
    url = f"/api/studies/{study.pk}/items/bulk/"
    assert client.post(url, {"external_id": "a"}, format="json").status_code == 400
    assert client.post(url, ["a"], format="json").status_code == 400
