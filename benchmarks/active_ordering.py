"""How many labels does the queue's active order save? (issue 28)

Labels needed until a classifier retrained on the answers reaches a target accuracy, with the
queue in uncertainty order (:func:`analytics.metrics.active_order.label_entropy` of the last
model's probabilities, highest first) against the queue in random order.

Design (stated with every figure): the data set is scikit-learn's bundled **digits** (UCI
optical recognition of handwritten digits, 1,797 real labelled 8x8 images, 10 classes; it
ships inside scikit-learn, no download; no labelled *text* data set ships with a package
installed here: 20 Newsgroups needs a download). Per seed, a stratified third is the test set
and the rest the pool (1,198 items, in a seeded random natural order). Every item is answered
by one simulated annotator who gives the true label with probability ``1 - noise`` (0.8) and
else one of the nine others at random. The first ``--start`` (20) items of the natural order
are answered first in every arm; then after every ``--batch`` (20) answers a multinomial
logistic regression (standardised pixels) is retrained on all answers so far, its test
accuracy read, and its probabilities for the unanswered items order the next batch:

* **random**: the next items of the natural order (a queue without an active order);
* **active**: the highest entropy first;
* **studio**: the studio's order with its randomised share, as
  :func:`apps.annotations.ordering.queue_order_apply` builds it: a share ``--natural`` (0.2)
  of the items, drawn once per item (a seeded uniform draw with the keyed hash's law), keeps
  its natural place, the other places take the highest entropy first.

Labels-to-target is the number of answers when the accuracy first reaches ``--target``
(0.85); a run that never does counts as the whole pool (a lower bound: the script says how
many did, which can only understate the active order's saving). Over ``--seeds`` (10)
seeds the script prints each arm's mean and range, and the ratio active / random (and
studio / random) of the means with a 95 % percentile bootstrap interval over seeds (10,000
resamples).

Run from the repository root::

    .venv/bin/python -m benchmarks.active_ordering [--seeds 10] [--target 0.85] [--noise 0.2]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from analytics.metrics.active_order import label_entropy

ARMS = ("random", "active", "studio")


def noisy_answers(truth: np.ndarray, *, noise: float, n_labels: int, rng) -> np.ndarray:
    """One simulated answer per item: the true label with probability ``1 - noise``, else one
    of the other labels uniformly."""
    wrong = rng.random(truth.size) < noise
    shift = rng.integers(1, n_labels, size=truth.size)
    return np.where(wrong, (truth + shift) % n_labels, truth)


def queue(
    arm: str, *, unanswered: np.ndarray, entropy: np.ndarray, natural: np.ndarray
) -> np.ndarray:
    """The unanswered pool items (indices in natural order) in the arm's serving order."""
    if arm == "random":
        return unanswered
    if arm == "active":
        return unanswered[np.argsort(-entropy, kind="stable")]
    kept = natural[unanswered]
    order = unanswered.copy()
    ranked = unanswered[~kept][np.argsort(-entropy[~kept], kind="stable")]
    order[~kept] = ranked  # the randomised share keeps its places, the rest by entropy
    return order


def labels_to_target(
    arm: str,
    *,
    x_pool: np.ndarray,
    answers: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    natural: np.ndarray,
    start: int,
    batch: int,
    target: float,
) -> tuple[int, bool]:
    """Answers needed until the retrained classifier's test accuracy reaches ``target``, and
    whether it did (else every pool item was answered without reaching it)."""
    n = x_pool.shape[0]
    answered = np.zeros(n, dtype=bool)
    answered[:start] = True  # the pool is in natural order
    model = LogisticRegression(max_iter=300, C=1.0)
    while True:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(x_pool[answered], answers[answered])
        reached = (model.predict(x_test) == y_test).mean() >= target
        if reached or answered.all():
            return int(answered.sum()), bool(reached)
        unanswered = np.flatnonzero(~answered)
        probabilities = np.zeros((unanswered.size, 10))
        probabilities[:, model.classes_] = model.predict_proba(x_pool[unanswered])
        entropy = label_entropy(probabilities)
        served = queue(arm, unanswered=unanswered, entropy=entropy, natural=natural)
        answered[served[:batch]] = True


def ratio_interval(a: np.ndarray, b: np.ndarray, *, rng, resamples: int = 10_000):
    """mean(a) / mean(b) and its 95 % percentile bootstrap interval (seeds resampled)."""
    picks = rng.integers(0, a.size, size=(resamples, a.size))
    ratios = a[picks].mean(axis=1) / b[picks].mean(axis=1)
    low, high = np.quantile(ratios, [0.025, 0.975])
    return a.mean() / b.mean(), low, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--target", type=float, default=0.85)
    parser.add_argument("--noise", type=float, default=0.2)
    parser.add_argument("--start", type=int, default=20)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--natural", type=float, default=0.2)
    args = parser.parse_args()
    x, y = load_digits(return_X_y=True)
    began = time.perf_counter()
    results: dict[str, list[int]] = {arm: [] for arm in ARMS}
    missed: dict[str, int] = dict.fromkeys(ARMS, 0)
    for seed in range(args.seeds):
        rng = np.random.default_rng(seed)
        x_pool, x_test, y_pool, y_test = train_test_split(
            x, y, test_size=1 / 3, stratify=y, random_state=seed
        )
        scaler = StandardScaler().fit(x_pool)
        x_pool, x_test = scaler.transform(x_pool), scaler.transform(x_test)
        answers = noisy_answers(y_pool, noise=args.noise, n_labels=10, rng=rng)
        natural = rng.random(y_pool.size) < args.natural
        for arm in ARMS:
            n, reached = labels_to_target(
                arm,
                x_pool=x_pool,
                answers=answers,
                x_test=x_test,
                y_test=y_test,
                natural=natural,
                start=args.start,
                batch=args.batch,
                target=args.target,
            )
            results[arm].append(n)
            missed[arm] += not reached
    arrays = {arm: np.asarray(values, dtype=float) for arm, values in results.items()}
    print(
        f"digits (scikit-learn, {x.shape[0]} images, 10 classes), pool {y_pool.size}, test "
        f"{y_test.size}; one annotator per item, noise {args.noise:g}; logistic regression "
        f"retrained every {args.batch} answers after {args.start}; target accuracy "
        f"{args.target:g}; {args.seeds} seeds; natural share {args.natural:g} (studio arm)"
    )
    for arm in ARMS:
        values = arrays[arm]
        print(
            f"  {arm:<7} labels to target: mean {values.mean():6.1f}  (min {values.min():.0f}, "
            f"max {values.max():.0f}; never reached: {missed[arm]})  per seed "
            f"{values.astype(int).tolist()}"
        )
    boot = np.random.default_rng(2026)
    for arm in ("active", "studio"):
        ratio, low, high = ratio_interval(arrays[arm], arrays["random"], rng=boot)
        print(f"  {arm} / random: {ratio:.3f}  95 % bootstrap interval [{low:.3f}, {high:.3f}]")
    load = os.getloadavg()[0]
    print(f"  {time.perf_counter() - began:.1f} s, {os.cpu_count()} CPUs, load {load:.2f}")


if __name__ == "__main__":
    main()
