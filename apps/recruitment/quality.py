"""Accuracy on gold answers with Wilson's score interval (pure Python, no Django).

Belongs with the other intervals in :mod:`analytics.metrics.uncertainty` (whose transitivity
interval applies the same formula to a share); it lives here while that module is being
reorganised and moves there as ``wilson_interval`` without change.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from analytics.metrics.uncertainty import Interval


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> Interval:
    r"""A binomial proportion with Wilson's score interval.

    Parameters
    ----------
    successes : int
        Right answers (``0 <= successes <= n``).
    n : int
        Answers checked.
    confidence : float
        Two-sided coverage, in (0, 1).

    Returns
    -------
    Interval
        ``estimate`` = :math:`\hat p = s / n`, ``low``, ``high``, ``n``; all nan for ``n = 0``.

    Notes
    -----
    With :math:`z` the two-sided normal quantile,

    .. math:: \frac{\hat p + \frac{z^2}{2n} \pm z \sqrt{\frac{\hat p (1 - \hat p)}{n}
              + \frac{z^2}{4 n^2}}}{1 + z^2 / n}

    Unlike the Wald interval it stays inside [0, 1] and keeps close to its nominal coverage
    for the handful of attention checks a participant sees (Brown, Cai & DasGupta 2001).

    References
    ----------
    Wilson, E. B. (1927). Probable inference, the law of succession, and statistical
    inference. Journal of the American Statistical Association 22(158), 209-212.
    doi:10.1080/01621459.1927.10502953

    Brown, L. D., Cai, T. T. & DasGupta, A. (2001). Interval estimation for a binomial
    proportion. Statistical Science 16(2), 101-133. doi:10.1214/ss/1009213286

    Examples
    --------
    >>> res = wilson_interval(8, 10)
    >>> round(res.estimate, 3), round(res.low, 3), round(res.high, 3), res.n
    (0.8, 0.49, 0.943, 10)
    >>> round(wilson_interval(0, 5).low, 3), round(wilson_interval(5, 5).high, 3)
    (0.0, 1.0)
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1); got {confidence}")
    if not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n; got {successes} of {n}")
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # At p = 0 (p = 1) the bound is exactly 0 (1); rounding would leave it a hair inside.
    low = 0.0 if successes == 0 else centre - half
    high = 1.0 if successes == n else centre + half
    return Interval(p, low, high, n)
