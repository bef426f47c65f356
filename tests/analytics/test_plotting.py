"""Plot geometry: map labels that never collide, sparkline notes, readable heatmap text."""

from __future__ import annotations

from xml.etree import ElementTree

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.plotting import (
    LABEL_H,
    LABEL_W,
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
