"""Error bars in the dashboard's plots: every indicator with stored intervals gets a
dot-and-whisker chart of its annotators (#11)."""

from __future__ import annotations

import re

import numpy as np
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
    ticks = [x(tick["x"]) for tick in plot["ticks"]]
    assert x(plot["left"]) <= ticks[0] < x(cy["x"])  # round ticks inside the axis, the data's
    assert x(ann["x"]) < ticks[-1]
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


def test_interval_plot_ticks_fall_on_round_values():
    """Issue #27: the ticks fell at -0.19, 0.01, 0.20 (a linspace over the data's range)."""
    plot = interval_plot(
        [[0.0, -0.19, 0.2, 40], [0.1, 0.01, 0.18, 40]],
        ["ann", "ben"],
        floor=None,
        flagged=set(),
        fmt="{:.2f}",
    )
    labels = [tick["label"] for tick in plot["ticks"]]
    assert labels == ["-0.2", "-0.1", "0.0", "0.1", "0.2"]
    xs = [float(tick["x"]) for tick in plot["ticks"]]
    steps = np.diff(xs)
    assert np.allclose(steps, steps[0], atol=0.2)  # evenly spaced (px rounded to 0.1)
    assert float(plot["left"]) <= xs[0]
    assert xs[-1] <= 320  # inside the axis


def test_ticks_print_once_in_a_coarse_format():
    plot = interval_plot([[0.9, 0.86, 0.94, 40]], ["ann"], floor=0.9, flagged=set(), fmt="{:.0%}")
    labels = [tick["label"] for tick in plot["ticks"]]
    assert len(labels) == len(set(labels))
    assert all(float(label.rstrip("%")) % 1 == 0 for label in labels)
