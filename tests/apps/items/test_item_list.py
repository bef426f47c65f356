"""The items list: search, filters, order, pages and the item page's previous / next."""

from __future__ import annotations

import uuid

import pytest
from django.urls import reverse

from analytics.models import Flag
from apps.annotations.models import Annotation, Assignment
from apps.annotations.services import annotations_submit
from apps.items.models import Item
from apps.studies.models import Label
from tests.factories import running_study


def number_items(study, *, prefix: str, digits: int, text: str, every: int) -> list[Item]:
    """Name the study's items ``<prefix>00``, ``<prefix>01``, ... in queue order; every
    ``every``-th item's text is ``text``, the others' "sentence <n>"."""
    items = list(study.items.order_by("position", "id"))
    for n, item in enumerate(items):
        item.external_id = f"{prefix}{n:0{digits}d}"
        item.text = text if n % every == 0 else f"sentence {n}"
    Item.objects.bulk_update(items, ["external_id", "text"])
    return items


@pytest.fixture
def listed(db):
    """Twelve items, three annotators: item-00 disputed, item-01 agreed, the rest unanswered."""
    study, annotators = running_study(n_items=12, n_annotators=3)
    items = number_items(study, prefix="item-", digits=2, text="a red kite", every=4)
    question = study.questions.get()
    negative, positive = (
        Label.objects.get(question=question, key=k) for k in ("negative", "positive")
    )
    answers = {(0, 0): negative, (0, 1): positive, (1, 0): positive, (1, 1): positive}
    for (i, a), label in answers.items():
        assignment = Assignment.objects.get(item=items[i], annotator=annotators[a], round=1)
        annotations_submit(
            annotator=annotators[a],
            assignment=assignment,
            answers={question: label.key},
            idempotency_key=uuid.uuid4(),
        )
    Flag.objects.create(
        study=study, question=question, annotator=annotators[0], indicator="kappa", reason="low"
    )
    return study, items


def _ids(client, study, **query) -> list[str]:
    page = client.get(reverse("items:list", args=[study.pk]), query)
    assert page.status_code == 200
    return [item.external_id for item in page.context["rows"]]


def test_search_filters_and_order(client, listed, django_assert_max_num_queries):
    study, _items = listed
    client.force_login(study.created_by)
    with django_assert_max_num_queries(8):
        assert _ids(client, study) == [f"item-{n:02d}" for n in range(12)]
    assert _ids(client, study, q="ITEM-1") == ["item-10", "item-11"]
    assert _ids(client, study, q="red kite") == ["item-00", "item-04", "item-08"]
    assert _ids(client, study, disputed="on") == ["item-00"]
    assert _ids(client, study, flagged="on") == ["item-00", "item-01"]
    assert _ids(client, study, min_answers=1) == ["item-00", "item-01"]
    assert _ids(client, study, max_answers=0)[:2] == ["item-02", "item-03"]
    assert _ids(client, study, kind="image") == []
    assert _ids(client, study, sort="-external_id")[0] == "item-11"
    assert _ids(client, study, sort="-answers")[:2] == ["item-00", "item-01"]


def test_bad_filters_answer_400_with_the_field_named(client, listed):
    study, _ = listed
    client.force_login(study.created_by)
    page = client.get(reverse("items:list", args=[study.pk]), {"min_answers": 3, "max_answers": 1})
    assert page.status_code == 400
    assert "Must be at least the lower bound." in page.content.decode()
    assert client.get(reverse("items:list", args=[study.pk]), {"sort": "x"}).status_code == 400


def test_pages_jump_and_keep_the_filters(client, listed, monkeypatch):
    from apps.items import views

    monkeypatch.setattr(views, "ITEMS_PAGE_SIZE", 5)
    study, _ = listed
    client.force_login(study.created_by)
    html = client.get(reverse("items:list", args=[study.pk]), {"q": "item", "page": 2})
    html = html.content.decode()
    assert "of 3" in html
    assert 'value="2"' in html
    assert "?q=item&amp;page=3" in html
    assert "?q=item&amp;page=1" in html
    assert '<input type="hidden" name="q" value="item">' in html  # the jump form keeps them
    assert _ids(client, study, q="item", page=3) == ["item-10", "item-11"]


def test_previous_and_next_follow_the_filtered_list(client, listed, django_assert_max_num_queries):
    study, items = listed
    client.force_login(study.created_by)
    url = reverse("items:detail", args=[study.pk, items[4].pk])
    with django_assert_max_num_queries(16):
        html = client.get(url, {"q": "red kite"}).content.decode()
    detail = lambda n: reverse("items:detail", args=[study.pk, items[n].pk])  # noqa: E731
    assert f'{detail(0)}?q=red+kite" rel="prev"' in html
    assert f'{detail(8)}?q=red+kite" rel="next"' in html
    assert "2 of 3" in html
    html = client.get(reverse("items:detail", args=[study.pk, items[0].pk])).content.decode()
    assert 'rel="prev"' not in html
    assert f'{detail(1)}" rel="next"' in html


def test_the_list_is_for_managers_only(client, listed, outsider):
    study, _ = listed
    annotator = study.memberships.filter(role="annotator").first().user
    for user, status in ((annotator, 403), (outsider, 404)):
        client.force_login(user)
        assert client.get(reverse("items:list", args=[study.pk])).status_code == status


def test_disputed_means_what_adjudication_means(client, listed):
    """One definition on both pages: two counted answers (first round, annotators not excluded)
    of one question with different labels. An excluded annotator's answer no longer disputes
    an item in the list (about 20 items against adjudication's 1 on a real study)."""
    from analytics.services import annotator_exclude
    from apps.adjudication.selectors import curated_aggregates, disputed_items

    study, _items = listed
    client.force_login(study.created_by)
    question = study.questions.get()

    def adjudication() -> list[int]:
        found = curated_aggregates(question=question)  # as the adjudication page reads
        return [row["item_id"] for row in disputed_items(aggregates=found)]

    disputed = Item.objects.get(study=study, external_id="item-00")
    assert _ids(client, study, disputed="on") == ["item-00"]
    assert adjudication() == [disputed.pk]
    dissenter = Annotation.objects.get(item=disputed, current_revision__label__key="negative")
    annotator_exclude(
        study=study, annotator=dissenter.annotator, by=study.created_by, reason="random"
    )
    assert adjudication() == []
    assert _ids(client, study, disputed="on") == []
    page = client.get(reverse("items:list", args=[study.pk])).content.decode()
    assert "excluded annotators" in page  # the definition is stated where the filter is
