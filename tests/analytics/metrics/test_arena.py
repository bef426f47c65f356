"""Arena ranking: strengths against a scipy.optimize maximum-likelihood fit written here, the
prompt bootstrap against refits of explicitly resampled votes and a coverage simulation,
hypothesis properties, and the active-sampling rule on constructed arenas."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize
from scipy.special import log_expit

from analytics.metrics import preferences
from analytics.metrics.arena import arena_ranking, next_model_pair


def simulate(
    rng: np.random.Generator,
    theta: np.ndarray,
    *,
    n_prompts: int,
    votes_per_prompt: int = 3,
    tie_rate: float = 0.1,
    n_annotators: int = 5,
) -> dict[str, np.ndarray]:
    """Independent Bradley-Terry votes on uniform random pairs, a share of them ties."""
    k = theta.size
    prompt = np.repeat(np.arange(n_prompts), votes_per_prompt)
    a = rng.integers(0, k, prompt.size)
    b = (a + rng.integers(1, k, prompt.size)) % k
    p = 1 / (1 + np.exp(-(theta[a] - theta[b])))
    outcome = np.where(rng.random(prompt.size) < p, 1, -1)
    outcome[rng.random(prompt.size) < tie_rate] = 0
    annotator = rng.integers(0, n_annotators, prompt.size)
    return {
        "prompt": prompt,
        "model_a": a,
        "model_b": b,
        "outcome": outcome,
        "annotator": annotator,
    }


def scipy_fit(votes: dict[str, np.ndarray], k: int, weights: dict, alpha: float) -> np.ndarray:
    """The weighted, penalised Bradley-Terry maximum-likelihood fit, vote by vote, by BFGS."""
    a, b, o = votes["model_a"], votes["model_b"], votes["outcome"]
    w = np.array([weights[x] for x in votes["annotator"].tolist()])
    s = (1 + o) / 2  # a tie is half a win of each

    def negative(theta: np.ndarray) -> float:
        d = theta[a] - theta[b]
        gauge = 0.5 * theta.sum() ** 2  # pins the sum when alpha = 0; 0 at the optimum
        return float(
            -(w * (s * log_expit(d) + (1 - s) * log_expit(-d))).sum()
            + 0.5 * alpha * theta @ theta
            + gauge
        )

    result = minimize(negative, np.zeros(k), method="BFGS", options={"gtol": 1e-10})
    return result.x - result.x.mean()


@pytest.mark.parametrize("alpha", [0.0, 1e-3, 0.5])
def test_strengths_match_a_scipy_maximum_likelihood_fit(alpha: float) -> None:
    rng = np.random.default_rng(3)
    theta = np.array([0.6, 0.2, 0.0, -0.3, -0.9])
    votes = simulate(rng, theta, n_prompts=150)
    weights = {0: 1.0, 1: 0.25, 2: 0.8, 3: 0.0, 4: 1.5}
    result = arena_ranking(
        votes, models=range(5), weights=weights, alpha=alpha, n_boot=0 if alpha == 0 else 50
    )
    np.testing.assert_allclose(result.log_strengths, scipy_fit(votes, 5, weights, alpha), atol=1e-5)


def test_records_and_columns_give_the_same_ranking() -> None:
    votes = simulate(np.random.default_rng(4), np.array([0.5, 0.0, -0.5]), n_prompts=40)
    records = list(zip(*(votes[key].tolist() for key in votes), strict=True))
    by_columns = arena_ranking(votes, models=[0, 1, 2], n_boot=100, seed=2)
    by_records = arena_ranking(records, models=[0, 1, 2], n_boot=100, seed=2)
    for field in ("log_strengths", "se", "low", "high", "diff_low", "p_best", "rank_high"):
        np.testing.assert_allclose(getattr(by_columns, field), getattr(by_records, field))


def test_a_data_frame_of_votes_gives_the_same_ranking() -> None:
    pandas = pytest.importorskip("pandas")
    votes = simulate(np.random.default_rng(8), np.array([0.5, 0.0, -0.5]), n_prompts=40)
    by_frame = arena_ranking(pandas.DataFrame(votes), models=[0, 1, 2], n_boot=50, seed=3)
    by_columns = arena_ranking(votes, models=[0, 1, 2], n_boot=50, seed=3)
    np.testing.assert_allclose(by_frame.log_strengths, by_columns.log_strengths)
    np.testing.assert_allclose(by_frame.diff_low, by_columns.diff_low)


def test_the_benchmark_simulates_the_strengths_it_states() -> None:
    """The benchmark's arenas: the top two m apart, the others 0.5 apart below (a version
    that gave the second and third models one strength tied them and skewed every figure)."""
    from benchmarks.arena_sampling import true_strengths

    np.testing.assert_allclose(true_strengths(4, 0.1), [0.0, -0.1, -0.6, -1.1])
    assert np.all(np.diff(true_strengths(8, 0.4)) < 0)


def test_a_replicate_is_the_fit_of_the_votes_of_the_resampled_prompts() -> None:
    """The vectorised bootstrap (counts per prompt, multinomial copies) against its definition:
    copy every vote of each drawn prompt and refit with preferences.bradley_terry."""
    votes = simulate(np.random.default_rng(5), np.array([0.4, 0.1, -0.2, -0.3]), n_prompts=30)
    weights = {0: 1.0, 1: 0.5, 2: 0.7, 3: 1.0, 4: 0.2}
    seed = 11
    replicate = arena_ranking(votes, models=range(4), weights=weights, n_boot=1, seed=seed)
    copies = np.random.default_rng(seed).multinomial(30, np.full(30, 1 / 30))
    resampled: dict[int, list[tuple[int, int, int]]] = {name: [] for name in weights}
    for prompt, a, b, o, who in zip(*(votes[key].tolist() for key in votes), strict=True):
        resampled[who] += [(a, b, o)] * int(copies[prompt])
    expected = preferences.bradley_terry(resampled, items=range(4), weights=weights, alpha=1e-3)
    np.testing.assert_allclose(replicate.low, expected.log_strengths, atol=1e-8)
    np.testing.assert_allclose(replicate.high, expected.log_strengths, atol=1e-8)


def clustered_study(rng: np.random.Generator, *, copies: int) -> dict[str, np.ndarray]:
    """60 prompts, one random pair each, judged by ``copies`` annotators who all give the
    prompt's one Bradley-Terry outcome: every vote is marginally Bradley-Terry, but the votes of
    a prompt are perfectly correlated."""
    theta = np.array([0.3, 0.0, -0.3])
    n_prompts = 60
    a = rng.integers(0, 3, n_prompts)
    b = (a + rng.integers(1, 3, n_prompts)) % 3
    outcome = np.where(rng.random(n_prompts) < 1 / (1 + np.exp(-(theta[a] - theta[b]))), 1, -1)
    return {
        "prompt": np.repeat(np.arange(n_prompts), copies),
        "model_a": np.repeat(a, copies),
        "model_b": np.repeat(b, copies),
        "outcome": np.repeat(outcome, copies),
        "annotator": np.tile(np.arange(copies), n_prompts),
    }


@pytest.mark.slow  # seconds of simulated studies (CI: the PostgreSQL pass)
def test_the_prompt_bootstrap_covers_the_true_difference_about_95_percent() -> None:
    """200 seeded studies with 4 identical votes per prompt: the interval of theta_0 - theta_1
    (true 0.3) from the prompt bootstrap covers it in about 95 % of them; the same votes each
    given their own prompt (an i.i.d. vote bootstrap) give intervals half as wide, which cover
    far less: the test fails if the bootstrap ignored the prompts."""
    rng = np.random.default_rng(20261128)
    covered = {"prompts": 0, "votes": 0}
    n_studies = 200
    for study in range(n_studies):
        votes = clustered_study(rng, copies=4)
        alone = dict(votes, prompt=np.arange(votes["prompt"].size))
        for name, data in (("prompts", votes), ("votes", alone)):
            result = arena_ranking(data, models=[0, 1, 2], n_boot=200, seed=study)
            covered[name] += result.diff_low[0, 1] <= 0.3 <= result.diff_high[0, 1]
    coverage = {name: count / n_studies for name, count in covered.items()}
    assert 0.91 <= coverage["prompts"] <= 0.99, coverage
    assert coverage["votes"] <= 0.80, coverage


vote_lists = st.lists(
    st.tuples(
        st.integers(0, 5),
        st.integers(0, 3),
        st.integers(1, 3),
        st.sampled_from([-1, 0, 1]),
        st.integers(0, 2),
    ).map(lambda v: (v[0], v[1], (v[1] + v[2]) % 4, v[3], v[4])),
    min_size=1,
    max_size=25,
)
FIELDS = (
    "log_strengths",
    "se",
    "se_boot",
    "low",
    "high",
    "rank",
    "rank_low",
    "rank_high",
    "p_best",
)


def assert_same(left, right, order=None) -> None:
    order = slice(None) if order is None else order
    for field in FIELDS:
        np.testing.assert_allclose(
            getattr(left, field)[order], getattr(right, field), atol=1e-6, err_msg=field
        )
    for field in ("p_above", "diff_low", "diff_high"):
        np.testing.assert_allclose(
            getattr(left, field)[np.ix_(order, order)]
            if not isinstance(order, slice)
            else getattr(left, field),
            getattr(right, field),
            atol=1e-6,
            err_msg=field,
        )


@settings(max_examples=30, deadline=None)
@given(votes=vote_lists, permutation=st.permutations(range(4)))
def test_relabelling_the_models_only_relabels_the_result(votes, permutation) -> None:
    models = ["m0", "m1", "m2", "m3"]
    renamed = {m: f"new{permutation[k]}" for k, m in enumerate(models)}
    votes = [(p, models[a], models[b], o, who) for p, a, b, o, who in votes]
    moved = [(p, renamed[a], renamed[b], o, who) for p, a, b, o, who in votes]
    new_models = sorted(renamed.values())
    before = arena_ranking(votes, models=models, n_boot=30, seed=1)
    after = arena_ranking(moved, models=new_models, n_boot=30, seed=1)
    order = np.array([new_models.index(renamed[m]) for m in models])
    # after's entry for model m sits at order[m]: compare after[order] with before.
    assert_same(after, before, order)


@settings(max_examples=30, deadline=None)
@given(votes=vote_lists)
def test_renaming_prompts_and_swapping_sides_change_nothing(votes) -> None:
    models = [0, 1, 2, 3]
    before = arena_ranking(votes, models=models, n_boot=30, seed=2)
    renamed = [(f"prompt-{p * 7 + 3}", a, b, o, who) for p, a, b, o, who in votes]
    assert_same(arena_ranking(renamed, models=models, n_boot=30, seed=2), before)
    swapped = [(p, b, a, -o, who) for p, a, b, o, who in votes]
    assert_same(arena_ranking(swapped, models=models, n_boot=30, seed=2), before)


@settings(max_examples=30, deadline=None)
@given(votes=vote_lists, level=st.floats(0.5, 0.99))
def test_probabilities_ranks_and_intervals_are_bounded(votes, level) -> None:
    result = arena_ranking(votes, models=[0, 1, 2, 3], n_boot=40, seed=3, level=level)
    voted = ~np.isnan(result.log_strengths)
    n = int(voted.sum())
    assert np.all((result.p_best >= 0) & (result.p_best <= 1))
    assert result.p_best.sum() == pytest.approx(1.0)
    assert np.all(result.p_best[~voted] == 0)
    above = result.p_above[np.ix_(voted, voted)]
    assert np.all((above >= 0) & (above <= 1))
    np.testing.assert_allclose(above + above.T, 1.0)
    assert np.all(result.low[voted] <= result.high[voted])
    assert np.all(result.diff_low[np.ix_(voted, voted)] <= result.diff_high[np.ix_(voted, voted)])
    for ranks in (result.rank, result.rank_low, result.rank_high):
        assert np.all((ranks[voted] >= 1) & (ranks[voted] <= n))
        assert np.all(ranks[voted] == np.round(ranks[voted]))
    assert np.all(result.rank_low[voted] <= result.rank_high[voted])
    assert np.isnan(result.log_strengths[~voted]).all()


def test_a_zero_weight_annotator_is_left_out_of_the_strengths() -> None:
    votes = simulate(np.random.default_rng(6), np.array([0.5, 0.0, -0.5]), n_prompts=50)
    keep = votes["annotator"] != 4
    weighted = arena_ranking(votes, models=[0, 1, 2], weights={0: 1, 1: 1, 2: 1, 3: 1, 4: 0})
    dropped = arena_ranking({k: v[keep] for k, v in votes.items()}, models=[0, 1, 2])
    np.testing.assert_allclose(weighted.log_strengths, dropped.log_strengths, atol=1e-9)
    np.testing.assert_allclose(weighted.se, dropped.se, atol=1e-9)


def balanced_votes(theta: np.ndarray, per_pair: int) -> list[tuple]:
    """Every pair judged ``per_pair`` times with wins in the exact Bradley-Terry proportion."""
    votes = []
    prompt = 0
    for a in range(theta.size):
        for b in range(a + 1, theta.size):
            wins = round(per_pair / (1 + np.exp(-(theta[a] - theta[b]))))
            for k in range(per_pair):
                votes.append((prompt, a, b, 1 if k < wins else -1, "ann"))
                prompt += 1
    return votes


def test_active_sampling_picks_the_closest_adjacent_pair() -> None:
    votes = balanced_votes(np.array([2.0, 1.0, 0.9, -1.0]), per_pair=200)
    choice = next_model_pair(votes, models=[0, 1, 2, 3])
    assert choice.target == (1, 2)
    assert (choice.model_a, choice.model_b) == (1, 2)
    assert 0.1 < choice.p_flip < 0.5
    assert choice.variance_after < choice.variance
    leaders = next_model_pair(votes, models=[0, 1, 2, 3], top=1)
    assert leaders.target == (0, 1)
    assert (leaders.model_a, leaders.model_b) == (0, 1)


def test_the_leader_is_tested_against_its_likeliest_challenger_not_the_runner_up() -> None:
    """Models 0 and 1 have 400 votes, 0 far ahead; model 2 has 3 votes against model 1 (won
    1) and stands third. Which model is best is uncertain only between 0 and 2, so top=1
    targets (0, 2), not the first two places (0, 1); and the vote that most narrows
    theta_0 - theta_2 compares 2 with model 1, which is closer in strength (more information
    per vote) and tied to 0 by 400 votes."""
    votes = balanced_votes(np.array([1.0, 0.0]), per_pair=400)
    votes += [(900, 2, 1, -1, "ann"), (901, 2, 1, -1, "ann"), (902, 2, 1, 1, "ann")]
    assert arena_ranking(votes, models=[0, 1, 2], n_boot=0).rank.tolist() == [1.0, 2.0, 3.0]
    choice = next_model_pair(votes, models=[0, 1, 2], top=1, explore=0.0)
    assert not choice.explored
    assert choice.target == (0, 2)
    assert choice.p_flip > 0.05
    assert (choice.model_a, choice.model_b) == (1, 2)


def test_a_pair_below_its_exploration_floor_comes_first() -> None:
    """Pair (0, 2) has 1 vote and (1, 2) 3 where uniform pairing would give each 100: with
    explore=0.25 (a floor of 25) the least compared is forced; with 0.003 (a floor of 0.9)
    the target rule decides again."""
    votes = balanced_votes(np.array([1.0, 0.0]), per_pair=296)
    votes += [(900, 2, 1, -1, "ann"), (901, 2, 1, 1, "ann"), (902, 2, 1, -1, "ann")]
    votes += [(903, 0, 2, 1, "ann")]
    assert len(votes) == 300
    forced = next_model_pair(votes, models=[0, 1, 2])
    assert forced.explored
    assert (forced.model_a, forced.model_b) == (0, 2)
    assert forced.target == (0, 2)
    free = next_model_pair(votes, models=[0, 1, 2], explore=0.003)
    assert not free.explored


def test_active_sampling_variance_after_is_the_refit_variance() -> None:
    """Sherman-Morrison against the information matrix recomputed with the vote added."""
    theta = np.array([1.0, 0.5, 0.3, -0.5])
    votes = balanced_votes(theta, per_pair=40)
    models = [0, 1, 2, 3]
    choice = next_model_pair(votes, models=models, alpha=1e-3)
    fit = preferences.bradley_terry([v[1:4] for v in votes], items=models, alpha=1e-3)
    th = fit.log_strengths

    def information(extra: tuple[int, int] | None) -> np.ndarray:
        pairs = [(a, b) for _, a, b, _, _ in votes] + ([extra] if extra else [])
        info = 1e-3 * np.eye(4)
        for a, b in pairs:
            p = 1 / (1 + np.exp(-(th[a] - th[b])))
            u = np.zeros(4)
            u[a], u[b] = 1, -1
            info += p * (1 - p) * np.outer(u, u)
        return info

    c = np.zeros(4)
    c[models.index(choice.target[0])], c[models.index(choice.target[1])] = 1, -1
    before = c @ np.linalg.inv(information(None)) @ c
    after = c @ np.linalg.inv(information((choice.model_a, choice.model_b))) @ c
    assert choice.variance == pytest.approx(before, rel=1e-6)
    assert choice.variance_after == pytest.approx(after, rel=1e-6)
    for a in range(4):  # no other pair reduces it more
        for b in range(a + 1, 4):
            assert c @ np.linalg.inv(information((a, b))) @ c >= after - 1e-12


def test_active_sampling_without_votes_starts_somewhere() -> None:
    choice = next_model_pair([], models=["a", "b", "c"])
    assert choice.model_a != choice.model_b
    assert choice.p_flip == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("votes", "kwargs", "message"),
    [
        ([(1, "a", "z", 1, "u")], {}, "not in models"),
        ([(1, "a", "a", 1, "u")], {}, "with itself"),
        ([(1, "a", "b", 2, "u")], {}, "outcome must be"),
        ([(1, "a", "b", True, "u")], {}, "outcome must be"),
        ([(1, "a", "b", 1)], {}, "must be"),
        ([(1, "a", "b", 1, "u")], {"weights": {"v": 1.0}}, "weights lack"),
        ([(1, "a", "b", 1, "u")], {"weights": {"u": -1.0}}, "weights must be"),
        ([(1, "a", "b", 1, "u")], {"alpha": 0.0}, "needs alpha > 0"),
        ([(1, "a", "b", 1, "u")], {"level": 1.0}, "level"),
        ([], {}, "no votes"),
    ],
)
def test_bad_input_is_refused(votes, kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        arena_ranking(votes, models=["a", "b"], n_boot=10, **kwargs)
