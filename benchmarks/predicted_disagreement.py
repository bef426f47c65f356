"""Predicted disagreement before annotation (Du & Hoste 2025, section 5) on a simulated text study.

**The Rzhetsky reproduction is impossible without the texts.** The Rzhetsky, Shatkay & Wilbur
(2009) data in ``/work/shared/datasets/rzhetsky2009`` (pyanno's copy of the paper's Dataset S1,
matrices E/F/P of label codes) holds label codes only, one row per sentence fragment and no
text; the fragments were cut from PubMed sentences per annotator and their texts are not
distributed with the paper's data, pyanno or any public copy found (searched for 10 minutes).
A text model has nothing to read there, so this benchmark runs on a simulated study instead and
reports no Rzhetsky figure.

The simulated study (:func:`simulate_text_study`): each item is a short sentence of filler words
around one *polar* word that sets its true sentiment (-1, 0 or 1; "excellent", "average",
"terrible" ...). A share ``hedged`` of the items also carries one *hedge* word ("ironically",
"supposedly", "arguably" ...) that makes the sentiment hard to read: on such an item each of the
three annotators gives the true label with probability 0.45, otherwise a random other label;
on a plain item with probability 0.92, otherwise a neighbouring label. Disagreement thus
depends on words the model can see. Each item's AAD-RMSE (labels at -1, 0, 1, Eq. 4) is
computed from its three answers, as in the paper.

The studio's model (:func:`analytics.metrics.disagreement_prediction.predict_disagreement`,
TF-IDF 1-2 grams + ridge) is trained on the ``--annotated`` share of the items and predicts the
others. Printed: 5-fold cross-validated MSE and 4-level accuracy on the annotated items, the
majority-level baseline on the same folds, and the same figures on the held-out items against
their simulated AAD-RMSE. Paper, for scale (RoBERTa on DynaSent, Table 6): MSE 0.072, 4-level
accuracy 51.64 %.

Run with ``.venv/bin/python -m benchmarks.predicted_disagreement [--items 3000] [--seeds 3]``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from analytics.metrics.aad import aad_rmse_per_item
from analytics.metrics.disagreement_prediction import (
    PAPER_LEVELS,
    MajorityLevel,
    level_accuracy,
    predict_disagreement,
)

POLAR = {
    -1: ["terrible", "awful", "dreadful", "broken", "disappointing"],
    0: ["average", "ordinary", "standard", "typical", "plain"],
    1: ["excellent", "wonderful", "delightful", "superb", "lovely"],
}
HEDGES = ["ironically", "supposedly", "arguably", "apparently", "allegedly", "sort-of"]
FILLER = [
    *("the", "a", "this", "that", "service", "room", "staff", "food", "place", "visit"),
    *("stay", "day", "night", "meal", "view", "price", "hotel", "shop", "order", "team"),
    *("product", "delivery", "experience", "was", "is", "seemed", "felt", "looked", "came"),
]
#: Probability that an annotator gives the true label on a plain and on a hedged item.
P_RIGHT_PLAIN, P_RIGHT_HEDGED = 0.92, 0.45


@dataclass(frozen=True)
class TextStudy:
    texts: list[str]
    truth: NDArray[np.int64]  # (N,) true sentiment -1/0/1
    hedged: NDArray[np.bool_]  # (N,)
    answers: NDArray[np.int64]  # (3, N) sentiment given by each annotator
    disagreement: NDArray[np.float64]  # (N,) AAD-RMSE of the three answers


def simulate_text_study(*, n_items: int, seed: int, hedged: float = 0.3) -> TextStudy:
    """A sentiment study whose disagreement depends on words (see the module docstring)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(-1, 2, n_items)
    is_hedged = rng.random(n_items) < hedged
    texts = []
    for label, hedge in zip(truth, is_hedged, strict=True):
        words = list(rng.choice(FILLER, rng.integers(5, 10)))
        words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(POLAR[int(label)])))
        if hedge:
            words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(HEDGES)))
        texts.append(" ".join(words))
    p_right = np.where(is_hedged, P_RIGHT_HEDGED, P_RIGHT_PLAIN)
    right = rng.random((3, n_items)) < p_right
    other = (truth + 1 + rng.integers(0, 2, (3, n_items))) % 3 - 1  # one of the two others
    step = rng.choice([-1, 1], (3, n_items))
    neighbour = np.where(np.abs(truth + step) <= 1, truth + step, truth - step)
    answers = np.where(right, truth, np.where(is_hedged, other, neighbour))
    disagreement = aad_rmse_per_item(answers.astype(float))
    return TextStudy(texts, truth, is_hedged, answers, disagreement)


def run(*, n_items: int, annotated: float, seed: int) -> dict[str, float]:
    """Train on the annotated share of one simulated study; figures on it and on the rest."""
    study = simulate_text_study(n_items=n_items, seed=seed)
    cut = int(n_items * annotated)
    fit = predict_disagreement(
        study.texts[:cut], study.disagreement[:cut], study.texts[cut:], seed=seed
    )
    held_out = study.disagreement[cut:]
    baseline = MajorityLevel().fit(None, study.disagreement[:cut])
    return {
        "cv_mse": fit.cv_mse,
        "cv_accuracy": fit.cv_accuracy,
        "cv_baseline_mse": fit.baseline_mse,
        "cv_baseline_accuracy": fit.baseline_accuracy,
        "held_out_mse": float(np.mean((fit.predicted - held_out) ** 2)),
        "held_out_accuracy": level_accuracy(held_out, fit.predicted, levels=PAPER_LEVELS),
        "held_out_baseline_accuracy": level_accuracy(
            held_out, baseline.predict(held_out), levels=PAPER_LEVELS
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--annotated", type=float, default=0.8)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    print("Rzhetsky et al. (2009): NOT reproduced. The shared data holds label codes only,")
    print("no fragment texts, and no public copy of the texts was found: a text model cannot")
    print("be trained on it. Figures below are on a simulated text study.\n")
    rows = [run(n_items=args.items, annotated=args.annotated, seed=s) for s in range(args.seeds)]
    mean = {key: float(np.mean([row[key] for row in rows])) for key in rows[0]}
    n_train = int(args.items * args.annotated)
    print(f"{args.items} items, {n_train} annotated (3 answers each), {args.seeds} seeds")
    print(f"{'':32}{'MSE':>8}{'4-level acc.':>14}")
    print(f"{'model, 5-fold CV':32}{mean['cv_mse']:8.3f}{mean['cv_accuracy']:14.1%}")
    print(
        f"{'majority baseline, 5-fold CV':32}{mean['cv_baseline_mse']:8.3f}"
        f"{mean['cv_baseline_accuracy']:14.1%}"
    )
    print(
        f"{'model, held-out items':32}{mean['held_out_mse']:8.3f}{mean['held_out_accuracy']:14.1%}"
    )
    print(f"{'majority, held-out items':32}{'':8}{mean['held_out_baseline_accuracy']:14.1%}")
    print("Paper (RoBERTa, DynaSent, Table 6): MSE 0.072, 4-level accuracy 51.64 %")


if __name__ == "__main__":
    main()
