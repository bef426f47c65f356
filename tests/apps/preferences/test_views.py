"""Pages of pairwise preferences: who sees what, the no-JS and htmx paths, the downloads."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.db.models.signals import post_init
from django.urls import reverse

from apps.items.models import Item
from apps.preferences import views
from apps.preferences.models import Judgement
from apps.preferences.services import pair_next
from tests.apps.preferences.conftest import answer_all, by_level, cycle_maker, make_pairwise_study
from tests.factories import UserFactory


def compare_url(setup) -> str:
    return reverse("preferences:compare", args=[setup.study.pk, setup.question.key])


def results_url(setup, name: str = "results") -> str:
    return reverse(f"preferences:{name}", args=[setup.study.pk, setup.question.key])


def form_fields(html: str) -> dict[str, str]:
    """The hidden inputs of the comparison form."""
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', html))


@pytest.mark.parametrize(
    ("who", "compare_status", "results_status"),
    [("annotator", 200, 403), ("manager", 403, 200), ("outsider", 404, 404)],
)
def test_access_matrix(client, pairwise, who, compare_status, results_status):
    user = {
        "annotator": pairwise.annotators[0],
        "manager": pairwise.manager,
        "outsider": UserFactory(manager=True),
    }[who]
    client.force_login(user)
    assert client.get(compare_url(pairwise)).status_code == compare_status
    assert client.get(results_url(pairwise)).status_code == results_status
    assert client.get(results_url(pairwise, "scores_csv")).status_code == results_status
    assert client.get(results_url(pairwise, "judgements_csv")).status_code == results_status


def test_anonymous_users_are_sent_to_sign_in(client, pairwise):
    for url in (compare_url(pairwise), results_url(pairwise)):
        response = client.get(url)
        assert response.status_code == 302
        assert response.url.startswith(reverse("login"))


def test_unknown_or_non_pairwise_question_is_404(client, pairwise):
    client.force_login(pairwise.annotators[0])
    url = reverse("preferences:compare", args=[pairwise.study.pk, "nope"])
    assert client.get(url).status_code == 404


def test_page_shows_the_pending_pair_and_keys(client, pairwise):
    annotator = pairwise.annotators[0]
    client.force_login(annotator)
    html = client.get(compare_url(pairwise)).content.decode()
    a, b = pair_next(question=pairwise.question, annotator=annotator).pending
    items = {item.pk: item for item in pairwise.items}
    assert html.index(items[a].text) < html.index(items[b].text)  # A on the left
    assert 'aria-keyshortcuts="ArrowLeft"' in html
    assert 'value="0"' in html  # weak preferences: an Equal button
    assert "judgements left" in html
    assert "js/preferences.js" in html


def test_no_js_post_redirects_and_stores(client, pairwise):
    annotator = pairwise.annotators[0]
    client.force_login(annotator)
    fields = form_fields(client.get(compare_url(pairwise)).content.decode())
    response = client.post(compare_url(pairwise), {**fields, "outcome": "1"})
    assert response.status_code == 302
    assert response.url == compare_url(pairwise)
    judgement = Judgement.objects.get()
    assert judgement.outcome == 1
    assert judgement.time_spent_ms is not None
    # The same form sent twice (a double click) stores nothing more.
    assert client.post(compare_url(pairwise), {**fields, "outcome": "1"}).status_code == 302
    assert Judgement.objects.count() == 1


def test_htmx_post_returns_the_next_pair_only(client, pairwise):
    annotator = pairwise.annotators[0]
    client.force_login(annotator)
    fields = form_fields(client.get(compare_url(pairwise)).content.decode())
    response = client.post(
        compare_url(pairwise), {**fields, "outcome": "-1"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html
    assert "data-compare-form" in html
    assert form_fields(html)["ticket"] != fields["ticket"]
    assert Judgement.objects.get().outcome == -1


def test_a_stale_form_is_refused_with_a_message(client, pairwise):
    annotator = pairwise.annotators[0]
    client.force_login(annotator)
    stale = form_fields(client.get(compare_url(pairwise)).content.decode())
    client.post(compare_url(pairwise), {**stale, "outcome": "1"})
    stale["idempotency_key"] = "00000000-0000-4000-8000-000000000000"  # another tab's answer
    response = client.post(
        compare_url(pairwise), {**stale, "outcome": "1"}, headers={"HX-Request": "true"}
    )
    assert response.status_code == 422
    assert "not the one waiting for your answer" in response.content.decode()
    assert Judgement.objects.count() == 1


def test_finished_ranking_and_results_page(client, pairwise):
    annotator = pairwise.annotators[0]
    levels = {item.pk: k for k, item in enumerate(pairwise.items)}
    answer_all(pairwise.question, annotator, by_level(levels))
    client.force_login(annotator)
    assert "ranking is complete" in client.get(compare_url(pairwise)).content.decode()

    client.force_login(pairwise.manager)
    html = client.get(results_url(pairwise)).content.decode()
    assert annotator.username in html
    assert "regularised" in html  # the best item never lost: not strongly connected
    assert "± " in html
    assert ">Ties<" in html
    assert "own share of ties" in html  # says which chance level the kappa uses

    response = client.get(results_url(pairwise, "scores_csv"))
    assert response.streaming
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][:4] == ["item_id", "external_id", "rank", "bt_log_strength"]
    assert [row[2] for row in rows[1:]] == ["1", "2", "3", "4", "5"]

    response = client.get(results_url(pairwise, "judgements_csv"))
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 1 + Judgement.objects.count()
    assert rows[1][0] == annotator.username


def test_results_warn_about_annotators_below_the_kappa_floor(client, db, pinned_pair_seed):
    setup = make_pairwise_study(n_items=7, settings={"calibration_triplets": 5})
    careless = setup.annotators[0]
    answer_all(setup.question, careless, cycle_maker())
    client.force_login(setup.manager)
    html = client.get(results_url(setup)).content.decode()
    assert 'data-testid="kappa-warning"' in html
    assert f"{careless.username} (κ = " in html
    assert "Stopped early" in html  # adaptive sessions stop; older ones asked every pair


def test_media_items_are_shown_by_kind(client, pairwise):
    Item.objects.filter(study=pairwise.study).update(
        kind=Item.Kind.IMAGE, url="https://example.org/picture.png"
    )
    client.force_login(pairwise.annotators[0])
    html = client.get(compare_url(pairwise)).content.decode()
    assert html.count('<img class="item__media" src="https://example.org/picture.png"') == 2
    assert 'alt="Image A' in html
    assert 'alt="Image B' in html


def test_home_offers_the_comparison_page_not_the_item_queue(client, pairwise):
    client.force_login(pairwise.annotators[0])
    html = client.get(reverse("studies:home")).content.decode()
    assert reverse("preferences:compare", args=[pairwise.study.pk, "fluency"]) in html
    assert reverse("annotations:queue", args=[pairwise.study.pk]) not in html


def test_the_results_page_lists_the_best_items_and_the_downloads_every_item(
    client, api_client, pairwise, monkeypatch
):
    # no items x items matrix is built any more, so no question is too large for scores; the
    # page shows the best SCORE_TABLE_ROWS rows, the CSV and the API every item
    levels = {item.pk: k for k, item in enumerate(pairwise.items)}
    answer_all(pairwise.question, pairwise.annotators[0], by_level(levels))
    monkeypatch.setattr(views, "SCORE_TABLE_ROWS", 3)
    client.force_login(pairwise.manager)
    html = client.get(results_url(pairwise)).content.decode()
    assert "The best 3 of 5 items" in html
    assert html.split('id="scores-heading"')[1].count('<th scope="row">') == 3
    response = client.get(results_url(pairwise, "scores_csv"))
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert len(rows) == 5
    api_client.force_authenticate(pairwise.manager)
    url = f"/api/studies/{pairwise.study.pk}/pairs/{pairwise.question.key}/scores/"
    data = api_client.get(url).json()
    assert len(data["items"]) == 5
    assert data["bt_se_exact"] is True


def test_the_scores_build_items_only_for_the_rows_the_page_shows(client, pairwise, monkeypatch):
    # 100,000 Item instances cost seconds: the score table reads ids, the page loads its rows
    levels = {item.pk: k for k, item in enumerate(pairwise.items)}
    answer_all(pairwise.question, pairwise.annotators[0], by_level(levels))
    monkeypatch.setattr(views, "SCORE_TABLE_ROWS", 2)
    built: list[Item] = []

    def count(sender, instance, **kwargs):
        built.append(instance)

    post_init.connect(count, sender=Item)
    try:
        client.force_login(pairwise.manager)
        html = client.get(results_url(pairwise)).content.decode()
        csv_lines = b"".join(client.get(results_url(pairwise, "scores_csv")).streaming_content)
    finally:
        post_init.disconnect(count, sender=Item)
    best = sorted(pairwise.items, key=lambda item: levels[item.pk])[::-1][:2]
    assert sorted(item.pk for item in built) == sorted(item.pk for item in best)
    assert all(item.external_id in html for item in best)
    assert csv_lines.count(b"\n") == 1 + len(pairwise.items)


def test_results_show_the_share_of_a_answers_and_a_left_bias(client, db, pinned_pair_seed):
    # the sides are drawn from the session seed: pinned, so the careful annotator's share of
    # A answers cannot fall under p < 0.01 by chance (it did once in a CI run, 1 in about 100)
    setup = make_pairwise_study(n_items=12, settings={"calibration_triplets": 0, "audit_rate": 0.0})
    always_left, careful = setup.annotators
    asked = answer_all(setup.question, always_left, lambda a, b: 1)  # a is shown as A
    levels = {item.pk: k for k, item in enumerate(setup.items)}
    answer_all(setup.question, careful, by_level(levels))
    client.force_login(setup.manager)
    html = client.get(results_url(setup)).content.decode()
    shares = re.findall(r'data-testid="a-share">(\d+)% <span class="muted">of (\d+)</span>', html)
    names = sorted(a.username for a in setup.annotators)
    by_name = dict(zip(names, shares, strict=True))
    assert by_name[always_left.username] == ("100", str(asked))
    assert html.count(">Left bias</span>") == 1


def test_home_card_counts_judgements_as_the_comparison_page(client, pairwise):
    annotator = pairwise.annotators[0]
    client.force_login(annotator)
    home = reverse("studies:home")
    progress = re.compile(r'class="progress__text">(\d+) of (\d+) done')

    def counts(url):
        return progress.search(client.get(url).content.decode()).groups()

    before = counts(home)  # before the first visit: the page's first estimate
    assert counts(compare_url(pairwise)) == before
    assert before[0] == "0"
    for outcome in ("1", "-1"):
        fields = form_fields(client.get(compare_url(pairwise)).content.decode())
        client.post(compare_url(pairwise), {**fields, "outcome": outcome})
    assert counts(home) == counts(compare_url(pairwise))
    assert counts(home)[0] == "2"


def test_the_results_page_and_the_scores_api_read_the_judgements_once(client, api_client, pairwise):
    # 100,000 judgements cost 0.3-0.5 s to read: the reports and the score table share them
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    levels = {item.pk: k for k, item in enumerate(pairwise.items)}
    for annotator in pairwise.annotators:
        answer_all(pairwise.question, annotator, by_level(levels))
    client.force_login(pairwise.manager)
    api_client.force_authenticate(pairwise.manager)
    scores = f"/api/studies/{pairwise.study.pk}/pairs/{pairwise.question.key}/scores/"
    for get in (lambda: client.get(results_url(pairwise)), lambda: api_client.get(scores)):
        with CaptureQueriesContext(connection) as queries:
            assert get().status_code == 200
        reads = [q["sql"] for q in queries if 'FROM "preferences_judgement"' in q["sql"]]
        assert len(reads) == 1, reads


def test_the_results_page_shows_a_bounded_number_of_annotator_columns(
    client, pairwise, monkeypatch
):
    # 200 annotators x 500 rows made 100,000 cells: the page shows the count scores of the
    # first SCORE_TABLE_ANNOTATORS annotators, the CSV every annotator's
    levels = {item.pk: k for k, item in enumerate(pairwise.items)}
    for annotator in pairwise.annotators:
        answer_all(pairwise.question, annotator, by_level(levels))
    first, second = sorted(a.get_username() for a in pairwise.annotators)
    client.force_login(pairwise.manager)
    html = client.get(results_url(pairwise)).content.decode()
    scores = html.split('id="scores-heading"')[1]
    assert f"{first} <span" in scores
    assert f"{second} <span" in scores
    assert "scores-annotators" not in scores
    monkeypatch.setattr(views, "SCORE_TABLE_ANNOTATORS", 1)
    html = client.get(results_url(pairwise)).content.decode()
    scores = html.split('id="scores-heading"')[1]
    assert f"{first} <span" in scores
    assert f"{second} <span" not in scores
    assert "Count scores of the first 1 of 2 annotators" in scores
    body = scores.split("<tbody>")[1].split("</tbody>")[0]
    assert body.count('<td class="num">') == 5 * (2 + 1)  # rank, BT and one annotator a row
    header = b"".join(client.get(results_url(pairwise, "scores_csv")).streaming_content)
    assert f"count_{second}".encode() in header.splitlines()[0]
