"""The figures of one model run, from arrays: DIC, BAE, Table 2's metrics, reference rows.

Everything is computed by :mod:`analytics.metrics` (Zhang et al. 2025); this module only
chooses the inputs the paper prescribes and packs the results as JSON:

* **DIC** (Eq. 3): ``M`` = ``pairwise_kappa`` of the human labels, ``M'`` = the same of the
  predictions, both on the same cells (an annotator's item counts when the human answered it
  *and* the model predicted it) and with the same ``min_overlap``.
* **BAE** (Eqs. 5-7), feature and region level: ``S_true`` = ``M``; ``S_model`` = cosine
  similarity of each annotator's mean feature / attention vector.
* **Traditional metrics** (Table 2): accuracy of each annotator's predictions against that
  annotator's own labels and their mean, Fleiss' kappa of the predictions (and of the humans,
  for reference), and Pearson's r per annotator of the label codes (ordered scales only).
* **Reference rows** (Table 5) on the same cells: Random and Consensus for DIC, Random and
  Uniform for BAE, with fixed seeds.
* **Traces** (continuous questions): ``M`` and ``M'`` are kappa_SDA pooled over the items
  each pair traced (:func:`pooled_kappa_sda`); Pearson's r per annotator replaces accuracy.
* **MDS maps**: the human map of ``S_true`` and the model's map, Procrustes-aligned to it,
  over the annotators whose similarities are all defined in both.
* **Intervals**: 95 % percentile intervals of DIC and of BAE per level from one bootstrap
  over items (:func:`~analytics.metrics.dic_bae_bootstrap`; traces:
  :func:`~analytics.metrics.dic_bae_bootstrap_sda` on the per-item pair tables,
  :data:`BOOTSTRAP_REPLICATES` replicates, seed :data:`SEED`), with the evidence: ``n_items``
  (items with a cell) and ``n_cells``. The traditional metrics carry theirs too: each
  annotator's accuracy a Wilson interval with ``n`` = the items compared
  (:func:`~analytics.metrics.wilson_interval`); the mean accuracy and the predictions'
  Fleiss' kappa a percentile interval from the same item bootstrap (same replicates and
  seed; :func:`~analytics.metrics.mean_accuracy_bootstrap` draws the very items DIC's
  replicates drew, :func:`~analytics.metrics.fleiss_kappa_bootstrap` the items with two or
  more labels). The annotators' Fleiss' kappa is the dashboard's computation
  (:func:`~analytics.metrics.intervals.rows_agreement`: Gwet's linearisation interval) on
  the answers compared with the run, named by ``fleiss_human_rows`` (annotators, answers,
  items with two or more): on the same answers it is the dashboard's figure.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from analytics.metrics import (
    DicBaeIntervals,
    Interval,
    bae,
    bae_random_baseline,
    bae_uniform_baseline,
    cosine_similarity_matrix,
    dic,
    dic_bae_bootstrap,
    dic_bae_bootstrap_sda,
    dic_consensus_baseline,
    dic_random_baseline,
    fleiss_kappa,
    fleiss_kappa_bootstrap,
    kappa_sda_from_counts,
    mds_embedding,
    mean_accuracy_bootstrap,
    pairwise_kappa,
    pearson,
    procrustes_align,
    sign_coincidence_matrix,
    wilson_interval,
)
from analytics.metrics.intervals import rows_agreement

SEED = 0
"""Seed of the random reference rows and of the MDS maps: figures are reproducible."""
MIN_MAP_ANNOTATORS = 3
BOOTSTRAP_REPLICATES = 500
"""Item-bootstrap replicates of a run's DIC/BAE intervals. The cost grows with the annotator
pairs x items: 0.04 s for the emotions demo's shape, about 2 s for 50 annotators x 2,000
items with 10 labels per item, about 10 s when all 50 label every item (2.45 million pair
items), 0.2 s for Rzhetsky's 8 x 15,521 (``benchmarks/model_runs.py``)."""
CONFIDENCE = 0.95
VECTOR_KINDS = ("feature", "attention")


