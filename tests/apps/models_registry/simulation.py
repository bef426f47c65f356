"""A simulated study with heterogeneous annotators, and model outputs to register against it.

Three groups of annotators share a latent label per item but each group has its own tendency
(group 0 labels faithfully, group 1 pushes neutral towards positive, group 2 towards negative),
plus individual noise: pairwise kappa is 0.8-0.95 within a group and 0.4-0.6 across groups.
With these seeds the reference rows land where Zhang et al.'s ablation (Table 5) puts them:
Random DIC 0.87, Consensus 0.52. (Consensus beats Random only when the mean pairwise kappa is
above about 0.5: giving everyone the majority label makes every predicted kappa 1.)
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.test import TestCase

from apps.annotations.importing import FinishedAnnotation, annotations_import_finished
from apps.models_registry.models import ModelRun
from apps.models_registry.services import model_run_register
from apps.studies.models import Question, Study
from tests.factories import running_study

LABELS = ("negative", "neutral", "positive")
GROUPS = (0, 0, 0, 1, 1, 1, 2, 2)


@dataclass
class SimulatedStudy:
    study: Study
    question: Question
    usernames: list[str]
    items: list[str]
    ratings: np.ndarray  # (annotators, items) label codes, every cell answered


def simulated_study(*, n_items: int = 120, seed: int = 7) -> SimulatedStudy:
    """Store the simulated annotations (every annotator answers every item) and return them."""
    study, annotators = running_study(n_items=n_items, n_annotators=len(GROUPS))
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 3, n_items)
    ratings = np.empty((len(GROUPS), n_items), dtype=int)
    for k, group in enumerate(GROUPS):
        tendency = truth.copy()
        if group:
            push = (truth == 1) & (rng.random(n_items) < 0.5)
            tendency[push] = 2 if group == 1 else 0
        noisy = rng.random(n_items) < 0.05
        ratings[k] = np.where(noisy, rng.integers(0, 3, n_items), tendency)
    items = list(study.items.order_by("position").values_list("external_id", flat=True))
    # Rows in the study's annotator order (by username, as every selector reads them), not in
    # creation order: the factory's "user9" sorts after "user10".
    usernames = sorted(user.username for user in annotators)
    annotations_import_finished(
        study=study,
        records=[
            FinishedAnnotation(items[i], usernames[k], "sentiment", LABELS[ratings[k, i]])
            for k in range(len(GROUPS))
            for i in range(n_items)
        ],
    )
    question = study.questions.get(key="sentiment")
    return SimulatedStudy(study, question, usernames, items, ratings)


def prediction_rows(sim: SimulatedStudy, codes: np.ndarray) -> list[dict[str, str]]:
    """Prediction rows (item, annotator, label) of a code matrix shaped like ``sim.ratings``."""
    return [
        {"item": item, "annotator": name, "label": LABELS[codes[k, i]]}
        for k, name in enumerate(sim.usernames)
        for i, item in enumerate(sim.items)
    ]


def vector_rows(sim: SimulatedStudy, vectors: np.ndarray) -> list[dict]:
    """Already averaged vector rows (annotator, vector), one per annotator in order."""
    return [
        {"annotator": name, "vector": vector.tolist()}
        for name, vector in zip(sim.usernames, vectors, strict=True)
    ]


def jsonl(rows: Iterable[dict]) -> io.BytesIO:
    """A JSON Lines upload of ``rows``."""
    return io.BytesIO("".join(json.dumps(row) + "\n" for row in rows).encode())


def vectors_with_cosine(similarity: np.ndarray) -> np.ndarray:
    """Vectors whose cosine similarity matrix is ``similarity`` (PSD, unit diagonal):
    rows of ``V sqrt(L)`` from its eigendecomposition ``V L V^T``."""
    eigenvalues, eigenvectors = np.linalg.eigh(similarity)
    if eigenvalues.min() < -1e-9:
        raise ValueError(f"not positive semi-definite (eigenvalue {eigenvalues.min():.3g})")
    return eigenvectors * np.sqrt(np.clip(eigenvalues, 0.0, None))


def register_and_evaluate(**kwargs: Any) -> ModelRun:
    """``model_run_register(**kwargs)``, then the evaluation its commit hands off (run inline,
    as ``QUALITY_UPDATES = "inline"`` says in the tests, when the captured commit callbacks
    execute): the run as a reader sees it once its background evaluation is done."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        run = model_run_register(**kwargs)
    run.refresh_from_db()
    return run
