"""Plot geometry: map labels that never collide, sparkline notes, readable heatmap text."""

from __future__ import annotations

from xml.etree import ElementTree

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.indicators import json_ready
from analytics.plotting import (
    AXIS_TEXT,
    HEATMAP_MOST,
    HEATMAP_SIZE,
    LABEL_H,
    LABEL_W,
    MAP_LABELS_MOST,
    MAP_SIZE,
    colours,
    heatmap_layout,
    map_layout,
    place_labels,
    spark_note,
    sparkline,
)


def _boxes(x, y, texts, labels):
    boxes = []
    for xi, yi, text, label in zip(x, y, texts, labels, strict=True):
        w = len(text) * LABEL_W
        ax = xi + float(label["dx"])
        left = ax - {"start": 0, "middle": w / 2, "end": w}[label["anchor"]]
        bottom = yi + float(label["dy"]) + 4
        boxes.append((left, bottom - LABEL_H, left + w, bottom))
    return boxes


def _overlap(a, b) -> bool:
    return a[0] < b[2] - 0.2 and b[0] < a[2] - 0.2 and a[1] < b[3] - 0.2 and b[1] < a[3] - 0.2


def test_close_points_get_labels_that_do_not_overlap():
    # the demo's case: three annotators who agree sit on top of each other
    x = np.array([100.0, 101.0, 99.0, 230.0])
    y = np.array([180.0, 186.0, 192.0, 150.0])
    texts = ["ann2", "sim-1", "sim-2", "ann3"]
    labels = place_labels(x, y, texts, width=MAP_SIZE, height=MAP_SIZE)
    boxes = _boxes(x, y, texts, labels)
    assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert labels[3] == {"dx": "8.0", "dy": "4.5", "anchor": "start", "leader": ""}  # alone


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(30, 250), st.floats(30, 330), st.text("abcdefgh-12", min_size=1, max_size=14)
        ),
        min_size=1,
        max_size=12,
    )
)
def test_labels_never_overlap_each_other_and_stay_inside(points):
    x = np.array([p[0] for p in points])
    y = np.array([p[1] for p in points])
    texts = [p[2] for p in points]
    boxes = _boxes(x, y, texts, place_labels(x, y, texts, width=MAP_SIZE, height=MAP_SIZE))
    for i, a in enumerate(boxes):
        free = not any(_overlap(a, b) for b in boxes[i + 1 :])
        inside = a[0] >= 2 and a[1] >= 2 and a[2] <= MAP_SIZE - 2 and a[3] <= MAP_SIZE - 2
        # only a label with no free spot at all may fall back (never with a dozen labels here)
        assert free
        assert inside


def _first_free_spots(x, y, texts, *, width, height):
    """The greedy placement written plainly, one box against another: what
    :func:`place_labels` computes with array comparisons (128 labels took 130-220 ms here
    this way, 11 ms in arrays)."""
    from analytics.plotting import _LABEL_SPOTS

    def box(i, dx, dy, anchor):
        w = len(texts[i]) * LABEL_W
        left = x[i] + dx - {"start": 0.0, "middle": w / 2, "end": w}[anchor]
        return (left, y[i] + dy - LABEL_H + 4, left + w, y[i] + dy + 4)

    markers = [(x[i] - 6, y[i] - 7, x[i] + 6, y[i] + 6) for i in range(len(texts))]
    taken, chosen = [], {}

    def fits(b, i):
        inside = b[0] >= 2 and b[1] >= 2 and b[2] <= width - 2 and b[3] <= height - 2
        others = [m for j, m in enumerate(markers) if j != i] + taken
        return inside and not any(
            b[0] < o[2] and o[0] < b[2] and b[1] < o[3] and o[1] < b[3] for o in others
        )

    for i in np.argsort(y, kind="stable"):
        k = next((k for k, s in enumerate(_LABEL_SPOTS) if fits(box(i, *s[:3]), i)), 0)
        taken.append(box(i, *_LABEL_SPOTS[k][:3]))
        chosen[int(i)] = k
    return [chosen[i] for i in range(len(texts))]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, MAP_SIZE), st.floats(0, MAP_SIZE), st.integers(1, 14)),
        min_size=1,
        max_size=60,
    )
)
def test_labels_take_the_spots_a_plain_greedy_placement_gives(points):
    x = np.array([p[0] for p in points])
    y = np.array([p[1] for p in points])
    _same_spots_as_plain_greedy(x, y, ["w" * p[2] for p in points])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("n", "spread"), [(40, 90.0), (128, MAP_SIZE)])
