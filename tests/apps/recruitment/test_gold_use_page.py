"""The Recruitment page's form for checks and training items (issue #13): the manager marks a
gold trace (an item with a true signal) or a calibration pair as a hidden check, a training
item or neither, with a reason, and sees the study's gold items with their use. The form
writes through the service the gold-answers API uses; bad input comes back as field errors
(422, nothing written); only the study's managers may post."""

from __future__ import annotations

import numpy as np
import pytest
from django.urls import reverse

from apps.items.models import Item
from apps.recruitment.models import GoldAnswer
from apps.recruitment.services import item_gold_signal_set
from apps.studies.models import Membership, Question
from apps.studies.services import membership_add, question_create
from tests.apps.recruitment.setup import CHECK_ANSWER, recruiting_study
from tests.factories import StudyFactory, UserFactory

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


@pytest.fixture
def study(client):
    """A recruiting study with a label question (two label checks, two training items), a
    trace question and a pairwise question; ``item-0`` has a true signal; manager signed in."""
    study, _ = recruiting_study()
    question_create(study=study, kind=Question.Kind.CONTINUOUS, key="tension", prompt="Tension?")
    question_create(study=study, kind=Question.Kind.PAIRWISE, key="better", prompt="Better?")
    item = Item.objects.get(study=study, external_id="item-0")
    item_gold_signal_set(item=item, values=np.linspace(0, 1, 11), rate_hz=1.0)
    client.force_login(study.created_by)
    return study


def url(study) -> str:
    return reverse("recruitment:gold_use", args=[study.pk])


def gold(study, external_id: str, key: str) -> GoldAnswer | None:
    return GoldAnswer.objects.filter(
        item__study=study, item__external_id=external_id, question__key=key
    ).first()


def test_the_page_lists_the_gold_items_with_their_use_and_has_the_form(client, study):
    page = client.get(reverse("recruitment:manage", args=[study.pk])).content.decode()
    table = page[
        page.index('id="gold-items"') : page.index("</table>", page.index('id="gold-items"'))
    ]
    assert table.count("<tr>") == 1 + 4  # header, two training items, two checks
    assert "check-1" in table
    assert "Attention check (hidden)" in table
    assert "Training (with feedback)" in table
    assert f'action="{url(study)}"' in page
    assert f'hx-post="{url(study)}"' in page


def test_a_trace_item_with_a_signal_becomes_a_training_item_with_a_reason(client, study):
    response = client.post(
        url(study),
        {"item": "item-0", "question": "tension", "use": "training", "reason": "it rises"},
    )
    assert response.status_code == 302
    stored = gold(study, "item-0", "tension")
    signal = {"signal": f"item-{stored.item_id}"}  # the item's uploaded signal
    assert (stored.use, stored.reason, stored.value) == ("training", "it rises", signal)
    page = client.get(response.url).content.decode()
    assert "item-0, tension: training." in page  # the flash message


def test_with_htmx_the_section_is_swapped_and_a_check_becomes_training(client, study):
    response = client.post(
        url(study),
        {"item": "check-0", "question": "sentiment", "use": "training", "reason": "awful"},
        headers=HTMX,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="card card--form" id="gold-uses"')
    assert 'hx-swap-oob="innerHTML"' in html  # the message, out of band
    stored = gold(study, "check-0", "sentiment")
    assert (stored.use, stored.reason, stored.value) == (
        "training",
        "awful",
        {"label": CHECK_ANSWER},
    )


def test_none_makes_a_gold_item_regular_again(client, study):
    response = client.post(
        url(study), {"item": "check-1", "question": "sentiment", "use": "none"}, headers=HTMX
    )
    assert response.status_code == 200
    assert gold(study, "check-1", "sentiment") is None
    assert "check-1 is no gold item of sentiment any more." in response.content.decode()


def test_a_calibration_pair_is_set_with_its_known_order(client, study):
    response = client.post(
        url(study),
        {
            "item": "item-1",
            "question": "better",
            "use": "training",
            "versus": "item-2",
            "outcome": "-1",
            "reason": "item-2 is clearer",
        },
    )
    assert response.status_code == 302
    assert gold(study, "item-1", "better").value == {"versus": "item-2", "outcome": -1}
    again = client.post(url(study), {"item": "item-1", "question": "better", "use": "training"})
    assert again.status_code == 302  # no pair given: the known pair stays
    assert gold(study, "item-1", "better").value == {"versus": "item-2", "outcome": -1}


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"item": "nope", "question": "tension", "use": "check"}, "item", "No item 'nope'"),
        ({"item": "item-1", "question": "tension", "use": "check"}, "item", "signal first"),
        ({"item": "item-0", "question": "tension", "use": "sometimes"}, "use", "valid choice"),
        ({"item": "item-0", "question": "nope", "use": "check"}, "question", "valid choice"),
        (
            {"item": "item-0", "question": "tension", "use": "check", "versus": "item-1"},
            "versus",
            "Only a pairwise question",
        ),
        (
            {"item": "item-1", "question": "better", "use": "training", "versus": "item-9"},
            "outcome",
            "known order",
        ),
        (
            {
                "item": "item-1",
                "question": "better",
                "use": "training",
                "versus": "zz",
                "outcome": "1",
            },
            "versus",
            "'zz' is not an item",
        ),
        ({"item": "item-1", "question": "better", "use": "training"}, "versus", "no known answer"),
        ({"item": "item-1", "question": "sentiment", "use": "check"}, None, "no known answer"),
    ],
)
def test_bad_input_gives_field_errors_and_writes_nothing(client, study, data, field, message):
    before = list(GoldAnswer.objects.order_by("pk").values_list("pk", "use", "value"))
    for headers in ({}, HTMX):  # the whole page without JavaScript, the section with htmx
        response = client.post(url(study), data, headers=headers)
        assert response.status_code == 422
        form = response.context["gold_form"]
        errors = form.errors.get(field if field else "__all__", [])
        assert any(message in error for error in errors), form.errors
        assert message in response.content.decode().replace("&#x27;", "'")
    assert list(GoldAnswer.objects.order_by("pk").values_list("pk", "use", "value")) == before


def test_only_the_studys_managers_may_post(client, study):
    data = {"item": "check-0", "question": "sentiment", "use": "none"}
    annotator, outsider = UserFactory(), UserFactory()
    membership_add(study=study, user=annotator, role=Membership.Role.ANNOTATOR)
    client.force_login(annotator)
    assert client.post(url(study), data).status_code == 403
    client.force_login(outsider)
    assert client.post(url(study), data).status_code == 404
    client.force_login(StudyFactory().created_by)  # a manager of another study
    assert client.post(url(study), data).status_code == 404
    client.logout()
    assert client.post(url(study), data).status_code == 302  # to the sign-in page
    assert client.get(url(study)).status_code in (302, 405)
    assert gold(study, "check-0", "sentiment").use == "check"
