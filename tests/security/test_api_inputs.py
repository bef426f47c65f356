"""JSON bodies with text no database can store are refused with 400, not a 500 at the write.

Found by the API fuzzing (tests/security/test_api_fuzz.py): a NUL character in an item's
``external_id`` made PostgreSQL refuse the insert; an unpaired surrogate cannot be encoded at all.
"""

from __future__ import annotations

import pytest

from apps.items.models import Item
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "body",
    [
        '[{"external_id": "a\\u0000b", "kind": "text", "text": "x"}]',
        '[{"external_id": "a", "kind": "text", "text": "\\udb4d"}]',
        '[{"external_id": "a", "kind": "text", "text": "x", "metadata": {"\\u0000": 1}}]',
    ],
    ids=["nul", "lone-surrogate", "nul-in-a-key"],
)
def test_unstorable_text_is_a_400(client, body):
    study = StudyFactory()
    client.force_login(study.created_by)
    response = client.post(
        f"/api/studies/{study.pk}/items/bulk/", data=body, content_type="application/json"
    )
    assert response.status_code == 400
    assert "NUL" in response.json()["detail"]
    assert not Item.objects.exists()


def test_emoji_and_other_text_pass(client):
    study = StudyFactory()
    client.force_login(study.created_by)
    body = '[{"external_id": "a\\ud83d\\ude00", "kind": "text", "text": "caf\\u00e9 \\t"}]'
    response = client.post(
        f"/api/studies/{study.pk}/items/bulk/", data=body, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    assert Item.objects.get().external_id == "a\N{GRINNING FACE}"