def test_crowded_labels_take_the_spots_a_plain_greedy_placement_gives(n, spread, seed):
    # crowded: most labels need a spot above, below, on a diagonal or off with a leader
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(0, spread, n), rng.uniform(0, spread, n)
    _same_spots_as_plain_greedy(x, y, [f"annotator-{k}" for k in range(n)])


def _same_spots_as_plain_greedy(x, y, texts):
    from analytics.plotting import _LABEL_SPOTS, px

    labels = place_labels(x, y, texts, width=MAP_SIZE, height=MAP_SIZE)
    expected = _first_free_spots(x, y, texts, width=MAP_SIZE, height=MAP_SIZE)
    spots = [_LABEL_SPOTS[k] for k in expected]
    assert [(lab["dx"], lab["dy"], lab["anchor"]) for lab in labels] == [
        (px(dx), px(dy), anchor) for dx, dy, anchor, _ in spots
    ]
    assert [bool(lab["leader"]) for lab in labels] == [leader for *_, leader in spots]


def test_map_layout_passes_the_label_positions():
    plot = map_layout([[0.0, 0.0], [0.01, 0.0], [1.0, 1.0]], ["a", "b", "c"], {2})
    assert {"dx", "dy", "anchor", "leader"} <= set(plot["points"][0])


def test_a_sparkline_needs_two_points_and_says_so():
    assert sparkline([0.4]) == ""
    assert spark_note([None, 0.4]) == "one point so far"
    assert spark_note([]) == "no points yet"
    assert spark_note([0.3, 0.4]) == ""
    assert sparkline([0.3, 0.4]) != ""


def cells_of(plot: dict) -> list[ElementTree.Element]:
    """The heatmap's cell elements (its markup parsed as SVG: it must be well formed)."""
    return list(ElementTree.fromstring(f"<svg>{plot['cells']}</svg>"))


def titles_of(plot: dict) -> list[str]:
    return [element.findtext("title") for element in cells_of(plot) if element.tag == "rect"]


def test_heatmap_cells_print_values_only_where_the_text_stays_readable():
    matrix = [[1.0] * 12 for _ in range(12)]
    small = heatmap_layout(matrix, names=[f"a{i}" for i in range(12)], order=list(range(12)))
    big = heatmap_layout(matrix[:4], names=list("abcd"), order=list(range(4)))
    assert [element.tag for element in cells_of(small)] == ["rect"] * 144  # 40 px cells
    texts = [element.text for element in cells_of(big) if element.tag == "text"]
    assert texts == ["1.00"] * 16


def test_heatmap_cells_sit_on_their_pair_s_row_and_column_with_their_colour():
    matrix = [[1.0, 0.0], [None, 0.5]]
    plot = heatmap_layout(matrix, names=["a", "b"], order=[1, 0], size=100)
    rects = [element.attrib for element in cells_of(plot) if element.tag == "rect"]
    assert [(r["x"], r["y"], r["width"]) for r in rects] == [
        ("0.0", "0.0", "50.0"),
        ("50.0", "0.0", "50.0"),
        ("0.0", "50.0", "50.0"),
        ("50.0", "50.0", "50.0"),
    ]
    # order [1, 0]: row 0 is b (b x b 0.5, b x a unknown), row 1 is a (a x b 0.0, a x a 1.0)
    assert [r["fill"] for r in rects] == colours([0.5, None, 0.0, 1.0])
    assert [label["name"] for label in plot["labels"]] == ["b", "a"]


def test_heatmap_names_are_escaped_in_the_cells_markup():
    plot = heatmap_layout([[1.0, 0.2], [0.2, 1.0]], names=["<b>&", 'x"y'], order=[0, 1])
    assert "<b>" not in plot["cells"]
    assert titles_of(plot)[1] == '<b>& × x"y: kappa 0.20'


