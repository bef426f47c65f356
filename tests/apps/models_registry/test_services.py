"""Evaluation of registered runs on the simulated study: DIC, BAE, reference rows, recompute."""

from __future__ import annotations

import numpy as np
import pytest

from analytics.metrics import dic, pairwise_kappa
from apps.annotations.models import Annotation, Revision
from apps.models_registry.models import ModelRunEvaluation
from apps.models_registry.selectors import latest_evaluation, leaderboard
from apps.models_registry.services import Upload, model_runs_recompute
from tests.apps.models_registry.simulation import (
    jsonl,
    prediction_rows,
    register_and_evaluate,
    vector_rows,
    vectors_with_cosine,
)

pytestmark = pytest.mark.django_db


def _figures(run) -> dict:
    return latest_evaluation(run=run).figures


def _truth(sim, settings) -> np.ndarray:
    return pairwise_kappa(sim.ratings.astype(float), min_overlap=settings.QUALITY_MIN_OVERLAP)


def test_a_model_returning_each_annotators_own_labels_has_dic_0(sim, register):
    figures = _figures(register("oracle", sim.ratings))
    assert figures["dic"] == 0.0
    assert figures["accuracy"] == [1.0] * len(sim.usernames)
    assert figures["accuracy_mean"] == 1.0
    assert figures["fleiss_pred"] == pytest.approx(figures["fleiss_human"])
    assert figures["pearson_mean"] == 1.0
    assert figures["maps"]["predictions"]["annotators"] == list(range(len(sim.usernames)))


def test_bae_is_1_for_vectors_whose_cosines_are_the_kappa_matrix(sim, register, settings):
    truth = _truth(sim, settings)
    assert np.linalg.eigvalsh(truth).min() > 0  # the simulated study's kappa matrix is PSD
    vectors = vectors_with_cosine(truth)
    features = vector_rows(sim, vectors)
    figures = _figures(register("aligned", sim.ratings, features=features, attention=features))
    assert figures["bae"]["feature"] == pytest.approx(1.0, abs=1e-5)  # float32 storage
    assert figures["bae"]["attention"] == pytest.approx(1.0, abs=1e-5)
    # the aligned maps coincide with the truth's
    pair = figures["maps"]["feature"]
    assert np.allclose(pair["model"], pair["truth"], atol=1e-3)


def test_reference_rows_land_where_the_papers_ablation_puts_them(sim, register):
    """Table 5: Random DIC far above Consensus (0.86-0.93 against 0.51-0.61 with the
    diagonal counted; without it, as here, Random is about 1 by construction). BAE Random <
    Uniform needs the paper's data, here both are simply well below a faithful model's 1."""
    base = _figures(register("oracle", sim.ratings))["baselines"]
    assert 0.9 <= base["dic_random"] <= 1.1
    assert base["dic_consensus"] < base["dic_random"] - 0.25
    assert base["bae_random"] < 0.5
    assert base["bae_uniform"] < 0.5


def test_models_rank_between_chance_and_perfect(sim, register, settings):
    rng = np.random.default_rng(3)
    majority = np.array([np.bincount(col, minlength=3).argmax() for col in sim.ratings.T])
    consensus = np.tile(majority, (len(sim.usernames), 1))
    partial = np.where(rng.random(sim.ratings.shape) < 0.8, sim.ratings, consensus)
    oracle = register("oracle", sim.ratings)
    good = register("mostly-individual", partial)
    flat = register("consensus-model", consensus)
    dics = {run.name: _figures(run)["dic"] for run in (oracle, good, flat)}
    assert dics["oracle"] < dics["mostly-individual"] < dics["consensus-model"]
    # the stored DIC is analytics.metrics.dic of the two kappa matrices
    expected = dic(_truth(sim, settings), pairwise_kappa(partial.astype(float), min_overlap=10))
    assert dics["mostly-individual"] == pytest.approx(expected, abs=1e-6)
    assert _figures(flat)["dic"] == pytest.approx(_figures(flat)["baselines"]["dic_consensus"])
    board = leaderboard(question=sim.question)
    assert [row.run.name for row in board.rows] == [
        "oracle",
        "mostly-individual",
        "consensus-model",
    ]
    assert [row.name for row in board.references][:2] == ["Random (DIC, BAE)", "Consensus (DIC)"]


