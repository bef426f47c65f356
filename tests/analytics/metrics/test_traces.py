"""Trace agreement metrics: hand-computed SDA, published ICC values, outside oracles, properties."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats
from sklearn.metrics import f1_score, matthews_corrcoef

from analytics.metrics.traces import (
    ICC_KINDS,
    ccc,
    ccc_matrix,
    cronbach_alpha,
    cronbach_alpha_matrix,
    fit_monotonic_cubic,
    icc,
    icc_all,
    icc_matrix,
    kappa_sda,
    kappa_sda_from_counts,
    kappa_sda_matrix,
    kendall_tau,
    kendall_tau_matrix,
    mse,
    mse_matrix,
    pearson,
    pearson_matrix,
    sagr,
    sagr_matrix,
    sda,
    sda_from_counts,
    sda_matrix,
    sign_coincidence_counts,
    sign_coincidence_matrix,
    spearman,
    spearman_matrix,
    trend_agreement,
)

# Shrout & Fleiss (1979), Table 2: 6 targets (rows) rated by 4 judges (columns).
SHROUT_FLEISS = np.array(
    [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]],
    dtype=float,
)
# Their Table 4 (two decimals).
SHROUT_FLEISS_ICC = {"1,1": 0.17, "2,1": 0.29, "3,1": 0.71, "1,k": 0.44, "2,k": 0.62, "3,k": 0.91}


def random_traces(seed: int, n_annotators: int = 5, n_samples: int = 80) -> np.ndarray:
    """Slider-like traces: random walks rounded to 0.1, so ties and flat steps are common."""
    rng = np.random.default_rng(seed)
    return np.round(np.cumsum(rng.normal(scale=0.2, size=(n_annotators, n_samples)), axis=1), 1)


# Integer-valued traces (ties included) keep strictly increasing maps exact in floating point.
int_traces = st.lists(st.integers(-20, 20), min_size=2, max_size=40)


@st.composite
def trace_pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    x = draw(int_traces)
    y = draw(st.lists(st.integers(-20, 20), min_size=len(x), max_size=len(x)))
    return np.array(x, dtype=float), np.array(y, dtype=float)


trace_matrices = st.integers(2, 6).flatmap(
    lambda m: st.integers(2, 30).flatmap(
        lambda n: arrays(np.float64, (m, n), elements=st.integers(-5, 5).map(float))
    )
)


def slow_kappa_sda(x: np.ndarray, y: np.ndarray, tol: float) -> float:
    """Booth & Narayanan's kappa_SDA written step by step from the paper's formula."""

    def sgn(d: float) -> int:
        return 0 if abs(d) <= tol else (1 if d > 0 else -1)

    sx = [sgn(x[t] - x[t - 1]) for t in range(1, len(x))]
    sy = [sgn(y[t] - y[t - 1]) for t in range(1, len(y))]
    steps = len(sx)
    p_o = sum(a == b for a, b in zip(sx, sy, strict=True)) / steps
    p_e = sum(sx.count(i) * sy.count(i) for i in (-1, 0, 1)) / steps**2
    return np.nan if p_e == 1 else 1 - (1 - p_o) / (1 - p_e)


# ------------------------------------------------------------------ SDA: hand-computed


def test_sda_and_kappa_hand_computed_with_ties():
    # x steps: +, 0, +, -   y steps: +, 0, 0, -   -> 3 of 4 steps agree
    x, y = [0, 1, 1, 3, 2], [0, 2, 2, 2, 1]
    assert sda(x, y) == pytest.approx(0.5)
    # p_o = 3/4; x signs (-,0,+) = (1,1,2), y = (1,2,1); p_e = (1 + 2 + 2) / 16
    assert kappa_sda(x, y) == pytest.approx((0.75 - 5 / 16) / (1 - 5 / 16))
    assert kappa_sda(x, y) == pytest.approx(7 / 11)


def test_zero_difference_is_its_own_sign():
    # flat vs rising disagrees; flat vs flat agrees
    assert sda([0, 0, 0], [0, 1, 1]) == pytest.approx(0.0)
    assert sda([0, 0], [0, 1]) == -1.0


def test_tol_dead_band_including_its_bound():
    x, y = [0.0, 0.004, 0.1, 0.1], [0.0, 0.0, 0.2, 0.2]
    assert sda(x, y) == pytest.approx(1 / 3)  # the 0.004 jitter is a rise
    assert sda(x, y, tol=0.005) == 1.0  # ... or no change
    assert sda([0.0, 0.5], [0.0, 0.0], tol=0.5) == 1.0  # abs(d) == tol counts as 0
    assert sda([0.0, 0.5], [0.0, 0.0], tol=0.25) == -1.0


def test_kappa_nan_when_chance_agreement_is_one():
    assert np.isnan(kappa_sda([3, 3, 3, 3], [1, 1, 1, 1]))  # both constant: documented nan
    assert sda([3, 3, 3, 3], [1, 1, 1, 1]) == 1.0
    assert np.isnan(kappa_sda([0, 1, 2], [5, 6, 9]))  # both strictly rising: p_e = 1 too
    assert kappa_sda([1, 1, 1], [0, 1, 2]) == 0.0  # p_o = p_e = 0


def test_published_formula_not_the_authors_off_by_one():
    # The authors' script prepends a zero difference; with N-1 steps this pair disagrees
    # everywhere, with their extra (0, 0) step it would agree on 1 of N.
    assert sda([0, 1, 2], [2, 1, 0]) == -1.0


@pytest.mark.parametrize("tol", [0.0, 0.1, 0.25])
@pytest.mark.parametrize("seed", range(6))
def test_kappa_sda_matches_step_by_step_implementation(seed, tol):
    x, y = random_traces(seed, n_annotators=2)
    expected = slow_kappa_sda(x, y, tol)
    assert kappa_sda(x, y, tol=tol) == pytest.approx(expected, abs=1e-12)


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("x", "y", "message"),
    [
        ([0.0, np.nan, 1.0], [0.0, 1.0, 2.0], "nan"),
        ([0.0, 1.0, 2.0], [0.0, 1.0], "same length"),
        ([[0.0, 1.0], [1.0, 2.0]], [[0.0, 1.0], [1.0, 2.0]], "1-D"),
        ([1.0], [2.0], "at least 2 samples"),
        ([0.0, np.inf], [0.0, 1.0], "infinite"),
        (["a", "b"], [0.0, 1.0], "numeric"),
    ],
)
def test_pair_functions_reject_bad_input(x, y, message):
    for func in (sda, kappa_sda, sign_coincidence_counts, pearson, ccc, kendall_tau):
        with pytest.raises(ValueError, match=message):
            func(x, y)


def test_matrix_functions_reject_bad_input():
    for func in (sda_matrix, kappa_sda_matrix, pearson_matrix, ccc_matrix, icc_matrix):
        with pytest.raises(ValueError, match="2-D"):
            func([0.0, 1.0, 2.0])
        with pytest.raises(ValueError, match="annotator 1, sample 2"):
            func([[0.0, 1.0, 2.0], [0.0, 1.0, np.nan]])
        with pytest.raises(ValueError, match="at least 2 samples"):
            func([[0.0], [1.0]])


def test_option_validation():
    with pytest.raises(ValueError, match="tol"):
        sda([0, 1], [0, 1], tol=-0.1)
    with pytest.raises(ValueError, match="tol"):
        kappa_sda_matrix([[0, 1], [0, 1]], tol=np.nan)
    with pytest.raises(ValueError, match="kind"):
        icc([[0, 1, 2], [1, 2, 2]], kind="4,1")
    with pytest.raises(ValueError, match="at least 2 annotators"):
        cronbach_alpha([[0, 1, 2]])
    with pytest.raises(ValueError, match="midpoint"):
        sagr([0, 1], [0, 1], midpoint=np.nan)
    with pytest.raises(ValueError, match=r"\(\.\.\., 3, 3\)"):
        sda_from_counts([[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="non-negative"):
        kappa_sda_from_counts(-np.ones((3, 3)))


# ------------------------------------------------------------------ sufficient statistics


def test_counts_are_the_sufficient_statistic():
    x, y = random_traces(3, n_annotators=2, n_samples=50)
    counts = sign_coincidence_counts(x, y, tol=0.1)
    assert counts.sum() == x.size - 1
    assert sda_from_counts(counts) == sda(x, y, tol=0.1)
    assert kappa_sda_from_counts(counts) == kappa_sda(x, y, tol=0.1)
    # rows = signs of x, columns = signs of y
    assert counts.sum(axis=1).tolist() == [
        int(np.sum(np.diff(x) < -0.1)),
        int(np.sum(np.abs(np.diff(x)) <= 0.1)),
        int(np.sum(np.diff(x) > 0.1)),
    ]


@settings(deadline=None)
@given(trace_pairs(), st.data())
def test_counts_of_chunks_overlapping_one_sample_add_up(pair, data):
    x, y = pair
    cut = data.draw(st.integers(1, x.size - 1))
    head = sign_coincidence_counts(x[: cut + 1], y[: cut + 1])
    tail = sign_coincidence_counts(x[cut:], y[cut:]) if cut < x.size - 1 else 0
    np.testing.assert_array_equal(head + tail, sign_coincidence_counts(x, y))


def test_pooled_counts_over_items():
    items = [random_traces(seed, n_annotators=3, n_samples=40) for seed in range(4)]
    pooled = sum(sign_coincidence_matrix(item) for item in items)
    concatenated_steps = np.hstack([np.diff(item, axis=1) for item in items])
    # pooled kappa = kappa of all steps of all items taken together
    manual = np.hstack([np.zeros((3, 1)), np.cumsum(concatenated_steps, axis=1)])
    np.testing.assert_allclose(kappa_sda_from_counts(pooled), kappa_sda_matrix(manual))


# ------------------------------------------------------------------ hypothesis properties


@settings(deadline=None)
@given(trace_pairs(), st.sampled_from([0.0, 1.0, 2.5]))
def test_symmetry_and_bounds(pair, tol):
    x, y = pair
    value = sda(x, y, tol=tol)
    assert -1.0 <= value <= 1.0
    assert value == sda(y, x, tol=tol)
    kappa = kappa_sda(x, y, tol=tol)
    if not np.isnan(kappa):
        assert kappa <= 1.0 + 1e-12
        assert kappa == pytest.approx(kappa_sda(y, x, tol=tol))


@settings(deadline=None)
@given(trace_pairs())
def test_sda_invariant_to_strictly_increasing_distortion(pair):
    x, y = pair
    for distort in (np.exp, lambda v: v**3 + v, lambda v: 0.2 * v + 7):
        assert sda(distort(x), y) == sda(x, y)
        assert kappa_sda(x, distort(y)) == pytest.approx(kappa_sda(x, y), nan_ok=True)
    assert sda(-x, -y) == sda(x, y)  # mirroring both keeps every agreement


@settings(max_examples=50, deadline=None)
@given(trace_matrices, st.sampled_from([0.0, 1.0]))
def test_sda_matrices_equal_the_pairwise_functions(traces, tol):
    sda_m, kappa_m = sda_matrix(traces, tol=tol), kappa_sda_matrix(traces, tol=tol)
    for k, l in itertools.product(range(traces.shape[0]), repeat=2):
        assert sda_m[k, l] == pytest.approx(sda(traces[k], traces[l], tol=tol))
        assert kappa_m[k, l] == pytest.approx(kappa_sda(traces[k], traces[l], tol=tol), nan_ok=True)


@settings(max_examples=30, deadline=None)
@given(trace_matrices)
def test_comparator_matrices_equal_the_pairwise_functions(traces):
    pairs = [
        (pearson_matrix, pearson),
        (spearman_matrix, spearman),
        (kendall_tau_matrix, kendall_tau),
        (ccc_matrix, ccc),
        (mse_matrix, mse),
        (sagr_matrix, sagr),
    ]
    for matrix_func, pair_func in pairs:
        matrix = matrix_func(traces)
        for k, l in itertools.product(range(traces.shape[0]), repeat=2):
            expected = pair_func(traces[k], traces[l])
            assert matrix[k, l] == pytest.approx(expected, nan_ok=True, abs=1e-12)


# ------------------------------------------------------------------ outside oracles


@pytest.mark.parametrize("seed", range(4))
def test_correlations_match_scipy(seed):
    traces = random_traces(seed)
    for k, l in itertools.combinations(range(traces.shape[0]), 2):
        x, y = traces[k], traces[l]
        assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)
        assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
        assert kendall_tau(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)


def test_correlations_of_a_constant_trace_are_nan():
    x, y = [0.1] * 30, np.linspace(0, 1, 30)  # 0.1 * 30 does not average back to 0.1 exactly
    for func in (pearson, spearman, kendall_tau):
        assert np.isnan(func(x, y))
    matrix = pearson_matrix([x, y, y[::-1]])
    assert np.isnan(matrix[0]).all()
    assert matrix[1, 2] == pytest.approx(-1.0)


@pytest.mark.parametrize("seed", range(4))
def test_ccc_mse_sagr_match_their_definitions(seed):
    traces = random_traces(seed) + np.arange(5)[:, None] * 0.1  # different means
    for k, l in itertools.combinations(range(traces.shape[0]), 2):
        x, y = traces[k], traces[l]
        sxy = np.mean((x - x.mean()) * (y - y.mean()))
        lin = 2 * sxy / (x.var() + y.var() + (x.mean() - y.mean()) ** 2)
        assert ccc(x, y) == pytest.approx(lin, abs=1e-12)
        assert mse(x, y) == pytest.approx(np.mean((x - y) ** 2), abs=1e-12)
        assert sagr(x, y, midpoint=0.1) == pytest.approx(
            np.mean(np.sign(x - 0.1) == np.sign(y - 0.1))
        )


def test_ccc_never_exceeds_pearson_in_absolute_value():
    traces = random_traces(7, n_annotators=6)
    assert np.all(np.abs(ccc_matrix(traces)) <= np.abs(pearson_matrix(traces)) + 1e-12)


def test_ccc_of_constants():
    assert ccc([2, 2, 2], [3, 3, 3]) == 0.0
    assert np.isnan(ccc([2, 2, 2], [2, 2, 2]))


def test_icc_reproduces_shrout_fleiss_table():
    values = icc_all(SHROUT_FLEISS.T)  # judges x targets
    assert set(values) == set(ICC_KINDS)
    for kind, published in SHROUT_FLEISS_ICC.items():
        assert round(values[kind], 2) == published, kind
        assert icc(SHROUT_FLEISS.T, kind=kind) == values[kind]
    assert icc(SHROUT_FLEISS.T) == values["1,k"]  # ICC(k) of the SDA paper by default


def _anova_iccs(table: np.ndarray) -> dict[str, float]:
    """Shrout & Fleiss ICCs from an explicit two-way ANOVA of a targets x judges table."""
    n, k = table.shape
    grand = table.mean()
    ss_total = np.sum((table - grand) ** 2)
    ss_targets = k * np.sum((table.mean(axis=1) - grand) ** 2)
    ss_judges = n * np.sum((table.mean(axis=0) - grand) ** 2)
    bms = ss_targets / (n - 1)
    wms = (ss_total - ss_targets) / (n * (k - 1))
    jms = ss_judges / (k - 1)
    ems = (ss_total - ss_targets - ss_judges) / ((n - 1) * (k - 1))
    return {
        "1,1": (bms - wms) / (bms + (k - 1) * wms),
        "2,1": (bms - ems) / (bms + (k - 1) * ems + k * (jms - ems) / n),
        "3,1": (bms - ems) / (bms + (k - 1) * ems),
        "1,k": (bms - wms) / bms,
        "2,k": (bms - ems) / (bms + (jms - ems) / n),
        "3,k": (bms - ems) / bms,
    }


@pytest.mark.parametrize("seed", range(4))
def test_icc_from_moments_equals_explicit_anova(seed):
    traces = random_traces(seed) + np.arange(5)[:, None] * 0.3  # judges with offsets
    expected = _anova_iccs(traces.T)
    for kind, value in icc_all(traces).items():
        assert value == pytest.approx(expected[kind], abs=1e-12)
    for kind in ICC_KINDS:
        matrix = icc_matrix(traces, kind=kind)
        for k, l in itertools.combinations(range(traces.shape[0]), 2):
            assert matrix[k, l] == pytest.approx(icc(traces[[k, l]], kind=kind), abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_cronbach_alpha_definition_and_identity_with_icc_3k(seed):
    traces = random_traces(seed)
    k = traces.shape[0]
    direct = k / (k - 1) * (1 - traces.var(axis=1, ddof=1).sum() / traces.sum(axis=0).var(ddof=1))
    assert cronbach_alpha(traces) == pytest.approx(direct, abs=1e-12)
    assert cronbach_alpha(traces) == pytest.approx(icc(traces, kind="3,k"), abs=1e-12)
    np.testing.assert_allclose(
        cronbach_alpha_matrix(traces), icc_matrix(traces, kind="3,k"), atol=1e-12
    )
    for a, b in itertools.combinations(range(k), 2):
        assert cronbach_alpha_matrix(traces)[a, b] == pytest.approx(
            cronbach_alpha(traces[[a, b]]), abs=1e-12
        )
    assert cronbach_alpha(SHROUT_FLEISS.T) == pytest.approx(icc(SHROUT_FLEISS.T, kind="3,k"))


@pytest.mark.parametrize("seed", range(4))
def test_trend_agreement_matches_sklearn(seed):
    trace, truth = random_traces(seed, n_annotators=2, n_samples=120)
    result = trend_agreement(trace, truth, tol=0.05)
    d_trace, d_truth = np.diff(trace), np.diff(truth)
    s_trace = np.where(np.abs(d_trace) <= 0.05, 0, np.sign(d_trace))
    s_truth = np.where(np.abs(d_truth) <= 0.05, 0, np.sign(d_truth))
    moving = (s_trace != 0) & (s_truth != 0)
    assert result.n_moving == moving.sum()
    assert result.sign_agreement == pytest.approx(np.mean(s_trace == s_truth))
    assert result.f1 == pytest.approx(f1_score(s_truth[moving], s_trace[moving], pos_label=1))
    assert result.mcc == pytest.approx(matthews_corrcoef(s_truth[moving], s_trace[moving]))


def test_trend_agreement_undefined_parts_are_nan():
    result = trend_agreement([0, 0, 0, 0], [0, 1, 2, 3])
    assert result.n_moving == 0
    assert np.isnan(result.f1)
    assert np.isnan(result.mcc)
    assert result.sign_agreement == 0.0


def test_fit_monotonic_cubic_recovers_a_cubic_and_its_shape():
    rng = np.random.default_rng(0)
    truth = rng.uniform(0, 1, 300)
    coefficients = [1.5, -2.0, 1.2, 0.1]  # p'(z) = 4.5 z^2 - 4 z + 1.2 > 0: increasing
    annotation = np.polyval(coefficients, truth) + rng.normal(scale=0.01, size=truth.size)
    fit = fit_monotonic_cubic(annotation, truth)
    reference = np.polynomial.Polynomial.fit(truth, annotation, 3).convert().coef[::-1]
    np.testing.assert_allclose(fit.coefficients, reference, atol=1e-9)
    assert fit.coefficients == pytest.approx(coefficients, abs=0.1)
    residual = annotation - np.polyval(fit.coefficients, truth)
    assert fit.r2 == pytest.approx(1 - residual.var() / annotation.var())
    assert fit.increasing

    bending = np.polyval([-3.0, 2.0, 1.0, 0.0], truth)  # p'(1) = -9 + 4 + 1 < 0
    assert not fit_monotonic_cubic(bending, truth).increasing
    linear = 0.1 + 0.8 * truth + rng.normal(scale=0.01, size=truth.size)
    inverse = fit_monotonic_cubic(linear, truth, direction="annotation_to_truth")
    # it maps annotations back to the truth: z = (x - 0.1) / 0.8
    np.testing.assert_allclose(np.polyval(inverse.coefficients, linear), truth, atol=0.05)
    assert inverse.increasing


def test_fit_monotonic_cubic_validation():
    with pytest.raises(ValueError, match="4 distinct"):
        fit_monotonic_cubic([0, 1, 2, 3, 4], [0, 0, 1, 1, 2])
    with pytest.raises(ValueError, match="direction"):
        fit_monotonic_cubic([0, 1, 2, 3, 4], [0, 1, 2, 3, 4], direction="sideways")
