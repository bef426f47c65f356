"""API page size: ``?limit=`` cannot ask for more than the pagination's ceiling."""

from __future__ import annotations

import pytest

from annotate_site.api_pagination import CappedLimitOffsetPagination
from apps.items.models import Item
from tests.factories import StudyFactory

pytestmark = pytest.mark.django_db

MAX = CappedLimitOffsetPagination.max_limit


def test_a_huge_limit_gets_one_capped_page_and_a_next_link(client):
    study = StudyFactory()
    Item.objects.bulk_create(
        Item(study=study, external_id=f"i{n}", text="t", position=n) for n in range(MAX + 5)
    )
    client.force_login(study.created_by)
    page = client.get(f"/api/studies/{study.pk}/items/", {"limit": 1_000_000}).json()
    assert page["count"] == MAX + 5
    assert len(page["results"]) == MAX
    assert f"limit={MAX}" in page["next"]
    rest = client.get(page["next"]).json()
    assert len(rest["results"]) == 5
    default = client.get(f"/api/studies/{study.pk}/items/").json()
    assert len(default["results"]) == 100  # PAGE_SIZE when no limit is asked