def test_both_matrices_use_the_cells_the_model_predicted(sim, settings):
    """M and M' use the same cells: a model predicting half the items is compared with the
    annotators on that half only."""
    from apps.models_registry.services import Upload
    from tests.apps.models_registry.simulation import jsonl, prediction_rows, register_and_evaluate

    rows = [row for row in prediction_rows(sim, sim.ratings) if row["item"] in sim.items[:60]]
    run = register_and_evaluate(
        study=sim.study,
        question=sim.question,
        name="half",
        version="1",
        created_by=sim.study.created_by,
        predictions=Upload(jsonl(rows), "jsonl"),
    )
    figures = _figures(run)
    assert figures["n_cells"] == sim.ratings.size // 2
    assert figures["dic"] == 0.0
    half = pairwise_kappa(sim.ratings[:, :60].astype(float), min_overlap=10)
    assert np.allclose(figures["m_true"], half, atol=1e-6)


def test_recompute_skips_unchanged_and_recent_runs_and_keeps_history(sim, register, settings):
    run = register("oracle", sim.ratings)
    assert model_runs_recompute(question_id=sim.question.pk) == 0  # nothing changed
    annotation = Annotation.objects.filter(question=sim.question).first()
    other = sim.question.labels.exclude(pk=annotation.current_revision.label_id).first()
    revision = Revision.objects.create(
        annotation=annotation,
        number=2,
        value={"label": other.key},
        label=other,
        idempotency_key="00000000-0000-0000-0000-000000000002",
    )
    Annotation.objects.filter(pk=annotation.pk).update(current_revision=revision)
    settings.MODEL_REGISTRY_RECOMPUTE_INTERVAL = 3600
    assert model_runs_recompute(question_id=sim.question.pk) == 0  # throttled
    settings.MODEL_REGISTRY_RECOMPUTE_INTERVAL = 0
    assert model_runs_recompute(question_id=sim.question.pk) == 1
    assert ModelRunEvaluation.objects.filter(run=run).count() == 2
    assert _figures(run)["dic"] > 0.0  # the model no longer matches the edited answer


def test_the_live_pipeline_re_evaluates_runs_when_answers_change(
    sim, register, settings, django_capture_on_commit_callbacks
):
    from apps.categorical.quality import quality_process_pending

    run = register("oracle", sim.ratings)
    settings.MODEL_REGISTRY_RECOMPUTE_INTERVAL = 0
    annotation = Annotation.objects.filter(question=sim.question).first()
    other = sim.question.labels.exclude(pk=annotation.current_revision.label_id).first()
    revision = Revision.objects.create(
        annotation=annotation,
        number=2,
        value={"label": other.key},
        label=other,
        idempotency_key="00000000-0000-0000-0000-000000000003",
    )
    Annotation.objects.filter(pk=annotation.pk).update(
        current_revision=revision, analysis_pending=True
    )
    with django_capture_on_commit_callbacks(execute=True):
        quality_process_pending(question_id=sim.question.pk)
    assert ModelRunEvaluation.objects.filter(run=run).count() == 2
    assert _figures(run)["dic"] > 0.0


def test_a_constant_label_run_ranks_below_the_random_baseline(sim, register):
    # every predicted pair kappa is undefined (p_e = 1); it used to score DIC 0.000 and rank
    # first on the leaderboard, above the oracle
    oracle = register("oracle", sim.ratings)
    constant = register("constant", np.zeros_like(sim.ratings))
    figures = _figures(constant)
    assert figures["dic"] > figures["baselines"]["dic_random"]
    board = leaderboard(question=sim.question)
    assert [row.run.name for row in board.rows] == [oracle.name, constant.name]


def _noisy(sim, share: float, seed: int = 0) -> np.ndarray:
    """The annotators' own labels with ``share`` of them replaced by a random label."""
    rng = np.random.default_rng(seed)
    swap = rng.random(sim.ratings.shape) < share
    return np.where(swap, rng.integers(0, 3, sim.ratings.shape), sim.ratings)