def _json(values: NDArray[np.float64] | float) -> Any:
    """numpy -> JSON: nan becomes ``None``, floats rounded to 6 decimals."""
    arr = np.atleast_1d(np.asarray(values, dtype=float))
    out = np.round(arr, 6).astype(object)
    out[~np.isfinite(arr)] = None
    return out.tolist() if np.ndim(values) else out[0]


def _complete_subset(*matrices: NDArray[np.float64]) -> NDArray[np.intp]:
    """Indices of annotators whose entries are defined in every matrix among themselves.

    Greedy: drop the annotator with the most undefined entries until none is left.
    """
    missing = np.zeros(matrices[0].shape, dtype=bool)
    for matrix in matrices:
        missing |= np.isnan(matrix)
    keep = np.arange(missing.shape[0])
    while keep.size:
        sub = missing[np.ix_(keep, keep)]
        worst = sub.sum(axis=1)
        if not worst.any():
            break
        keep = np.delete(keep, int(worst.argmax()))
    return keep


def _maps(s_true: NDArray[np.float64], s_model: NDArray[np.float64]) -> dict[str, Any] | None:
    """Human MDS map and the model's, aligned to it, on the annotators both define."""
    keep = _complete_subset(s_true, s_model)
    if keep.size < MIN_MAP_ANNOTATORS:
        return None
    # SMACOF divides by the stress of the start, which is 0 when every similarity is 1 (one
    # point for all annotators, e.g. the Consensus model): the map is then a single point.
    with np.errstate(invalid="ignore", divide="ignore"):
        truth = mds_embedding(s_true[np.ix_(keep, keep)], seed=SEED)
        model = mds_embedding(s_model[np.ix_(keep, keep)], seed=SEED)
    model = procrustes_align(model, truth)
    return {"annotators": keep.tolist(), "truth": _json(truth), "model": _json(model)}


def _accuracy(human: NDArray[np.float64], predicted: NDArray[np.float64]) -> Interval:
    """Per annotator: share of the cells where the prediction equals the annotator's label,
    with its Wilson interval; ``n`` = the annotator's cells compared (nan where none)."""
    both = ~np.isnan(human) & ~np.isnan(predicted)
    hits = np.where(both, human == predicted, False).sum(axis=1)
    return wilson_interval(hits, both.sum(axis=1), confidence=CONFIDENCE)


def _bounds(interval: Interval) -> list[float | None] | None:
    """``[low, high]`` of a scalar interval, JSON-ready; ``None`` when undefined."""
    pair = _json(np.array([interval.low, interval.high]))
    return None if None in pair else pair


def _bounds_each(interval: Interval) -> list[list[float | None] | None]:
    """``[low, high]`` per entry of a vectorised interval (``None`` where undefined)."""
    lows, highs = _json(np.atleast_1d(interval.low)), _json(np.atleast_1d(interval.high))
    return [
        None if lo is None or hi is None else [lo, hi] for lo, hi in zip(lows, highs, strict=True)
    ]


