"""One checkpoint against a baseline's seeds, on the same examples (docs/guide/statistics.md, "One checkpoint against
the baseline's seeds").

The paired comparison (`robench.report.stats.paired_arrays`) pairs seed s of one training procedure with seed s
of another, and its unit of replication is the seed. A user's checkpoint has no seeds: it is one draw of an
unknown procedure. The question is then the one of a prediction interval: is this checkpoint's accuracy under
attack inside the spread of the baseline's checkpoints, on the same examples?

With x_i (the checkpoint's correctness on example i) and y_si (baseline seed s), S seeds and n shared examples:

    D = mean_i x_i - mean_si y_si

Under the null (the checkpoint is as robust as a baseline checkpoint), with crossed seed and example effects and
the model x example interaction g_i of a different model (variance sigma_g^2),

    var(D) = v_seed (1 + 1/S) + sigma_g^2 / n

where v_seed, the variance of one checkpoint's mean, is estimated by the sample variance of the baseline's seed
means (S - 1 df), and sigma_g^2 by the example and residual mean squares of the S x n table of differences
x_i - y_si: (MS_example - (S + 1) MS_residual) / S, floored at 0. t = D / se on S - 1 degrees of freedom
(the seed part's: the Satterthwaite df of the sum is never lower, so S - 1 errs on the safe side; it is
`robench.report.stats.two_sided_tail` at seed share 1, and no p-value where every cell is alike). The verdict
rule is the paired comparison's (`robench.report.stats.verdict`, MIN_SEEDS baseline seeds); its size under the
fitted null is checked by simulation in tests/test_verdict_simulation.py.
"""
from __future__ import annotations

import numpy as np

from robench.report.stats import CONFIDENCE, mean_squares, two_sided_tail


def single_arrays(single: np.ndarray, seeds: np.ndarray, confidence: float = CONFIDENCE
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The checkpoint minus the baseline in accuracy under attack, for complete (..., n) outcomes of the
    checkpoint and (..., S, n) of the baseline's S >= 2 seeds (1: correct under attack): (difference, low,
    high, se, df, p), vectorised over leading axes (the simulation calls this same function)."""
    from scipy import stats as scipy_stats  # imported when used (robench.report.stats)

    single = np.asarray(single, dtype=np.float64)
    seeds = np.asarray(seeds, dtype=np.float64)
    count, n = seeds.shape[-2:]
    seed_means = seeds.mean(-1)
    value = single.mean(-1) - seed_means.mean(-1)
    _, ms_example, ms_residual = mean_squares(single[..., None, :] - seeds)
    interaction = np.maximum(ms_example - (count + 1) * ms_residual, 0.0) / count
    se = np.sqrt(seed_means.var(-1, ddof=1) * (1 + 1 / count) + interaction / n)
    df = np.full(np.shape(value), float(count - 1))
    half = scipy_stats.t.ppf(0.5 + confidence / 2, df) * se
    varies = se > 0  # else every cell alike: no variance, no p-value (as the paired test: "no variation")
    t = np.abs(value) / np.where(varies, se, 1.0)
    p = np.where(varies, two_sided_tail(t, 1.0, count - 1), np.nan)  # seed share 1: Student's t on S - 1 df
    return value, value - half, value + half, se, df, p
