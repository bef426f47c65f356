"""Error bars in the dashboard's plots: every indicator with stored intervals gets a
dot-and-whisker chart of its annotators (#11)."""

from __future__ import annotations

import re

from django.urls import reverse

from analytics.models import QualitySnapshot
from analytics.plotting import interval_plot
from tests.analytics.test_intervals import answered  # noqa: F401  (fixture)


def test_interval_plot_geometry():
    plot = interval_plot(
        [[0.5, 0.3, 0.7, 40], None, [-0.1, -0.3, 0.1, 40]],
        ["ann", "ben", "cy"],
        floor=0.2,
        flagged={2},
        fmt="{:.2f}",
    )
    assert [row["name"] for row in plot["rows"]] == ["ann", "cy"]  # no interval: no row
    ann, cy = plot["rows"]
    x = lambda v: float(v)  # noqa: E731
    assert x(ann["low"]) < x(ann["x"]) < x(ann["high"])
    assert x(cy["high"]) < x(plot["floor"]) < x(ann["low"])  # the floor between them
    assert cy["flagged"]
    assert not ann["flagged"]
    assert ann["title"] == "ann: 0.50 [0.30, 0.70]; 40 items"
    assert x(plot["ticks"][0]["x"]) <= x(cy["low"])
    assert interval_plot([None, None], ["a", "b"], floor=None, flagged=set(), fmt="{}") is None


def test_dashboard_draws_error_bars_for_every_interval_indicator(answered, client):  # noqa: F811
    study, question, _ = answered
    stored = QualitySnapshot.objects.filter(question=question).latest("updated_at").indicators
    client.force_login(study.created_by)
    html = client.get(reverse("analytics:dashboard", args=[study.pk])).content.decode()
    card = html[html.index('id="quality-intervals"') :]
    card = card[: card.index("</section>")]
    for key, label in (("kappa", "Kappa with others"), ("aad", "Mean AAD")):
        assert f"<h3>{label}</h3>" in card
        assert len(stored["intervals"][key]) == 5
    assert len(re.findall(r'class="errorbar', card)) >= 10
    assert card.count('class="interval-floor"') == 1  # kappa's floor 0.2 (AAD has none)