def _pearson(human: NDArray[np.float64], predicted: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per annotator: Pearson's r of the label codes on the shared cells (nan if undefined)."""
    out = np.full(human.shape[0], np.nan)
    for k in range(human.shape[0]):  # one vectorised call per annotator: M calls, not M x N
        both = ~np.isnan(human[k]) & ~np.isnan(predicted[k])
        if both.sum() >= 2:
            out[k] = pearson(human[k, both], predicted[k, both])
    return out


def _mean(values: NDArray[np.float64]) -> float:
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")


def _similarities(
    vectors: dict[str, NDArray[np.float64]], n_annotators: int
) -> dict[str, NDArray[np.float64]]:
    """``S_model`` per vector kind uploaded: cosine similarities, nan for annotators without
    a vector."""
    out = {}
    for kind in VECTOR_KINDS:
        if kind not in vectors:
            continue
        arr = vectors[kind]
        has = ~np.isnan(arr).any(axis=1)
        s_model = np.full((n_annotators, n_annotators), np.nan)
        s_model[np.ix_(has, has)] = cosine_similarity_matrix(arr[has])
        out[kind] = s_model
    return out


def _intervals(result: DicBaeIntervals, *, items: NDArray[np.intp]) -> dict[str, Any]:
    """The intervals and evidence of :func:`dic_bae_bootstrap` as figures (JSON-ready).

    ``items`` are the resampled items (column indices or item ids, increasing): their digest
    and DIC's replicates let the leaderboard pair two runs' replicates, which drew the same
    items when the answers, the items and the seed are the same.
    """

    def bias(interval: Interval) -> float | None:
        drawn = np.zeros(0) if interval.replicates is None else interval.replicates
        finite = drawn[np.isfinite(drawn)]
        return _json(float(finite.mean() - interval.estimate)) if finite.size else None

    return {
        "dic_interval": _bounds(result.dic),
        "dic_bias": bias(result.dic),
        "bae_interval": {kind: _bounds(i) for kind, i in result.bae.items()},
        "bae_bias": {kind: bias(i) for kind, i in result.bae.items()},
        "n_items": result.n_items,
        "dic_replicates": _json(
            np.zeros(0) if result.dic.replicates is None else result.dic.replicates
        ),
        "bootstrap_items": hashlib.sha256(np.asarray(items, dtype=np.int64).tobytes()).hexdigest(),
        "interval": {
            "method": "item bootstrap, percentile",
            "n_boot": BOOTSTRAP_REPLICATES,
            "confidence": CONFIDENCE,
        },
    }


def _structure(
    m_true: NDArray[np.float64],
    m_pred: NDArray[np.float64],
    *,
    min_overlap: int,
    vectors: dict[str, NDArray[np.float64]],
) -> dict[str, Any]:
    """DIC, both matrices, BAE per vector kind uploaded, the MDS maps, BAE reference rows."""
    figures: dict[str, Any] = {
        "min_overlap": min_overlap,
        "m_true": _json(m_true),
        "m_pred": _json(m_pred),
        "dic": _json(dic(m_true, m_pred)),
        "bae": {},
        "s_model": {},
        "maps": {"predictions": _maps(m_true, m_pred)},
        "baselines": {
            "bae_random": _json(bae_random_baseline(m_true, seed=SEED)),
            "bae_uniform": _json(bae_uniform_baseline(m_true)),
        },
    }
    for kind, s_model in _similarities(vectors, m_true.shape[0]).items():
        figures["bae"][kind] = _json(bae(s_model, m_true))
        figures["s_model"][kind] = _json(s_model)
        figures["maps"][kind] = _maps(m_true, s_model)
    return figures


def evaluate_run(
    *,
    human: NDArray[np.float64],
    predicted: NDArray[np.float64],
    n_labels: int,
    ordered: bool,
    min_overlap: int,
    vectors: dict[str, NDArray[np.float64]],
) -> dict[str, Any]:
    """All figures of a run on a categorical question, JSON-ready.

    Parameters
    ----------
    human, predicted : ndarray, shape (n_annotators, n_items)
        Label codes (nan = none) on the same axes.
    n_labels : int
        Size of the label scale (the Random baseline draws from all of it).
    ordered : bool
        Whether the codes are ordered (Pearson's r is reported only then).
    min_overlap : int
        Pairs sharing fewer cells get no kappa (as on the live dashboard).
    vectors : dict
        ``"feature"`` / ``"attention"`` -> ``(n_annotators, dim)`` mean vectors, a row of nan
        for an annotator without one.

    Returns
    -------
    dict
        ``dic``, ``bae`` (per level), ``m_true``, ``m_pred``, ``s_model`` (per level),
        ``maps`` (per level, plus ``predictions``: the map of ``M'``), ``accuracy``,
        ``accuracy_mean``, ``pearson``, ``pearson_mean``, ``fleiss_pred``, ``fleiss_human``,
        ``baselines`` (``dic_random``, ``dic_consensus``, ``bae_random``, ``bae_uniform``),
        ``n_cells``, ``min_overlap``, ``measure``; the intervals ``dic_interval`` and
        ``bae_interval`` (per level; ``[low, high]`` or ``None``), ``dic_bias`` and
        ``bae_bias`` (per level: mean replicate minus estimate, the bootstrap's estimate of
        the bias), ``n_items``, ``dic_replicates`` and ``bootstrap_items`` (a digest of the
        resampled items: for paired comparisons of runs) and ``interval`` (method,
        replicates, confidence); the traditional metrics' intervals ``accuracy_interval``
        (per annotator, Wilson) with ``accuracy_n`` (items compared), and
        ``accuracy_mean_interval``, ``fleiss_pred_interval`` (item bootstrap) with
        ``fleiss_n_items`` (items with two or more predictions), ``fleiss_human_interval``
        (the dashboard's, :func:`~analytics.metrics.intervals.rows_agreement`) with
        ``fleiss_human_rows`` (annotators, answers, items with two or more);
        nan as ``None``.
    """
    both = ~np.isnan(human) & ~np.isnan(predicted)
    human = np.where(both, human, np.nan)
    predicted = np.where(both, predicted, np.nan)
    m_true = pairwise_kappa(human, min_overlap=min_overlap)
    figures = _structure(
        m_true,
        pairwise_kappa(predicted, min_overlap=min_overlap),
        min_overlap=min_overlap,
        vectors=vectors,
    )
    accuracy = _accuracy(human, predicted)
    accuracy_mean = mean_accuracy_bootstrap(
        human, predicted, n_boot=BOOTSTRAP_REPLICATES, confidence=CONFIDENCE, seed=SEED
    )
    fleiss_pred = fleiss_kappa_bootstrap(
        predicted, n_boot=BOOTSTRAP_REPLICATES, confidence=CONFIDENCE, seed=SEED
    )
    # the annotators' figure is the dashboard's computation, on the answers compared here
    humans = rows_agreement(human, confidence=CONFIDENCE, alpha=False)
    pearson_r = _pearson(human, predicted) if ordered else np.full(human.shape[0], np.nan)
    figures.update(
        measure="kappa",
        n_cells=int(both.sum()),
        accuracy=_json(np.asarray(accuracy.estimate, dtype=float)),
        accuracy_interval=_bounds_each(accuracy),
        accuracy_n=np.asarray(accuracy.n, dtype=int).tolist(),
        accuracy_mean=_json(_mean(np.asarray(accuracy.estimate, dtype=float))),
        accuracy_mean_interval=_bounds(accuracy_mean),
        pearson=_json(pearson_r),
        pearson_mean=_json(_mean(pearson_r)),
        fleiss_pred=_json(fleiss_kappa(predicted)),
        fleiss_pred_interval=_bounds(fleiss_pred),
        fleiss_human=_json(humans.fleiss_kappa.estimate),
        fleiss_human_interval=_bounds(humans.fleiss_kappa),
        fleiss_human_rows={
            "annotators": humans.annotators,
            "answers": humans.answers,
            "items": humans.items,
        },
        fleiss_n_items=int(fleiss_pred.n),
    )
    figures.update(
        _intervals(
            dic_bae_bootstrap(
                human,
                predicted,
                s_model=_similarities(vectors, human.shape[0]),
                min_overlap=min_overlap,
                n_boot=BOOTSTRAP_REPLICATES,
                confidence=CONFIDENCE,
                seed=SEED,
            ),
            items=np.flatnonzero(both.any(axis=0)),
        )
    )
    figures["baselines"].update(
        dic_random=_json(
            dic_random_baseline(human, n_labels=n_labels, seed=SEED, min_overlap=min_overlap)
        ),
        dic_consensus=_json(dic_consensus_baseline(human, min_overlap=min_overlap)),
    )
    return figures


Cell = tuple[int, int]
"""(annotator index, item id) of one trace."""
TRACE_MIN_ITEMS = 1
"""Pairs of annotators who traced fewer items in common get no kappa_SDA."""
RANDOM_REPEATS = 10


def _by_item(traces: dict[Cell, NDArray[np.float64]]) -> dict[int, list[Cell]]:
    cells: dict[int, list[Cell]] = {}
    for cell in sorted(traces):
        cells.setdefault(cell[1], []).append(cell)
    return cells


class ItemPairTables(NamedTuple):
    """Sign-coincidence tables of every pair of annotators on every item both traced.

    Row ``r``: ``tables[r]`` (3 x 3) of annotators ``first[r] < second[r]`` on ``item[r]``;
    ``traced`` = ``(items, annotators)`` of every trace (the cells).
    """

    item: NDArray[np.intp]
    first: NDArray[np.intp]
    second: NDArray[np.intp]
    tables: NDArray[np.float64]
    traced: tuple[NDArray[np.intp], NDArray[np.intp]]


def item_pair_tables(traces: dict[Cell, NDArray[np.float64]], *, tol: float) -> ItemPairTables:
    """Per item, the traces (cut to the item's shortest) give every pair's 3 x 3 table of
    difference-sign coincidences (``sign_coincidence_matrix``: one matrix product per item).
    Two dicts with the same cells and trace lengths give their rows in the same order."""
    items, firsts, seconds, tables = [], [], [], []
    for item, cells in _by_item(traces).items():
        ks = np.array([k for k, _ in cells], dtype=np.intp)  # increasing: cells are sorted
        length = min(traces[cell].size for cell in cells)
        stacked = np.vstack([traces[cell][:length] for cell in cells])
        first, second = np.triu_indices(ks.size, 1)
        items.append(np.full(first.size, item, dtype=np.intp))
        firsts.append(ks[first])
        seconds.append(ks[second])
        tables.append(sign_coincidence_matrix(stacked, tol=tol)[first, second])
    cells = sorted(traces)
    traced = (
        np.array([item for _, item in cells], dtype=np.intp),
        np.array([k for k, _ in cells], dtype=np.intp),
    )
    if not items:
        empty = np.zeros(0, dtype=np.intp)
        return ItemPairTables(empty, empty, empty, np.zeros((0, 3, 3)), traced)
    return ItemPairTables(
        np.concatenate(items),
        np.concatenate(firsts),
        np.concatenate(seconds),
        np.concatenate(tables).astype(np.float64),
        traced,
    )


def _pooled(tables: ItemPairTables, n_annotators: int) -> NDArray[np.float64]:
    """kappa_SDA of every pair from its tables summed over items (see :func:`pooled_kappa_sda`)."""
    m = n_annotators
    pair = tables.first * m + tables.second
    cells = tables.tables.reshape(-1, 9)
    counts = np.stack(
        [np.bincount(pair, weights=cells[:, c], minlength=m * m) for c in range(9)], axis=-1
    ).reshape(m, m, 3, 3)
    shared = np.bincount(pair, minlength=m * m).reshape(m, m)
    counts += counts.transpose(1, 0, 3, 2)
    shared += shared.T
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = np.asarray(kappa_sda_from_counts(counts), dtype=float)
    kappa[shared < TRACE_MIN_ITEMS] = np.nan
    traced = np.bincount(tables.traced[1], minlength=n_annotators)
    kappa[np.diag_indices_from(kappa)] = np.where(traced >= TRACE_MIN_ITEMS, 1.0, np.nan)
    return kappa


def pooled_kappa_sda(
    traces: dict[Cell, NDArray[np.float64]], *, n_annotators: int, tol: float
) -> NDArray[np.float64]:
    r"""kappa_SDA of every pair of annotators, pooled over the items both traced.

    Per item, the traces (cut to the item's shortest) give every pair's 3 x 3 table of
    difference-sign coincidences (:func:`item_pair_tables`); tables add up over items and
    ``kappa_sda_from_counts`` turns each pair's sum into kappa_SDA (Booth & Narayanan 2020).
    Pairs sharing fewer than :data:`TRACE_MIN_ITEMS` items are nan; the diagonal is 1 for
    annotators who traced that many items and nan for the others, as in ``pairwise_kappa``.
    """
    return _pooled(item_pair_tables(traces, tol=tol), n_annotators)


def evaluate_trace_run(
    *,
    human: dict[Cell, NDArray[np.float64]],
    predicted: dict[Cell, NDArray[np.float64]],
    n_annotators: int,
    tol: float,
    vectors: dict[str, NDArray[np.float64]],
) -> dict[str, Any]:
    """All figures of a run on a continuous question, JSON-ready.

    The consistency matrices are :func:`pooled_kappa_sda` of the human traces and of the
    predicted ones, on the cells (annotator, item) both have, each predicted trace cut to the
    length of the human one. Traditional metric: Pearson's r per annotator over all their
    samples (accuracy and Fleiss' kappa do not apply to traces). Reference rows: Random =
    independent uniform samples in [0, 1] for every cell (:data:`RANDOM_REPEATS` draws, fixed
    seed), Consensus = the mean of the item's human traces given to every annotator; BAE's as
    for labels. Same keys as :func:`evaluate_run`.
    """
    cells = sorted(set(human) & set(predicted))
    length = {cell: min(human[cell].size, predicted[cell].size) for cell in cells}
    truth = {cell: human[cell][: length[cell]] for cell in cells}
    model = {cell: predicted[cell][: length[cell]] for cell in cells}

    def kappa(traces: dict[Cell, NDArray[np.float64]]) -> NDArray[np.float64]:
        return pooled_kappa_sda(traces, n_annotators=n_annotators, tol=tol)

    truth_tables = item_pair_tables(truth, tol=tol)
    model_tables = item_pair_tables(model, tol=tol)
    m_true = _pooled(truth_tables, n_annotators)
    figures = _structure(
        m_true, _pooled(model_tables, n_annotators), min_overlap=TRACE_MIN_ITEMS, vectors=vectors
    )
    figures.update(
        _intervals(
            dic_bae_bootstrap_sda(
                truth_tables.item,
                truth_tables.first,
                truth_tables.second,
                truth_tables.tables,
                model_tables.tables,
                traced=truth_tables.traced,
                n_annotators=n_annotators,
                min_items=TRACE_MIN_ITEMS,
                s_model=_similarities(vectors, n_annotators),
                n_boot=BOOTSTRAP_REPLICATES,
                confidence=CONFIDENCE,
                seed=SEED,
            ),
            items=np.unique(truth_tables.traced[0]),
        )
    )
    pearson_r = np.full(n_annotators, np.nan)
    for k in {k for k, _ in cells}:
        mine = [cell for cell in cells if cell[0] == k]
        x = np.concatenate([truth[cell] for cell in mine])
        y = np.concatenate([model[cell] for cell in mine])
        pearson_r[k] = pearson(x, y)
    rng = np.random.default_rng(SEED)
    random_dic = [
        dic(m_true, kappa({cell: rng.random(trace.size) for cell, trace in truth.items()}))
        for _ in range(RANDOM_REPEATS)
    ]
    consensus: dict[Cell, NDArray[np.float64]] = {}
    for item_cells in _by_item(truth).values():
        shortest = min(truth[cell].size for cell in item_cells)
        mean = np.mean([truth[cell][:shortest] for cell in item_cells], axis=0)
        consensus.update(dict.fromkeys(item_cells, mean))
    figures.update(
        measure="kappa_SDA",
        n_cells=len(cells),
        accuracy=[None] * n_annotators,
        accuracy_mean=None,
        pearson=_json(pearson_r),
        pearson_mean=_json(_mean(pearson_r)),
        fleiss_pred=None,
        fleiss_human=None,
    )
    figures["baselines"].update(
        dic_random=_json(float(np.mean(random_dic))),
        dic_consensus=_json(dic(m_true, kappa(consensus))),
    )
    return figures