def test_heatmap_tooltips_state_the_evidence_each_pair_shares():
    """Each cell's tooltip names the pair, its figure and what the pair has in common (the
    stored overlap matrix), so a bare 1.00 from two shared items reads as such."""
    matrix = [[1.0, 0.4, None], [0.4, 1.0, 0.2], [None, 0.2, 1.0]]
    overlap = [[30, 2, 0], [2, 25, 1200], [0, 1200, 40]]
    plot = heatmap_layout(
        matrix, names=list("abc"), order=[2, 0, 1], overlap=overlap, unit="trace steps"
    )
    titles = titles_of(plot)
    assert titles[0] == "c × c: kappa 1.00; 40 trace steps"
    assert "a × b: kappa 0.40; 2 shared trace steps" in titles
    assert "c × b: kappa 0.20; 1,200 shared trace steps" in titles
    assert "c × a: kappa –; 0 shared trace steps" in titles
    bare = heatmap_layout(matrix, names=list("abc"), order=[0, 1, 2])
    assert titles_of(bare)[1] == "a × b: kappa 0.40"


def test_a_crowd_s_heatmap_shows_the_flagged_and_the_best_evidenced_annotators_and_says_so():
    """512 annotators drew 262,144 cells (about 30 MB of SVG on every plot push; 1,048,576 at
    1,024) in 480 px, where a cell is under a pixel. Past ``HEATMAP_MOST`` rows the heatmap
    shows the flagged annotators, then those with the most answers, in the layout's order,
    and tells how many of how many it shows."""
    m = 300
    rng = np.random.default_rng(3)
    matrix = np.where(rng.random((m, m)) < 0.05, 0.5, np.nan)
    own = rng.permutation(m) + 1  # answers of each annotator, all distinct
    overlap = np.diag(own).tolist()
    order = rng.permutation(m).tolist()
    flagged = {int(k) for k in np.argsort(own)[:3]}  # the three with the fewest answers
    plot = heatmap_layout(
        json_ready(matrix),
        names=[f"a{k}" for k in range(m)],
        order=order,
        overlap=overlap,
        flagged=flagged,
    )
    shown = [int(label["name"][1:]) for label in plot["labels"]]
    assert len(shown) == HEATMAP_MOST
    best = set(np.argsort(own)[::-1][: HEATMAP_MOST - 3].tolist())
    assert set(shown) == flagged | best
    assert shown == [k for k in order if k in set(shown)]  # the layout's order kept
    assert len(cells_of(plot)) == HEATMAP_MOST**2
    assert plot["of"] == m
    small = heatmap_layout([[1.0]], names=["a"], order=[0])
    assert small["of"] == 1
    assert len(small["labels"]) == 1


@pytest.mark.parametrize("n", [1, 12, 26, 27, 40, 60])
def test_heatmap_axis_names_are_written_only_as_close_as_their_height(n):
    """Axis names are 18 units high: with thinner rows every step-th is written (the first
    always), never two closer than that; each cell's tooltip still names its pair."""
    plot = heatmap_layout(
        [[1.0] * n for _ in range(n)], names=[f"a{k}" for k in range(n)], order=list(range(n))
    )
    written = [float(label["pos"]) for label in plot["labels"] if label["written"]]
    assert plot["labels"][0]["written"]
    gaps = np.diff(written)
    assert (gaps >= AXIS_TEXT - 1e-9).all()
    assert len(written) >= min(n, int(HEATMAP_SIZE // (2 * AXIS_TEXT)))


def test_a_crowd_s_map_names_the_flagged_and_the_outlying_annotators_only():
    """512 names in a 360-unit map are a blot (and their placement took 97 ms a plot push,
    417 at 1,024). Past ``MAP_LABELS_MOST`` points the flagged annotators are named, then
    those farthest from the crowd's median; every point is drawn and keeps its tooltip."""
    m = 200
    rng = np.random.default_rng(5)
    mds = rng.normal(size=(m, 2))
    mds[7] = (40.0, 0.0)  # far out
    flagged = {3, 11}
    plot = map_layout(mds.tolist(), [f"a{k}" for k in range(m)], flagged)
    assert len(plot["points"]) == m
    named = {int(p["name"][1:]) for p in plot["points"] if p["labelled"]}
    assert len(named) == MAP_LABELS_MOST
    assert flagged | {7} <= named
    far = np.linalg.norm(mds - np.median(mds, axis=0), axis=1)
    assert min(far[sorted(named - flagged)]) >= max(far[sorted(set(range(m)) - named)])
    small = map_layout([[0.0, 0.0], [0.01, 0.0], [1.0, 1.0]], ["a", "b", "c"], set())
    assert all(p["labelled"] for p in small["points"])
