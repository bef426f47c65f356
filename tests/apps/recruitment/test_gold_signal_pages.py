"""The gold-signal list (API and the recruitment page) is paged in the database: a page costs
a bounded number of queries and builds only the rows it shows, whatever the number of
signals, and the pages together list exactly the items with a stored signal, in item order."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest
from django.db.models.signals import post_init
from django.urls import reverse
from rest_framework.test import APIClient

from apps.continuous.models import GoldSignal
from apps.items.models import Item
from apps.recruitment.services import item_gold_signal_set
from apps.recruitment.views import SIGNALS_PAGE_SIZE
from apps.studies.models import Study
from tests.apps.recruitment.setup import recruiting_study

pytestmark = pytest.mark.django_db

N_SIGNALS = 40


@pytest.fixture
def many_signals() -> tuple[Study, list[str]]:
    """A study of 46 items: 40 with a stored signal, one naming a signal that was never
    stored (not a gold trace), the others without; returns the gold items' ids in item order."""
    study, _ = recruiting_study(n_regular=N_SIGNALS + 2)
    items = list(study.items.filter(external_id__startswith="item-").order_by("position"))
    for n, item in enumerate(items[:N_SIGNALS]):
        item_gold_signal_set(item=item, values=np.linspace(0, 1, 3 + n), rate_hz=2)
    dangling = items[N_SIGNALS]
    dangling.metadata = {"signal": "never-stored"}
    dangling.save(update_fields=["metadata"])
    return study, [item.external_id for item in items[:N_SIGNALS]]


@pytest.fixture
def built() -> Iterator[Counter[str]]:
    """How many Item and GoldSignal instances the code under test builds."""
    counts: Counter[str] = Counter()

    def count(sender: type, **kwargs: object) -> None:
        counts[sender.__name__] += 1

    for model in (Item, GoldSignal):
        post_init.connect(count, sender=model, weak=False)
    yield counts
    for model in (Item, GoldSignal):
        post_init.disconnect(count, sender=model)


def test_an_api_page_reads_and_builds_only_its_rows(
    many_signals, built, django_assert_max_num_queries
) -> None:
    study, gold = many_signals
    client = APIClient()
    client.force_authenticate(study.created_by)
    url = f"/api/studies/{study.pk}/gold-signals/"
    built.clear()
    with django_assert_max_num_queries(6):  # study and role, count, the page's items, signals
        page = client.get(url, {"limit": 5, "offset": 10}).json()
    assert built["Item"] <= 5, built  # the page's items, not all 41 that name a signal
    assert built["GoldSignal"] <= 5, built
    assert page["count"] == N_SIGNALS
    assert [row["item"] for row in page["results"]] == gold[10:15]
    assert [row["n_samples"] for row in page["results"]] == [13, 14, 15, 16, 17]
    assert page["results"][0] | {"key": "?"} == {
        "item": gold[10],
        "key": "?",
        "rate_hz": 2.0,
        "n_samples": 13,
        "duration": 6.0,
        "description": "",
    }
    listed, offset = [], 0
    while offset < N_SIGNALS:  # the pages together: every gold item once, in item order
        listed += client.get(url, {"limit": 7, "offset": offset}).json()["results"]
        offset += 7
    assert [row["item"] for row in listed] == gold
    keys = {item.external_id: item.metadata.get("signal") for item in study.items.all()}
    assert all(row["key"] == keys[row["item"]] for row in listed)


def test_the_recruitment_page_shows_one_page_of_signals(client, many_signals, built) -> None:
    study, gold = many_signals
    client.force_login(study.created_by)
    url = reverse("recruitment:manage", args=[study.pk])
    pages = -(-N_SIGNALS // SIGNALS_PAGE_SIZE)
    assert pages >= 2
    built.clear()
    last = client.get(url, {"signals": pages})
    rest = gold[(pages - 1) * SIGNALS_PAGE_SIZE :]
    assert built["GoldSignal"] == len(rest), built  # the page's signals, no more
    assert built["Item"] <= len(rest), built
    assert [item.external_id for item, _ in last.context["signals"]] == rest
    html = last.content.decode()
    assert f"Page {pages} of {pages}" in html
    assert f"?signals={pages - 1}#signals-heading" in html  # back to the page before
    first = client.get(url)
    assert [item.external_id for item, _ in first.context["signals"]] == gold[:SIGNALS_PAGE_SIZE]
    signal = GoldSignal.objects.get(key=first.context["signals"][0][1].key)
    assert f'<td class="num">{signal.n_samples}</td>' in first.content.decode()