def test_dic_and_bae_carry_item_bootstrap_intervals_and_evidence(sim, register, settings):
    from analytics.metrics import dic_bae_bootstrap
    from apps.models_registry.evaluation import BOOTSTRAP_REPLICATES, SEED

    truth = _truth(sim, settings)
    rng = np.random.default_rng(1)
    vectors = vectors_with_cosine(truth)
    features = vector_rows(sim, vectors + rng.normal(0.0, 0.3, vectors.shape))
    codes = _noisy(sim, 0.3)
    figures = _figures(register("noisy", codes, features=features))
    n_items = sim.ratings.shape[1]
    assert figures["n_items"] == n_items
    assert figures["n_cells"] == sim.ratings.size
    assert figures["interval"] == {
        "method": "item bootstrap, percentile",
        "n_boot": BOOTSTRAP_REPLICATES,
        "confidence": 0.95,
    }
    low, high = figures["dic_interval"]
    assert low <= figures["dic"] <= high
    assert low < high
    bae_low, bae_high = figures["bae_interval"]["feature"]
    assert bae_low <= figures["bae"]["feature"] <= bae_high
    assert "attention" not in figures["bae_interval"]  # no attention vectors uploaded
    # the stored interval is the library's on the same answers and seed
    again = dic_bae_bootstrap(
        sim.ratings.astype(float),
        codes.astype(float),
        min_overlap=settings.QUALITY_MIN_OVERLAP,
        n_boot=BOOTSTRAP_REPLICATES,
        seed=SEED,
    )
    assert figures["dic"] == pytest.approx(again.dic.estimate, abs=1e-6)
    assert figures["dic_interval"] == pytest.approx([again.dic.low, again.dic.high], abs=1e-6)


def test_a_constant_label_run_stays_below_random_over_its_whole_interval(sim, register):
    figures = _figures(register("constant", np.zeros_like(sim.ratings)))
    low, high = figures["dic_interval"]
    assert figures["baselines"]["dic_random"] < low <= figures["dic"] <= high


def test_accuracy_and_fleiss_carry_intervals_with_their_evidence(sim, register):
    """Per annotator: Wilson over the items compared (an outside oracle: statsmodels'
    proportion_confint, method "wilson"); mean accuracy and Fleiss' kappa: the item bootstrap
    on the same replicates and seed as DIC, so the stored intervals are the library's."""
    from statsmodels.stats.proportion import proportion_confint

    from analytics.metrics import fleiss_kappa_bootstrap, mean_accuracy_bootstrap
    from apps.models_registry.evaluation import BOOTSTRAP_REPLICATES, SEED

    codes = _noisy(sim, 0.3)
    codes[0, :40] = -1  # annotator 0: no prediction on 40 items (fewer items compared)
    rows = prediction_rows(sim, np.where(codes < 0, 0, codes))
    keep = {(sim.usernames[0], item) for item in sim.items[:40]}
    rows = [row for row in rows if (row["annotator"], row["item"]) not in keep]
    run = register_and_evaluate(
        study=sim.study,
        question=sim.question,
        name="noisy",
        version="1",
        created_by=sim.study.created_by,
        predictions=Upload(jsonl(rows), "jsonl"),
    )
    figures = _figures(run)
    human = sim.ratings.astype(float)
    predicted = np.where(codes < 0, np.nan, codes).astype(float)
    n_items = sim.ratings.shape[1]
    assert figures["accuracy_n"] == [n_items - 40] + [n_items] * (sim.ratings.shape[0] - 1)
    for k, (interval, n) in enumerate(
        zip(figures["accuracy_interval"], figures["accuracy_n"], strict=True)
    ):
        hits = int(np.sum(human[k] == predicted[k]))
        assert figures["accuracy"][k] == pytest.approx(hits / n, abs=1e-6)
        low, high = proportion_confint(hits, n, alpha=0.05, method="wilson")
        assert interval == pytest.approx([low, high], abs=1e-6)
    both = ~np.isnan(predicted)
    mean = mean_accuracy_bootstrap(
        human, predicted, n_boot=BOOTSTRAP_REPLICATES, confidence=0.95, seed=SEED
    )
    assert figures["accuracy_mean"] == pytest.approx(mean.estimate, abs=1e-6)
    assert figures["accuracy_mean_interval"] == pytest.approx([mean.low, mean.high], abs=1e-6)
    assert mean.low < figures["accuracy_mean"] < mean.high
    fleiss = fleiss_kappa_bootstrap(
        np.where(both, predicted, np.nan), n_boot=BOOTSTRAP_REPLICATES, seed=SEED
    )
    assert figures["fleiss_pred"] == pytest.approx(fleiss.estimate, abs=1e-6)
    assert figures["fleiss_pred_interval"] == pytest.approx([fleiss.low, fleiss.high], abs=1e-6)
    assert figures["fleiss_pred_interval"][0] < figures["fleiss_pred"]
    assert figures["fleiss_n_items"] == n_items
    low, high = figures["fleiss_human_interval"]
    assert low < figures["fleiss_human"] < high


