"""AAD and AAD-RMSE (Du & Hoste 2025) against the paper and brute-force loops."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analytics.metrics import (
    EMOTION_COORDINATES,
    aad,
    aad_histogram,
    aad_rmse,
    aad_rmse_per_item,
    annotator_mean_aad,
    intra_annotator_aad,
    pairwise_aad,
)

SEEDS = Path(__file__).resolve().parents[3].parent / "shared" / "seeds"
EMOTIONS = sorted(EMOTION_COORDINATES)
CODES = {code: EMOTION_COORDINATES[name] for code, name in enumerate(EMOTIONS)}


def test_figure_5_examples():
    # positive = 1, neutral = 0, negative = -1; Wan et al. give both 0.67, AAD-RMSE 0.77 / 1.26
    assert round(aad_rmse([1, 1, 1, 0, 0]), 2) == 0.77
    assert round(aad_rmse([1, 1, 1, 0, -1]), 2) == 1.26
    assert aad_rmse([1, 1, 1, 0, 0]) == pytest.approx(np.sqrt(6 / 10))
    assert aad_rmse([1, 1, 1, 0, -1]) == pytest.approx(np.sqrt(16 / 10))


def test_emotion_coordinates_match_table_8_of_the_seed_paper():
    seed = next(iter(SEEDS.glob("004_*.txt")), None) if SEEDS.is_dir() else None
    if seed is None:
        pytest.skip("seed papers (shared/seeds) not beside the repository")
    rows = re.findall(r"^\| (\w+) +\| ([\d.]+) +\| ([\d.]+) +\|", seed.read_text(), re.MULTILINE)
    table = {name: (float(v), float(a)) for name, v, a in rows if name in EMOTION_COORDINATES}
    assert table == EMOTION_COORDINATES


def _brute_rmse(values, coordinates=None):
    points = [np.atleast_1d(coordinates[v] if coordinates else v) for v in values if v == v]
    pairs = list(itertools.combinations(points, 2))
    if not pairs:
        return np.nan
    return np.sqrt(np.mean([np.sum((np.asarray(a) - b) ** 2) for a, b in pairs]))


def _random_ratings(rng, shape, n_values, p_missing):
    ratings = rng.integers(0, n_values, shape).astype(float)
    ratings[rng.random(shape) < p_missing] = np.nan
    return ratings


@pytest.mark.parametrize("use_coordinates", [False, True])
def test_rmse_per_item_equals_pair_loop(use_coordinates):
    rng = np.random.default_rng(0)
    ratings = _random_ratings(rng, (6, 50), 7, p_missing=0.5)
    coordinates = CODES if use_coordinates else None
    got = aad_rmse_per_item(ratings, coordinates=coordinates)
    expected = [_brute_rmse(ratings[:, i], coordinates) for i in range(50)]
    np.testing.assert_allclose(got, expected, atol=1e-12)
    assert aad_rmse(ratings[:, 0], coordinates=coordinates) == pytest.approx(
        expected[0], nan_ok=True
    )


def test_aad_scale_and_coordinates():
    np.testing.assert_array_equal(aad([1, 5, np.nan], [3, 5, 2]), [2, 0, np.nan])
    joy, disgust = EMOTION_COORDINATES["joy"], EMOTION_COORDINATES["disgust"]
    got = aad([EMOTIONS.index("joy")], [EMOTIONS.index("disgust")], coordinates=CODES)
    assert got[0] == pytest.approx(np.hypot(joy[0] - disgust[0], joy[1] - disgust[1]))


def _pair_distances(ratings, k, l, coordinates=None):
    both = ~np.isnan(ratings[k]) & ~np.isnan(ratings[l])
    if not both.any():
        return np.empty(0)
    return aad(ratings[k, both], ratings[l, both], coordinates=coordinates)


@pytest.mark.parametrize("use_coordinates", [False, True])
def test_pairwise_views_equal_pair_loops(use_coordinates):
    rng = np.random.default_rng(1)
    ratings = _random_ratings(rng, (5, 40), 7, p_missing=0.5)
    ratings[4, 2:] = np.nan
    coordinates = CODES if use_coordinates else None
    mean = pairwise_aad(ratings, coordinates=coordinates, min_overlap=3)
    diffs, counts = aad_histogram(ratings, coordinates=coordinates)
    pooled = annotator_mean_aad(ratings, coordinates=coordinates)
    for k, l in itertools.permutations(range(5), 2):
        d = _pair_distances(ratings, k, l, coordinates)
        assert mean[k, l] == pytest.approx(d.mean() if d.size >= 3 else np.nan, nan_ok=True)
        expected = [np.sum(np.isclose(d, x)) for x in diffs]
        np.testing.assert_array_equal(counts[k, l], expected)
    for k in range(5):
        d = np.concatenate(
            [_pair_distances(ratings, k, l, coordinates) for l in range(5) if l != k]
        )
        assert pooled[k] == pytest.approx(d.mean())
    np.testing.assert_array_equal(np.diag(mean), 0.0)


def test_histogram_shares_like_table_2():
    ratings = np.array([[1, 2, 3, 5, 4], [1, 3, 1, 5, 4]], dtype=float)
    diffs, counts = aad_histogram(ratings)
    shares = dict(zip(diffs, counts[0, 1] / counts[0, 1].sum(), strict=True))
    assert shares[0.0] == pytest.approx(0.6)
    assert shares[1.0] == pytest.approx(0.2)
    assert shares[2.0] == pytest.approx(0.2)


def test_intra_annotator_aad():
    first = np.array([[1, 2, 3, np.nan], [2, 2, 2, 2], [np.nan, np.nan, 1, 1]])
    second = np.array([[1, 4, 3, 5], [3, 1, 2, 2], [1, 1, np.nan, np.nan]])
    got = intra_annotator_aad(first, second)
    np.testing.assert_allclose(got[:2], [2 / 3, 0.5])
    assert np.isnan(got[2])


def test_degenerate_and_bad_input():
    assert np.isnan(aad_rmse([1, np.nan, np.nan]))
    assert aad_rmse([2, 2, 2]) == 0.0
    assert np.isnan(aad_rmse_per_item([[1, np.nan], [np.nan, 2]])).all()
    assert np.isnan(annotator_mean_aad([[1, np.nan], [np.nan, 2]])).all()
    with pytest.raises(ValueError, match=r"label 9\.0 has no coordinates"):
        aad([9], [0], coordinates=CODES)
    with pytest.raises(ValueError, match="coordinates is empty"):
        aad([1], [0], coordinates={})
    with pytest.raises(ValueError, match="same dimension"):
        aad([1], [0], coordinates={0: (1, 2), 1: (1,)})
    with pytest.raises(ValueError, match=r"same shape; got \(2,\) and \(3,\)"):
        aad([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="empty"):
        aad([], [])
    with pytest.raises(ValueError, match="must be 1-D"):
        aad_rmse([[1, 2]])
    with pytest.raises(ValueError, match="must be 2-D"):
        aad_rmse_per_item([1, 2, 3])
    with pytest.raises(ValueError, match="first and second must have the same shape"):
        intra_annotator_aad([[1, 2]], [[1, 2, 3]])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-2, 2), min_size=2, max_size=12), st.integers(-5, 5))
def test_rmse_symmetric_in_annotators_and_shift_invariant(values, shift):
    values = np.array(values, dtype=float)
    rmse = aad_rmse(values)
    assert rmse >= 0
    assert aad_rmse(values[::-1]) == pytest.approx(rmse)
    assert aad_rmse(values + shift) == pytest.approx(rmse)
    assert rmse == pytest.approx(_brute_rmse(values))
