r"""Crowd models for sparse designs: MACE, agreement with the leave-one-out consensus, copiers.

A crowd design is sparse: many annotators, three to five answers per item, 20-40 items each.
Two annotators then share a handful of items or none, so pairwise figures (Cohen's kappa of a
pair, "kappa with others") rest on almost nothing. The models here read every answer at once:

* :func:`mace` fits MACE (Hovy et al. 2013): each annotator either knows the true label or
  "spams" from a label distribution of its own; ``spam`` is the share of its answers the model
  puts down to spamming.
* :func:`consensus_agreement` compares each annotator's answers with the consensus of the
  *other* annotators on the same items (the MACE posterior without the annotator's own
  answers) and with what answering at random would give; an exact binomial test and a
  Clopper-Pearson interval say whether the annotator agrees with the others more than chance.
* :func:`copier_pairs` finds pairs of annotators whose answers coincide far more often than
  their agreement with everybody else predicts (copied answers, shared accounts, collusion).

Everything is vectorised over the observed ratings (sparse one-hot products); only the
copier test loops, over the few pairs that share many near-identical answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse, stats

from analytics.metrics._validate import LabelData, as_label_data

__all__ = [
    "ConsensusAgreement",
    "CopierPair",
    "MaceResult",
    "TrustInterval",
    "clopper_pearson",
    "consensus_agreement",
    "copier_pairs",
    "mace",
    "mace_trust",
    "spammer_posterior",
]


@dataclass(frozen=True)
class MaceResult:
    r"""Fitted MACE model.

    Attributes
    ----------
    values : ndarray, shape (n_labels,)
        Label codes, increasing; axis order of the arrays below.
    competence : ndarray, shape (n_annotators,)
        :math:`\theta_k`: probability that annotator ``k`` knows the label (does not spam);
        nan for annotators without ratings.
    spam : ndarray, shape (n_annotators,)
        :math:`1 - \theta_k`, the share of answers put down to spamming (Hovy et al.'s
        "spammer" score).
    strategies : ndarray, shape (n_annotators, n_labels)
        :math:`\xi_k`: the label distribution of annotator ``k`` when spamming.
    posteriors : ndarray, shape (n_items, n_labels)
        P(true label | ratings) per item (uniform for unrated items).
    log_likelihood : float
        Marginal log-likelihood of the ratings at the final parameters.
    n_iter : int
        EM iterations run.
    converged : bool
        Whether the largest parameter change fell below ``tol`` before ``max_iter``.
    """

    values: NDArray[np.float64]
    competence: NDArray[np.float64]
    spam: NDArray[np.float64]
    strategies: NDArray[np.float64]
    posteriors: NDArray[np.float64]
    log_likelihood: float
    n_iter: int
    converged: bool


def _answer_log_likelihood(
    data: LabelData, theta: NDArray[np.float64], xi: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``(n_ratings, n_labels)``: log P(rating r | true label t) under MACE."""
    k, code = data.annotator, data.code
    spam = ((1.0 - theta[k]) * xi[k, code])[:, None]
    knows = theta[k][:, None] * (code[:, None] == np.arange(data.n_values)[None, :])
    return np.log(spam + knows)


def _item_sums(data: LabelData) -> sparse.csr_array:
    """``(n_items, n_ratings)`` indicator: sums rating rows into their items."""
    n = data.item.size
    return sparse.csr_array((np.ones(n), (data.item, np.arange(n))), shape=(data.n_items, n))


def _posteriors(log_joint: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray]:
    """Row-normalised ``exp(log_joint)`` and each row's log normaliser."""
    top = log_joint.max(axis=1, keepdims=True)
    weights = np.exp(log_joint - top)
    total = weights.sum(axis=1, keepdims=True)
    return weights / total, (np.log(total) + top)[:, 0]


