r"""Predicted disagreement before annotation (Du & Hoste 2025, section 5), on item texts.

A regressor learns each annotated item's AAD-RMSE (:func:`analytics.metrics.aad.aad_rmse_per_item`)
from its text and predicts it for the items nobody has answered yet, so the hard ones can be
given more annotators from the start. The embedded model is TF-IDF word 1-2 grams and ridge
regression (scikit-learn): fast, with no download. Its error is estimated by 5-fold
cross-validation on the annotated items, as the MSE and as the 4-level accuracy of the paper:
the true AAD-RMSE and the prediction are each mapped to the nearest of four disagreement levels
(by absolute distance), and accuracy is the share of items whose two levels agree. A majority
baseline (every item gets the level most frequent in the training folds) goes through the same
folds.

The paper's levels are the four values the AAD-RMSE of three answers on the sentiment scale
-1, 0, 1 can take: 0, :math:`\sqrt{2/3}`, :math:`\sqrt 2` and :math:`\sqrt{8/3}`
(:data:`PAPER_LEVELS`). :func:`attainable_levels` finds the same kind of levels for any label
space; more than four are thinned to four.

References
----------
Du, Q. & Hoste, V. (2025). Another approach to agreement measurement and prediction with
emotion annotations. Proc. LAW-XIX, 87-102. doi:10.18653/v1/2025.law-1.7
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations_with_replacement
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import Ridge
from sklearn.metrics import make_scorer
from sklearn.model_selection import KFold, cross_validate
from sklearn.pipeline import Pipeline, make_pipeline

__all__ = [
    "MIN_TRAIN",
    "PAPER_LEVELS",
    "DisagreementForecast",
    "MajorityLevel",
    "attainable_levels",
    "disagreement_regressor",
    "level_accuracy",
    "predict_disagreement",
    "to_levels",
]

#: The AAD-RMSE of three answers on -1/0/1: unanimous, one neighbour, all three, two poles.
PAPER_LEVELS: NDArray[np.float64] = np.sqrt(np.array([0.0, 2.0, 6.0, 8.0]) / 3.0)
#: Fewest annotated items a model is trained on (each of the 5 folds holds two at least).
MIN_TRAIN = 10


def to_levels(values: ArrayLike, levels: ArrayLike) -> NDArray[np.int64]:
    """Index of the nearest level of each value (by absolute distance; ties to the lower).

    Examples
    --------
    >>> to_levels([0.1, 0.7, 1.5, 9.0], PAPER_LEVELS).tolist()
    [0, 1, 2, 3]
    """
    grid = np.asarray(levels, dtype=float)
    return np.abs(np.asarray(values, dtype=float)[..., None] - grid).argmin(axis=-1)


def level_accuracy(y_true: ArrayLike, y_pred: ArrayLike, *, levels: ArrayLike) -> float:
    """Share of items whose true and predicted AAD-RMSE fall on the same level.

    Examples
    --------
    >>> level_accuracy([0.0, 0.8, 1.6], [0.3, 1.2, 1.6], levels=PAPER_LEVELS)
    0.6666666666666666
    """
    return float(np.mean(to_levels(y_true, levels) == to_levels(y_pred, levels)))


def attainable_levels(points: ArrayLike, *, n_answers: int = 3, k: int = 4) -> NDArray:
    """The distinct AAD-RMSE values ``n_answers`` answers placed on ``points`` can take, thinned
    to ``k`` (the smallest, the largest and evenly spaced ranks between) when there are more.

    Parameters
    ----------
    points : array_like, shape (V, D) or (V,)
        Where each label sits (``LabelScale.points``).
    n_answers : int
        Answers per item (3 in the paper's data).
    k : int
        Levels kept at most (4 in the paper).

    Examples
    --------
    >>> attainable_levels([[-1.0], [0.0], [1.0]]).round(3).tolist()
    [0.0, 0.816, 1.414, 1.633]
    """
    given = np.asarray(points, dtype=float)
    grid = given.reshape(given.shape[0], -1)
    combos = np.array(list(combinations_with_replacement(range(len(grid)), n_answers)))
    placed = grid[combos]  # (C, n, D)
    spread = ((placed - placed.mean(axis=1, keepdims=True)) ** 2).sum(axis=(1, 2))
    values = np.unique(np.sqrt(2.0 * spread / (n_answers - 1)).round(9))
    if values.size <= k:
        return values
    return values[np.unique(np.linspace(0, values.size - 1, k).round().astype(int))]


class MajorityLevel(RegressorMixin, BaseEstimator):
    """Baseline: predicts, for every item, the level most frequent in the training targets."""

    def __init__(self, levels: Sequence[float] = tuple(PAPER_LEVELS)) -> None:
        self.levels = levels

    def fit(self, X: Any, y: ArrayLike) -> MajorityLevel:
        counts = np.bincount(to_levels(y, self.levels), minlength=len(self.levels))
        self.value_ = float(np.asarray(self.levels, dtype=float)[counts.argmax()])
        return self

    def predict(self, X: Any) -> NDArray[np.float64]:
        return np.full(len(X), self.value_)


def disagreement_regressor(*, alpha: float = 1.0) -> Pipeline:
    """TF-IDF of word 1-2 grams (sublinear counts) followed by ridge regression."""
    return make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1), Ridge(alpha=alpha)
    )


@dataclass(frozen=True)
class DisagreementForecast:
    """Predictions for new items and the cross-validated error of the model that made them.

    Attributes
    ----------
    predicted : ndarray, shape (K,)
        Predicted AAD-RMSE of each new text (clipped at 0).
    cv_mse, cv_accuracy : float
        Mean over the folds of the MSE and of the 4-level accuracy.
    baseline_mse, baseline_accuracy : float
        The same figures of :class:`MajorityLevel` on the same folds.
    n_train, folds : int
    levels : ndarray, shape (L,)
    """

    predicted: NDArray[np.float64]
    cv_mse: float
    cv_accuracy: float
    baseline_mse: float
    baseline_accuracy: float
    n_train: int
    folds: int
    levels: NDArray[np.float64]


def _cross_validated(
    model: BaseEstimator, texts: list[str], y: NDArray, *, cv: KFold, levels: NDArray
) -> tuple[float, float]:
    scores = cross_validate(
        model,
        texts,
        y,
        cv=cv,
        scoring={
            "mse": "neg_mean_squared_error",
            "accuracy": make_scorer(level_accuracy, levels=levels),
        },
    )
    return float(-scores["test_mse"].mean()), float(scores["test_accuracy"].mean())


def predict_disagreement(
    texts: Sequence[str],
    disagreement: ArrayLike,
    new_texts: Sequence[str],
    *,
    levels: ArrayLike = PAPER_LEVELS,
    folds: int = 5,
    seed: int = 0,
) -> DisagreementForecast:
    """Train on annotated texts and their AAD-RMSE, predict the new texts' AAD-RMSE.

    Parameters
    ----------
    texts : sequence of str, length N
        Texts of the annotated items (``N >= MIN_TRAIN``).
    disagreement : array_like, shape (N,)
        Their AAD-RMSE.
    new_texts : sequence of str, length K
        Texts to predict.
    levels : array_like, shape (L,)
        The disagreement levels of the level accuracy (:data:`PAPER_LEVELS` by default).
    folds : int
        Cross-validation folds (shuffled ``KFold`` seeded by ``seed``).

    Returns
    -------
    DisagreementForecast

    Examples
    --------
    >>> texts = [f"calm sentence {i}" for i in range(10)]
    >>> texts += [f"sarcastic joke {i}" for i in range(10)]
    >>> y = [0.0] * 10 + [1.633] * 10
    >>> fit = predict_disagreement(texts, y, ["a sarcastic remark", "a calm day"])
    >>> (fit.predicted > 0.8).tolist(), fit.cv_accuracy, fit.baseline_accuracy
    ([True, False], 1.0, 0.4)
    """
    y = np.asarray(disagreement, dtype=float)
    train = list(texts)
    if len(train) != y.size:
        raise ValueError("texts and disagreement differ in length.")
    if y.size < max(MIN_TRAIN, folds):
        raise ValueError(f"Need at least {max(MIN_TRAIN, folds)} annotated texts.")
    grid = np.asarray(levels, dtype=float)
    cv = KFold(n_splits=folds, shuffle=True, random_state=seed)
    cv_mse, cv_accuracy = _cross_validated(disagreement_regressor(), train, y, cv=cv, levels=grid)
    baseline_mse, baseline_accuracy = _cross_validated(
        MajorityLevel(tuple(grid)), train, y, cv=cv, levels=grid
    )
    model = disagreement_regressor().fit(train, y)
    new = list(new_texts)
    predicted = np.clip(model.predict(new), 0.0, None) if new else np.zeros(0)
    return DisagreementForecast(
        predicted=predicted,
        cv_mse=cv_mse,
        cv_accuracy=cv_accuracy,
        baseline_mse=baseline_mse,
        baseline_accuracy=baseline_accuracy,
        n_train=int(y.size),
        folds=folds,
        levels=grid,
    )