def test_fleiss_kappa_of_annotators_is_the_dashboards_on_the_answers_compared(sim, register):
    """Issue 23: the model page's "Fleiss kappa of annotators" was a computation of its own
    (an item bootstrap) beside the dashboard's (Gwet's linearisation) for the same answers.
    It is now the dashboard's function on the answers the run was compared on, and names
    them; on every answer it equals the dashboard's figure, and statsmodels' Fleiss kappa."""
    from statsmodels.stats.inter_rater import aggregate_raters
    from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss

    from analytics.metrics.intervals import fleiss_kappa_interval, indicator_intervals_categorical

    figures = _figures(register("every cell", _noisy(sim, 0.3)))
    human = sim.ratings.astype(float)
    dashboard = indicator_intervals_categorical(human, n_boot=10, seed=0)["fleiss_kappa"]
    assert figures["fleiss_human"] == pytest.approx(dashboard.estimate, abs=1e-6)
    assert figures["fleiss_human_interval"] == pytest.approx(
        [dashboard.low, dashboard.high], abs=1e-6
    )
    table, _ = aggregate_raters(sim.ratings.T)
    assert figures["fleiss_human"] == pytest.approx(sm_fleiss(table, method="fleiss"), abs=1e-6)
    m, n = sim.ratings.shape
    assert figures["fleiss_human_rows"] == {"annotators": m, "answers": m * n, "items": n}
    codes = _noisy(sim, 0.3)
    rows = prediction_rows(sim, codes)
    skipped = {(sim.usernames[0], item) for item in sim.items[:40]}
    rows = [row for row in rows if (row["annotator"], row["item"]) not in skipped]
    run = register_and_evaluate(
        study=sim.study,
        question=sim.question,
        name="fewer",
        version="1",
        created_by=sim.study.created_by,
        predictions=Upload(jsonl(rows), "jsonl"),
    )
    fewer = _figures(run)
    compared = human.copy()
    compared[0, :40] = np.nan
    expected = fleiss_kappa_interval(compared)
    assert fewer["fleiss_human"] == pytest.approx(expected.estimate, abs=1e-6)
    assert fewer["fleiss_human_rows"]["answers"] == m * n - 40


def test_a_run_on_a_one_annotator_study_is_evaluated_without_pairs():
    """No pair of annotators: DIC has nothing to compare, yet the evaluation completes (the
    bootstrap reshaped an empty array of pairs: ValueError in the background worker)."""
    from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
    from apps.models_registry.services import Upload
    from tests.apps.models_registry.simulation import jsonl, register_and_evaluate
    from tests.factories import running_study

    study, (annotator,) = running_study(n_items=4, n_annotators=1)
    question = study.questions.get()
    items = list(study.items.values_list("external_id", flat=True))
    first, second = question.labels.values_list("key", flat=True)[:2]
    annotations_import_finished(
        study=study,
        records=[FinishedAnnotation(i, annotator.username, question.key, first) for i in items],
    )
    rows = [{"item": i, "annotator": annotator.username, "label": second} for i in items]
    run = register_and_evaluate(
        study=study,
        question=question,
        name="m",
        version="1",
        created_by=study.created_by,
        predictions=Upload(jsonl(rows), "jsonl"),
    )
    evaluation = run.evaluations.get()
    assert evaluation.figures["accuracy_mean"] == 0.0
    assert evaluation.figures["dic"] is None


@pytest.mark.parametrize("first_user", [0, 5, 95])
def test_the_simulation_keeps_the_studys_annotator_order(first_user):
    """The evaluation's axes are the study's annotators by username; the simulation's rows must
    be in that order whatever names the factory hands out (user9 sorts after user10)."""
    from apps.models_registry.selectors import question_labels
    from tests.apps.models_registry.simulation import simulated_study
    from tests.factories import UserFactory

    UserFactory.reset_sequence(first_user)
    sim = simulated_study(n_items=12)
    labels = question_labels(question=sim.question)
    assert labels.names == sim.usernames
    assert np.array_equal(labels.ratings, sim.ratings)