def _mace_m_step(
    data: LabelData,
    item_post: NDArray[np.float64],
    theta: NDArray[np.float64],
    xi: NDArray[np.float64],
    smoothing: float,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """New (theta, xi) from the item posteriors at the current parameters."""
    k, code = data.annotator, data.code
    gold = item_post[data.item, code]  # P(true label = the rating)
    spam_part = (1.0 - theta[k]) * xi[k, code]
    knows = gold * theta[k] / (theta[k] + spam_part)  # P(not spamming | every answer)
    m, v = data.n_annotators, data.n_values
    known = np.bincount(k, weights=knows, minlength=m)
    answers = np.bincount(k, minlength=m).astype(float)
    new_theta = (known + smoothing) / (answers + 2 * smoothing)
    spam_counts = np.zeros((m, v))
    np.add.at(spam_counts, (k, code), 1.0 - knows)
    spam_counts += smoothing
    return new_theta, spam_counts / spam_counts.sum(axis=1, keepdims=True)


def mace(
    ratings: ArrayLike,
    *,
    max_iter: int = 1000,
    tol: float = 1e-7,
    smoothing: float | None = None,
    values: ArrayLike | None = None,
) -> MaceResult:
    r"""Fit MACE (Multi-Annotator Competence Estimation) by EM from the majority vote.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Integer label codes; ``np.nan`` = not annotated.
    max_iter : int
        Maximum number of EM iterations.
    tol : float
        Stop when no parameter moved by more than ``tol`` in an iteration.
    smoothing : float, optional
        Pseudo-count added to the expected counts of every parameter before normalising
        (default ``0.01 / n_labels``, Hovy et al.'s and crowd-kit's choice).
    values : array_like, optional
        The label domain (default: the labels observed).

    Returns
    -------
    MaceResult

    Notes
    -----
    The true label :math:`T_i` is uniform over the :math:`C` labels; annotator :math:`k`
    spams on an item with probability :math:`1 - \theta_k` and then answers from
    :math:`\xi_k`, else gives :math:`T_i`:

    .. math::

        P(y_{ki} = l \mid T_i = t) = \theta_k [l = t] + (1 - \theta_k)\, \xi_{kl}

    E step: :math:`g_{it} \propto \prod_k P(y_{ki} \mid T_i = t)`, and each answer's
    probability of not being spam (the truth being the answer, and known)

    .. math::

        s_{ki} = g_{i y_{ki}} \frac{\theta_k}{\theta_k + (1 - \theta_k) \xi_{k y_{ki}}}

    M step: :math:`\theta_k = (\sum_i s_{ki} + \epsilon) / (n_k + 2\epsilon)`,
    :math:`\xi_{kl} \propto \epsilon + \sum_{i: y_{ki} = l} (1 - s_{ki})`.
    This is EM with additive smoothing, one of the paper's two training schemes (the other
    is variational Bayes with Beta and Dirichlet priors); it is crowd-kit's
    ``MACE(method="em")``. The start is the soft majority vote (deterministic) instead of
    random restarts.

    References
    ----------
    Hovy, D., Berg-Kirkpatrick, T., Vaswani, A. & Hovy, E. (2013). Learning whom to trust with
    MACE. Proceedings of NAACL-HLT 2013, 1120-1130. https://aclanthology.org/N13-1132

    Examples
    --------
    >>> r = [[0, 0, 1, 1, 0, 1, 2, 2], [0, 0, 1, 1, 0, 1, 2, 2], [0, 0, 1, 1, 0, 1, 2, 1],
    ...      [2, 0, 0, 1, 2, 2, 0, 1]]
    >>> fit = mace(r)
    >>> fit.spam.round(2)
    array([0. , 0. , 0.2, 1. ])
    """
    if max_iter < 1:
        raise ValueError(f"max_iter must be at least 1; got {max_iter}")
    data = as_label_data(ratings, values=values)
    if data.n_values == 0:
        raise ValueError("ratings hold no label: nothing to fit")
    m, v = data.n_annotators, data.n_values
    eps = 0.01 / v if smoothing is None else float(smoothing)
    if not eps > 0:
        raise ValueError(f"smoothing must be positive; got {smoothing}")
    to_items = _item_sums(data)
    counts = data.item_counts().toarray() + 1e-3
    item_post = counts / counts.sum(axis=1, keepdims=True)  # soft majority vote
    theta, xi = np.full(m, 0.5), np.full((m, v), 1.0 / v)
    converged, n_iter, log_likelihood = False, 0, float("nan")
    while n_iter < max_iter and not converged:
        n_iter += 1
        new_theta, new_xi = _mace_m_step(data, item_post, theta, xi, eps)
        moved = max(np.abs(new_theta - theta).max(), np.abs(new_xi - xi).max())
        theta, xi = new_theta, new_xi
        joint = to_items @ _answer_log_likelihood(data, theta, xi) - np.log(v)
        item_post, normaliser = _posteriors(joint)
        log_likelihood = float(normaliser[np.bincount(data.item, minlength=data.n_items) > 0].sum())
        converged = moved < tol
    rated = np.bincount(data.annotator, minlength=m) > 0
    theta = np.where(rated, theta, np.nan)
    return MaceResult(
        data.values, theta, 1.0 - theta, xi, item_post, log_likelihood, n_iter, converged
    )


def _leave_one_out(
    data: LabelData, fit: MaceResult
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Per rating ``(n_ratings, n_labels)``: the log-likelihood of each true label given the
    *other* annotators' answers on the rating's item (MACE), and whether anyone else rated it.
    """
    theta = np.nan_to_num(fit.competence, nan=0.5)
    own = _answer_log_likelihood(data, theta, fit.strategies)
    others = (_item_sums(data) @ own)[data.item] - own
    raters = np.bincount(data.item, minlength=data.n_items)[data.item]
    return others, raters > 1


def _label_shares(data: LabelData, used: NDArray[np.bool_]) -> NDArray[np.float64]:
    """``(n_annotators, n_labels)``: each annotator's share of each label among ``used``
    ratings (zeros for an annotator without any)."""
    shares = np.zeros((data.n_annotators, data.n_values))
    np.add.at(shares, (data.annotator[used], data.code[used]), 1.0)
    return shares / np.maximum(shares.sum(axis=1, keepdims=True), 1.0)


class ConsensusAgreement(NamedTuple):
    """Each annotator's agreement with the other annotators' consensus (arrays over annotators).

    ``agree`` of ``n`` compared items agree; ``chance`` agreements were expected had the
    annotator answered at random with its own label mix; ``rate`` = agree / n with its
    Clopper-Pearson interval ``low``-``high``; ``p_value`` of the one-sided exact binomial
    test "no more agreement than chance"; ``consensus`` the others' label of each rating
    (aligned with the rating order of ``as_label_data``), as a code into ``values``.
    """

    agree: NDArray[np.int64]
    n: NDArray[np.int64]
    chance: NDArray[np.float64]
    rate: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]
    p_value: NDArray[np.float64]


def clopper_pearson(
    successes: ArrayLike, trials: ArrayLike, *, confidence: float = 0.95
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    r"""Exact (Clopper-Pearson) interval of a binomial proportion, elementwise.

    .. math:: L = B^{-1}_{\alpha/2}(x, n - x + 1), \quad U = B^{-1}_{1 - \alpha/2}(x + 1, n - x)

    with :math:`B^{-1}_q` the Beta quantile, :math:`L = 0` at :math:`x = 0` and :math:`U = 1`
    at :math:`x = n`; nan where :math:`n = 0`.

    References
    ----------
    Clopper, C. J. & Pearson, E. S. (1934). The use of confidence or fiducial limits
    illustrated in the case of the binomial. Biometrika 26(4), 404-413. doi:10.2307/2331986

    Examples
    --------
    >>> low, high = clopper_pearson([9, 0], [30, 5])
    >>> low.round(3), high.round(3)
    (array([0.147, 0.   ]), array([0.494, 0.522]))
    """
    x = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    a = (1.0 - confidence) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(x > 0, stats.beta.ppf(a, x, n - x + 1), 0.0)
        high = np.where(x < n, stats.beta.ppf(1 - a, x + 1, n - x), 1.0)
    empty = n <= 0
    return np.where(empty, np.nan, low), np.where(empty, np.nan, high)


def consensus_agreement(
    ratings: ArrayLike, *, fit: MaceResult | None = None, confidence: float = 0.95
) -> ConsensusAgreement:
    r"""Agreement of each annotator with the consensus of the others, against chance.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Integer label codes; ``np.nan`` = not annotated.
    fit : MaceResult, optional
        A MACE fit of ``ratings`` (default: fitted here).
    confidence : float
        Level of the interval of the agreement rate.

    Returns
    -------
    ConsensusAgreement
        Per annotator; ``n`` counts the annotator's items that someone else rated too (items
        it rated alone compare with nothing).

    Notes
    -----
    The consensus of the others on item :math:`i` leaves annotator :math:`k` out of the MACE
    posterior: :math:`\hat y_{-k,i} = \arg\max_t \sum_{j \ne k} \log P(y_{ji} \mid T_i = t)`
    (an answer weighs by how far MACE trusts its annotator; with equal trust it is the
    majority; ties go to the lower code). With :math:`q_k` the annotator's own label shares,

    .. math::

        A_k = \sum_i [y_{ki} = \hat y_{-k,i}], \qquad
        c_k = \sum_i q_{k, \hat y_{-k,i}}, \qquad
        p_k = P(X \ge A_k), \ X \sim \mathrm{Bin}(n_k, c_k / n_k)

    :math:`c_k` is the expected agreement of an annotator answering at random with its own
    label mix, and the binomial tail is conservative against the exact (Poisson-binomial)
    null distribution above its mean (Hoeffding 1956). The interval of :math:`A_k / n_k` is
    :func:`clopper_pearson`.

    References
    ----------
    Hovy, D., Berg-Kirkpatrick, T., Vaswani, A. & Hovy, E. (2013). Learning whom to trust with
    MACE. Proceedings of NAACL-HLT 2013, 1120-1130. https://aclanthology.org/N13-1132

    Hoeffding, W. (1956). On the distribution of the number of successes in independent
    trials. Annals of Mathematical Statistics 27(3), 713-721. doi:10.1214/aoms/1177728178

    Examples
    --------
    >>> r = [[0, 0, 1, 1, 0, 1, 2, 2], [0, 0, 1, 1, 0, 1, 2, 2], [0, 0, 1, 1, 0, 1, 2, 1],
    ...      [2, 0, 0, 1, 2, 2, 0, 1]]
    >>> found = consensus_agreement(r)
    >>> found.agree.tolist(), found.n.tolist(), found.chance.round(1).tolist()
    ([8, 8, 7, 2], [8, 8, 8, 8], [2.8, 2.8, 2.9, 2.6])
    """
    data = as_label_data(ratings)
    m = data.n_annotators
    if data.item.size == 0:
        empty = np.zeros(m, dtype=np.int64)
        nan = np.full(m, np.nan)
        return ConsensusAgreement(empty, empty, nan, nan, nan, nan, nan)
    others, compared = _leave_one_out(data, mace(ratings) if fit is None else fit)
    consensus = np.argmax(others, axis=1)
    k = data.annotator
    shares = _label_shares(data, compared)
    n = np.bincount(k, weights=compared, minlength=m).astype(np.int64)
    agree = np.bincount(k, weights=compared & (consensus == data.code), minlength=m).astype(
        np.int64
    )
    chance = np.bincount(k, weights=compared * shares[k, consensus], minlength=m)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(n > 0, agree / n, np.nan)
        p0 = np.where(n > 0, chance / np.maximum(n, 1), np.nan)
        p_value = np.where(n > 0, stats.binom.sf(agree - 1, n, np.clip(p0, 0, 1)), np.nan)
    low, high = clopper_pearson(agree, n, confidence=confidence)
    return ConsensusAgreement(agree, n, np.where(n > 0, chance, np.nan), rate, low, high, p_value)


class TrustInterval(NamedTuple):
    r"""MACE trust of each annotator against the others' answers (arrays over annotators).

    ``estimate`` is :math:`\hat\theta_k`, the share of the annotator's answers that follow
    the truth rather than a random pick; ``low``-``high`` its profile-likelihood interval
    (nan where it would not cover: too few other answers per item or items);
    ``n`` the items compared; ``statistic`` the likelihood-ratio statistic of "answers at
    random" (:math:`\theta_k = 0`) and ``p_value`` its test.
    """

    estimate: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]
    n: NDArray[np.int64]
    statistic: NDArray[np.float64]
    p_value: NDArray[np.float64]


def _bisect(
    f: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    lo: NDArray[np.float64],
    hi: NDArray[np.float64],
    *,
    steps: int = 50,
) -> NDArray[np.float64]:
    """Elementwise root of a decreasing ``f`` (positive at ``lo``, negative at ``hi``)."""
    lo, hi = lo.copy(), hi.copy()
    for _ in range(steps):
        mid = (lo + hi) / 2
        up = f(mid) > 0
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return (lo + hi) / 2


class _TrustTerms(NamedTuple):
    """Per compared rating: the others' truth posterior of the given answer ``g``, the
    annotator ``k``, its own share of that answer ``xi`` and the other answers on the item."""

    g: NDArray[np.float64]
    k: NDArray[np.intp]
    xi: NDArray[np.float64]
    others: NDArray[np.float64]
    m: int

    @classmethod
    def of(cls, data: LabelData, fit: MaceResult) -> _TrustTerms:
        others, used = _leave_one_out(data, fit)
        posterior = np.exp(others - others.max(axis=1, keepdims=True))
        rows = np.arange(data.code.size)
        g = (posterior[rows, data.code] / posterior.sum(axis=1))[used]
        k = data.annotator[used]
        xi = _label_shares(data, used)[k, data.code[used]]
        raters = np.bincount(data.item, minlength=data.n_items)[data.item[used]]
        return cls(g, k, xi, (raters - 1).astype(np.float64), data.n_annotators)

    @property
    def n(self) -> NDArray[np.int64]:
        return np.bincount(self.k, minlength=self.m).astype(np.int64)

    def others_per_item(self) -> NDArray[np.float64]:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.bincount(self.k, weights=self.others, minlength=self.m) / self.n

    def loglik(self, theta: NDArray[np.float64]) -> NDArray[np.float64]:
        """The profile log-likelihood at ``theta`` (one value per annotator)."""
        k = self.k
        logs = np.log(theta[k] * self.g + (1 - theta[k]) * self.xi)
        return np.bincount(k, weights=logs, minlength=self.m).astype(np.float64)

    def loglik_at(self, thetas: NDArray[np.float64]) -> NDArray[np.float64]:
        """``(n_annotators, n_thetas)``: every annotator's log-likelihood at each value."""
        logs = np.log(np.outer(self.g, thetas) + np.outer(self.xi, 1.0 - thetas))
        to_annotator = sparse.csr_array(
            (np.ones(self.k.size), (self.k, np.arange(self.k.size))), shape=(self.m, self.k.size)
        )
        return np.asarray(to_annotator @ logs, dtype=np.float64)

    def slope(self, theta: NDArray[np.float64]) -> NDArray[np.float64]:
        k = self.k
        mix = theta[k] * self.g + (1 - theta[k]) * self.xi
        return np.bincount(k, weights=(self.g - self.xi) / mix, minlength=self.m).astype(np.float64)

    def estimate(self) -> NDArray[np.float64]:
        """The maximiser of the concave :meth:`loglik` on [0, 1], per annotator."""
        zeros, ones = np.zeros(self.m), np.ones(self.m)
        start, end = self.slope(zeros), self.slope(ones)
        estimate = np.where(start <= 0, 0.0, 1.0)
        inside = (start > 0) & (end < 0)
        return np.where(inside, _bisect(self.slope, zeros, ones), estimate)


def mace_trust(
    ratings: ArrayLike,
    *,
    fit: MaceResult | None = None,
    confidence: float = 0.95,
    min_items: int = 30,
    min_others: float = 8.0,
) -> TrustInterval:
    r"""MACE trust of each annotator with a profile-likelihood interval and a spammer test.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Integer label codes; ``np.nan`` = not annotated.
    fit : MaceResult, optional
        A MACE fit of ``ratings`` (default: fitted here).
    confidence : float
        Level of the interval.
    min_items, min_others : int, float
        The interval is shown (else its bounds are nan: "too few") only for an annotator
        with at least ``min_items`` compared items whose items carry on average at least
        ``min_others`` answers of other annotators. The interval treats the others'
        consensus as known; with a noisy consensus it is too narrow (latent-class raters of
        trust 0.6, 3 labels; ``benchmarks/interval_coverage.py --designs``): 3 answers per
        item covered 84-90 % at 20 and 200 items, 5 per item 92-93 % at 200 items, 5
        annotators rating everything 85-90 % at 20-30 items, 93 % at 60; 10 annotators
        rating everything (9 others per item) 93-95 % from 30 items on. The estimate,
        ``statistic`` and ``p_value`` are always given.

    Returns
    -------
    TrustInterval
        nan for annotators without an item someone else rated too.

    Notes
    -----
    With :math:`g_{-k,i}` the truth posterior of item :math:`i` from the *other* annotators'
    answers (the MACE fit without annotator :math:`k`'s term) and :math:`\xi_k` the
    annotator's own label shares, MACE's likelihood of the annotator's answers is

    .. math::

        \ell_k(\theta) = \sum_i \log\big(\theta\, g_{-k,i}(y_{ki})
                         + (1 - \theta)\, \xi_{k y_{ki}}\big)

    (concave in :math:`\theta`). :math:`\hat\theta_k` maximises it on [0, 1]; the interval is
    :math:`\{\theta : 2(\ell_k(\hat\theta_k) - \ell_k(\theta)) \le \chi^2_{1, 1-a}\}`; the
    spammer hypothesis :math:`\theta_k = 0` (every answer a random pick from
    :math:`\xi_k`) has :math:`D_k = 2(\ell_k(\hat\theta_k) - \ell_k(0))` and, on the boundary
    of the parameter space, :math:`p = \tfrac12 P(\chi^2_1 \ge D_k)` (Self & Liang 1987).
    The interval reaches 0 exactly when the annotator's answers fit random answering about
    as well as knowing the label.

    References
    ----------
    Hovy, D., Berg-Kirkpatrick, T., Vaswani, A. & Hovy, E. (2013). Learning whom to trust with
    MACE. Proceedings of NAACL-HLT 2013, 1120-1130. https://aclanthology.org/N13-1132

    Self, S. G. & Liang, K.-Y. (1987). Asymptotic properties of maximum likelihood estimators
    and likelihood ratio tests under nonstandard conditions. Journal of the American
    Statistical Association 82(398), 605-610. doi:10.1080/01621459.1987.10478472

    Examples
    --------
    >>> r = [[0, 0, 1, 1, 0, 1, 2, 2], [0, 0, 1, 1, 0, 1, 2, 2], [0, 0, 1, 1, 0, 1, 2, 1],
    ...      [2, 0, 0, 1, 2, 2, 0, 1]]
    >>> trust = mace_trust(r, min_items=1, min_others=0)
    >>> trust.estimate.round(2), trust.low.round(2)
    (array([1. , 1. , 0.8, 0. ]), array([0.68, 0.68, 0.28, 0.  ]))
    >>> mace_trust(r).low  # 8 items, 3 other answers each: "too few" for an interval
    array([nan, nan, nan, nan])
    """
    data = as_label_data(ratings)
    m = data.n_annotators
    if data.item.size == 0:
        nan = np.full(m, np.nan)
        return TrustInterval(nan, nan, nan, np.zeros(m, dtype=np.int64), nan, nan)
    terms = _TrustTerms.of(data, mace(ratings) if fit is None else fit)
    loglik, n = terms.loglik, terms.n
    zeros, ones = np.zeros(m), np.ones(m)
    estimate = terms.estimate()
    best = loglik(estimate)
    cut = best - stats.chi2.ppf(confidence, 1) / 2

    def above(theta: NDArray[np.float64]) -> NDArray[np.float64]:
        return loglik(theta) - cut

    low = np.where(loglik(zeros) >= cut, 0.0, _bisect(lambda t: -above(t), zeros, estimate))
    high = np.where(loglik(ones) >= cut, 1.0, _bisect(above, estimate, ones))
    statistic = np.maximum(2 * (best - loglik(zeros)), 0.0)
    p_value = np.where(statistic > 0, stats.chi2.sf(statistic, 1) / 2, 1.0)
    none = n == 0
    uncalibrated = (n < min_items) | ~(terms.others_per_item() >= min_others)
    low, high = np.where(uncalibrated, np.nan, low), np.where(uncalibrated, np.nan, high)

    def masked(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.where(none, np.nan, x)

    return TrustInterval(
        estimate=masked(estimate),
        low=masked(low),
        high=masked(high),
        n=n.astype(np.int64),
        statistic=masked(statistic),
        p_value=masked(p_value),
    )


class SpammerPosterior(NamedTuple):
    """Per annotator: ``probability`` that it answers at random (MACE trust 0) rather than
    like the other annotators, the ``bayes_factor`` of the two, and ``n`` compared items."""

    probability: NDArray[np.float64]
    bayes_factor: NDArray[np.float64]
    n: NDArray[np.int64]


def spammer_posterior(
    ratings: ArrayLike,
    *,
    fit: MaceResult | None = None,
    prior: float = 0.5,
    n_grid: int = 200,
) -> SpammerPosterior:
    r"""Posterior probability that each annotator answers at random rather than like the
    others (MACE trust 0 against the team's trust), an empirical-Bayes model comparison.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Integer label codes; ``np.nan`` = not annotated.
    fit : MaceResult, optional
        A MACE fit of ``ratings`` (default: fitted here).
    prior : float
        Prior probability of random answering, in (0, 1) (default 1/2: the data decide).
    n_grid : int
        Midpoints of the integral over the trust (midpoint rule on [0, 1]).

    Returns
    -------
    SpammerPosterior
        nan for annotators without an item someone else rated too.

    Notes
    -----
    With :math:`\ell_k(	heta)` the profile log-likelihood of :func:`mace_trust` (the
    annotator's answers given the others' MACE consensus) and :math:`\hat	heta_l` the
    other annotators' trust estimates, the two hypotheses are :math:`S`: :math:`\theta_k =
    0` (random answering from its own label mix) and :math:`G`: :math:`\theta_k` is drawn
    from the others' trust, a Beta distribution with the mean :math:`\mu_{-k}` and
    variance :math:`v_{-k}` of the :math:`\hat\theta_l`, :math:`l \ne k` (empirical Bayes,
    Robbins 1956; method of moments, :math:`a + b = \mu(1 - \mu)/v - 1`, with
    :math:`a, b \ge 1` so that the density has no pole at 0 or 1):

    .. math::

        B_k = \frac{e^{\ell_k(0)}}{\int_0^1 e^{\ell_k(\theta)}\,
              \mathrm{Beta}(\theta; a_{-k}, b_{-k})\, d\theta},
        \qquad
        P(S \mid y_k) = \frac{\pi B_k}{\pi B_k + 1 - \pi}

    (the integral by the midpoint rule on ``n_grid`` points).

    Unlike "the trust interval reaches 0" (a test that flags whoever cannot be told from
    random, i.e. every good annotator whose 20 items happen to be uninformative), it weighs
    random answering against answering like the team on the same evidence, so few items
    leave the probability near the prior instead of flagging. A sparse crowd (30
    annotators, 3 answers per item, 20-40 items each, 4 labels, accuracy 0.6-0.9):
    ``benchmarks/crowd_flags.py``.

    References
    ----------
    Hovy, D., Berg-Kirkpatrick, T., Vaswani, A. & Hovy, E. (2013). Learning whom to trust with
    MACE. Proceedings of NAACL-HLT 2013, 1120-1130. https://aclanthology.org/N13-1132

    Kass, R. E. & Raftery, A. E. (1995). Bayes factors. Journal of the American Statistical
    Association 90(430), 773-795. doi:10.1080/01621459.1995.10476572

    Robbins, H. (1956). An empirical Bayes approach to statistics. Proceedings of the Third
    Berkeley Symposium on Mathematical Statistics and Probability 1, 157-163.

    Examples
    --------
    >>> r = [[0, 0, 1, 1, 0, 1, 2, 2], [0, 0, 1, 1, 0, 1, 2, 2], [0, 0, 1, 1, 0, 1, 2, 1],
    ...      [2, 0, 0, 1, 2, 2, 0, 1]]
    >>> spammer_posterior(r).probability.round(2)
    array([0.  , 0.  , 0.02, 1.  ])
    """
    if not 0 < prior < 1:
        raise ValueError(f"prior must be in (0, 1); got {prior}")
    data = as_label_data(ratings)
    m = data.n_annotators
    if data.item.size == 0:
        nan = np.full(m, np.nan)
        return SpammerPosterior(nan, nan, np.zeros(m, dtype=np.int64))
    terms = _TrustTerms.of(data, mace(ratings) if fit is None else fit)
    n = terms.n
    estimate = np.where(n > 0, terms.estimate(), np.nan)
    known = ~np.isnan(estimate)
    # the others' trust: leave-one-out mean and variance, Beta by moments
    count = known.sum() - known
    total = np.nansum(estimate) - np.nan_to_num(estimate)
    squares = np.nansum(estimate**2) - np.nan_to_num(estimate) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.clip(total / count, 0.02, 0.98)
        var = np.maximum(squares / count - (total / count) ** 2, 1e-4)
        size = np.clip(mean * (1 - mean) / var - 1, 1.0, None)  # a + b, at least uniform's 2
        size = np.maximum(size, 1 / np.minimum(mean, 1 - mean))  # a, b >= 1: no pole
    grid = (np.arange(n_grid) + 0.5) / n_grid
    a, b = (mean * size)[:, None], ((1 - mean) * size)[:, None]
    log_prior = stats.beta.logpdf(grid[None, :], a, b)
    at = terms.loglik_at(grid) + log_prior  # (M, grid)
    top = at.max(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_good = np.log(np.exp(at - top).mean(axis=1)) + top[:, 0]
        log_factor = terms.loglik(np.zeros(m)) - log_good
        odds = np.log(prior / (1 - prior)) + log_factor
        probability = 1.0 / (1.0 + np.exp(-odds))
    none = (n == 0) | (count == 0)
    return SpammerPosterior(
        np.where(none, np.nan, probability),
        np.where(none, np.nan, np.exp(log_factor)),
        n,
    )


class CopierPair(NamedTuple):
    """Two annotators whose answers coincide beyond what their accuracy explains.

    ``same`` of ``shared`` items got the same answer from both; ``expected`` is the number
    their agreement with the other annotators predicts; ``p_value`` the exact binomial test.
    """

    first: int
    second: int
    shared: int
    same: int
    expected: float
    p_value: float


def _single_annotator_fit(
    codes: NDArray[np.intp],
    gold: NDArray[np.float64],
    n_values: int,
    smoothing: float,
    *,
    n_iter: int = 200,
) -> tuple[float, NDArray[np.float64]]:
    """MACE parameters (theta, xi) of one annotator given fixed truth posteriors ``gold``
    of its items (``(n, C)``): EM on the annotator alone."""
    theta, xi = 0.5, np.full(n_values, 1.0 / n_values)
    g = gold[np.arange(codes.size), codes]
    for _ in range(n_iter):
        knows = theta * g / (theta * g + (1 - theta) * xi[codes])
        theta_new = (knows.sum() + smoothing) / (codes.size + 2 * smoothing)
        xi_new = np.bincount(codes, weights=1 - knows, minlength=n_values) + smoothing
        xi_new /= xi_new.sum()
        done = abs(theta_new - theta) < 1e-8 and np.abs(xi_new - xi).max() < 1e-8
        theta, xi = theta_new, xi_new
        if done:
            break
    return theta, xi


def copier_pairs(
    ratings: ArrayLike,
    *,
    min_shared: int = 10,
    min_same: float = 0.8,
    alpha: float = 0.01,
    max_candidates: int = 50,
) -> list[CopierPair]:
    r"""Pairs of annotators who give the same answers far more often than their accuracy
    explains.

    Parameters
    ----------
    ratings : array_like, shape (n_annotators, n_items)
        Integer label codes; ``np.nan`` = not annotated.
    min_shared : int
        Fewest shared items for a pair to be tested.
    min_same : float
        Only pairs with at least this share of identical answers are tested (a screen: two
        annotators who differ on a fifth of their shared items copy little).
    alpha : float
        Family-wise level: each tested pair is judged at ``alpha`` divided by the number of
        pairs sharing at least ``min_shared`` items (Bonferroni).
    max_candidates : int
        At most this many pairs (the most identical first) are tested; each needs a MACE fit
        without the pair.

    Returns
    -------
    list of CopierPair
        The pairs whose test rejects, by p-value.

    Notes
    -----
    A copied answer makes both annotators look perfect to any model that assumes annotators
    err independently given the truth (Dawid-Skene, MACE): the two confirm each other. The
    test therefore estimates each annotator of a pair :math:`(k, l)` from the others only:
    MACE is fitted without both, giving truth posteriors :math:`g_i` from the others, and
    each of :math:`k, l` gets its own :math:`(\theta, \xi)` from its answers against
    :math:`g`. Conditional independence then predicts, per shared item,

    .. math::

        \pi_i = \sum_t g_{it} \sum_l P_k(l \mid t) P_l(l \mid t), \qquad
        P_k(l \mid t) = \theta_k [l = t] + (1 - \theta_k) \xi_{kl}

    and the number of identical answers :math:`S` is tested against
    :math:`\mathrm{Bin}(n_{kl}, \bar\pi)` (one-sided, exact; conservative against the
    Poisson-binomial distribution above its mean, Hoeffding 1956). Pairs are tested from the
    most identical down; once a pair is found, its second member is left out of the later
    fits (two copies of one set of answers would outvote everybody else's truth and make
    honest pairs look too alike).

    References
    ----------
    Hovy, D., Berg-Kirkpatrick, T., Vaswani, A. & Hovy, E. (2013). Learning whom to trust with
    MACE. Proceedings of NAACL-HLT 2013, 1120-1130. https://aclanthology.org/N13-1132

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> truth = rng.integers(0, 3, 60)
    >>> r = np.where(rng.random((6, 60)) < 0.7, truth, rng.integers(0, 3, (6, 60))).astype(float)
    >>> r[5] = r[4]
    >>> [(p.first, p.second, p.same, p.shared) for p in copier_pairs(r)]
    [(4, 5, 60, 60)]
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1); got {alpha}")
    arr = np.asarray(ratings, dtype=float)
    data = as_label_data(arr)
    m, v = data.n_annotators, data.n_values
    if data.item.size == 0 or m < 3:
        return []
    onehot = data.indicators()
    rated = data.annotated()
    shared = (rated @ rated.T).toarray()
    same = np.zeros((m, m))
    for c in range(v):  # one sparse product per label, not per pair
        rows = onehot[np.arange(m) * v + c]
        same += (rows @ rows.T).toarray()
    upper = np.triu(np.ones((m, m), dtype=bool), 1)
    testable = upper & (shared >= min_shared)
    n_tests = int(testable.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(testable, same / np.maximum(shared, 1), 0.0)
    first, second = np.nonzero(testable & (share >= min_same))
    order = np.argsort(-share[first, second], kind="stable")[:max_candidates]
    eps = 0.01 / v
    found = []
    copies = np.zeros(m, dtype=bool)  # second members of pairs found: left out of later fits
    for k, l in zip(first[order], second[order], strict=True):
        keep = ~copies
        keep[[k, l]] = False
        rest = arr[keep]
        if np.isnan(rest).all():
            continue
        gold = mace(rest, values=data.values).posteriors  # the truth as the others see it
        both = ~np.isnan(arr[k]) & ~np.isnan(arr[l])
        per_truth = np.ones(v)  # P(same answer | true label t)
        for who in (k, l):
            mine = ~np.isnan(arr[who])
            codes = np.searchsorted(data.values, arr[who, mine]).astype(np.intp)
            theta, xi = _single_annotator_fit(codes, gold[mine], v, eps)
            per_truth = per_truth * (theta * np.eye(v) + (1 - theta) * xi[None, :])
        expected = gold[both] @ per_truth.sum(axis=1)
        n_kl, s_kl = int(both.sum()), int(same[k, l])
        p_value = float(stats.binom.sf(s_kl - 1, n_kl, min(expected.mean(), 1.0)))
        if p_value < alpha / max(n_tests, 1):
            found.append(CopierPair(int(k), int(l), n_kl, s_kl, float(expected.sum()), p_value))
            copies[l] = True
    return sorted(found, key=lambda p: p.p_value)
