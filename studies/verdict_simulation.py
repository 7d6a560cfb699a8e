"""Simulated seeds x examples outcomes fitted to real records: the size and power of robench's verdict rule.

The model (fitted to the reference records, docs/studies/statistics.md "Calibration"):

* example difficulty: q_i ~ Beta(mean * concentration, (1 - mean) * concentration), the chance that a random
  checkpoint is correct under attack on example i;
* dependence between checkpoints on one example through a Gaussian copula: checkpoint (m, s) is correct on
  example i iff G_msi < Phi^-1(q_i) + c_ms, with G_msi = sqrt(rho_seed) V_si + sqrt(rho_model) Z_mi
  + sqrt(1 - rho_seed - rho_model) W_msi (V, Z, W independent standard normals): checkpoints trained with
  the same seed (same training subset and order) share V, checkpoints of the same model share Z;
* checkpoint effects on the probit scale: c_ms = tau_seed A_s + tau_checkpoint B_ms (A, B standard normal;
  A shared by the models of one seed);
* an alternative adds `shift` accuracy points to one model: q -> q + shift (1 - q) / (1 - mean).

`fit` estimates the parameters from per-checkpoint outcomes: `mean` is the mean accuracy; `concentration`,
`rho_model` and `rho_seed` solve the observed disagreement rates of two checkpoints that share nothing, the
same model only and the same seed only (exactly, from the copula's Owen's-T form); `tau_checkpoint` and
`tau_seed` match the interaction and seed mean squares of the models x seeds table of accuracies by
simulated moments (common random numbers). `rejection_rate` runs the verdict rule of
`robench.report.stats` (the same `paired_arrays`, ALPHA and MIN_SEEDS as `robench compare`) on simulated
pairs of models; `familywise_rate` runs Holm over 25 comparisons with one shared baseline; `detectable_power`
measures the power at the difference `detectable_difference` prints.
`python studies/verdict_simulation.py [RESULTS_DIR [REPS]]` prints the fit and the size and power tables of
docs/studies/statistics.md (defaults: the v2 reference's records, results/evidence-cpu/reference-v2; 4,000
repetitions for the size, a quarter for power).
"""
from __future__ import annotations

import itertools
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import special
from scipy.optimize import brentq

from robench.report.stats import ALPHA, MIN_SEEDS, detectable_difference, paired_arrays

QUADRATURE = 4000  # Beta quantile nodes for the disagreement integral
MOMENT_REPS = 400  # simulated designs per evaluation when fitting the checkpoint effects
MAX_RHO = 0.98


@dataclass(frozen=True)
class CrossedModel:
    mean: float  # mean accuracy under attack
    concentration: float  # of the Beta example difficulty (small: examples are mostly always or never broken)
    rho_seed: float  # copula correlation of two checkpoints trained with the same seed
    rho_model: float  # copula correlation of two checkpoints of the same model
    tau_seed: float  # sd of the seed effect (probit), shared by the models of one seed
    tau_checkpoint: float  # sd of each checkpoint's own effect (probit)


# `fit` on the v2 reference records (results/evidence-cpu/reference-v2; tests/test_verdict_simulation.py re-fits them)
FITTED = {
    "advglue": CrossedModel(mean=0.383, concentration=0.522, rho_seed=0.673, rho_model=0.081, tau_seed=0.077,
                            tau_checkpoint=0.077),
    "textfooler": CrossedModel(mean=0.0325, concentration=1.014, rho_seed=0.438, rho_model=0.204, tau_seed=0.249,
                               tau_checkpoint=0.0),
}


@dataclass(frozen=True)
class Fit:
    """What `fit` measured on one attack's records, and the model it fitted."""

    checkpoints: tuple[int, int]  # models, seeds
    examples: int
    disagreement: float  # two checkpoints of one model, different seeds
    disagreement_same_seed: float  # two models, same seed
    disagreement_unrelated: float  # two models, different seeds
    seed_sd: float  # sd over seeds of a model's accuracy, pooled over models
    overdispersion: float  # interaction mean square over its value without checkpoint effects
    model: CrossedModel


def sample(model: CrossedModel, rng: np.random.Generator, reps: int, seeds: int, n: int,
           shift: tuple[float, float] = (0.0, 0.0), models: int = 2) -> np.ndarray:
    """(reps, models, seeds, n) outcomes (True: correct under attack); `shift[m]` adds accuracy to model m."""
    q = _difficulty(model, rng, (reps, 1, 1, n))
    latent = _latent(model, rng, reps, models, seeds, n)
    effects = _effects(model, rng, reps, models, seeds)
    thresholds = []
    for m in range(models):
        delta = shift[m] if m < len(shift) else 0.0
        qm = q + delta * (1 - q) / (1 - model.mean) if delta >= 0 else q + delta * q / model.mean
        thresholds.append(special.ndtri(qm).astype(np.float32))
    threshold = np.concatenate(thresholds, axis=1) + effects
    return latent < threshold


def _difficulty(model: CrossedModel, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    q = rng.beta(model.mean * model.concentration, (1 - model.mean) * model.concentration, size=shape)
    return np.clip(q, 1e-9, 1 - 1e-9)


def _latent(model: CrossedModel, rng: np.random.Generator, reps: int, models: int, seeds: int, n: int) -> np.ndarray:
    own = 1.0 - model.rho_seed - model.rho_model
    latent = rng.standard_normal((reps, models, seeds, n), dtype=np.float32)
    latent *= np.float32(np.sqrt(own))
    latent += np.float32(np.sqrt(model.rho_seed)) * rng.standard_normal((reps, 1, seeds, n), dtype=np.float32)
    latent += np.float32(np.sqrt(model.rho_model)) * rng.standard_normal((reps, models, 1, n), dtype=np.float32)
    return latent


def _effects(model: CrossedModel, rng: np.random.Generator, reps: int, models: int, seeds: int) -> np.ndarray:
    return (model.tau_seed * rng.standard_normal((reps, 1, seeds, 1))
            + model.tau_checkpoint * rng.standard_normal((reps, models, seeds, 1))).astype(np.float32)


def rejection_rate(model: CrossedModel, seeds: int, n: int, reps: int, seed: int,
                   shift: tuple[float, float] = (0.0, 0.0), alpha: float = ALPHA) -> tuple[float, float]:
    """How often the verdict rule calls two simulated models different at level `alpha` (a family of one, so
    Holm changes nothing), with its Monte-Carlo standard error. Below MIN_SEEDS the rule gives no verdict: 0;
    without variation (every cell alike) no verdict either."""
    if seeds < MIN_SEEDS:
        return 0.0, 0.0
    outcomes = sample(model, np.random.default_rng(seed), reps, seeds, n, shift).astype(np.int8)
    p = paired_arrays(outcomes[:, 0] - outcomes[:, 1])[-1]
    return _rate(p < alpha)


def familywise_rate(model: CrossedModel, seeds: int, n: int, reps: int, seed: int, family: int = 25,
                    chunk: int = 100) -> tuple[float, float]:
    """How often Holm at ALPHA calls at least one of `family` models different from a shared baseline when all
    `family` + 1 are equally robust (the comparisons correlate about 0.5 through the baseline), with its
    Monte-Carlo standard error. Under this complete null Holm rejects something iff its first step does:
    the smallest p-value below ALPHA / family."""
    rng = np.random.default_rng(seed)
    hits = []
    for start in range(0, reps, chunk):
        outcomes = sample(model, rng, min(chunk, reps - start), seeds, n, models=family + 1).astype(np.int8)
        p = paired_arrays(outcomes[:, 1:] - outcomes[:, :1])[-1]
        hits.append(np.nanmin(np.where(np.isnan(p), 1.0, p), axis=1) * family < ALPHA)
    return _rate(np.concatenate(hits))


def detectable_power(model: CrossedModel, seeds: int, n: int, reps: int, seed: int,
                     rounds: int = 3) -> tuple[float, float, float, float]:
    """The power of the verdict rule (a family of one) when the true difference is the one
    `detectable_difference` prints. One model is made better by a shift whose mean difference over `reps`
    designs equals the median printed difference over those designs: a fixed point, found in `rounds` secant
    steps from the null. Returns (the mean difference, the median printed difference, the rejection rate over
    those designs, its Monte-Carlo sd)."""
    grid = np.linspace(0.0, 1.0, 33)
    factor = [detectable_difference(1.0, w, seeds - 1) for w in grid]
    rng = np.random.default_rng(seed)
    shift, points = 0.0, []
    for _ in range(rounds + 1):
        outcomes = sample(model, rng, reps, seeds, n, (shift, 0.0)).astype(np.int8)
        value, se, share, p = paired_arrays(outcomes[:, 0] - outcomes[:, 1])
        points.append((float(value.mean()), float(np.median(se * np.interp(share, grid, factor)))))
        (x0, y0), (x1, y1) = points[-2:] if len(points) > 1 else ((0.0, 0.0), points[0])
        slope = min((y1 - y0) / (x1 - x0), 0.9) if len(points) > 1 else 0.0
        target = x1 + (y1 - x1) / (1 - slope)  # where the line through the last two points meets printed = true
        shift = target if shift == 0 else shift * target / x1
    rate, error = _rate(p < ALPHA)
    return *points[-1], rate, error


def _rate(hits: np.ndarray) -> tuple[float, float]:
    rate = float(np.mean(hits))
    return rate, float(np.sqrt(rate * (1 - rate) / len(hits)))


# ---------------------------------------------------------------- fitting

def disagreement(mean: float, concentration: float, rho: float) -> float:
    """P(two checkpoints disagree on an example) when their copula correlation is `rho` (no checkpoint effects):
    E_q[2 (q - Phi2(h, h; rho))] = E_q[4 T(h, sqrt((1 - rho) / (1 + rho)))], h = Phi^-1(q) (Owen's T)."""
    u = (np.arange(QUADRATURE) + 0.5) / QUADRATURE
    q = np.clip(special.betaincinv(mean * concentration, (1 - mean) * concentration, u), 1e-12, 1 - 1e-12)
    return float(np.mean(4 * special.owens_t(special.ndtri(q), np.sqrt((1 - rho) / (1 + rho)))))


def fit(outcomes: np.ndarray, seed: int = 0) -> Fit:
    """Fit a CrossedModel to (models, seeds, examples) outcomes of checkpoints on the same examples."""
    outcomes = np.asarray(outcomes, dtype=bool)
    models, seeds, n = outcomes.shape
    if models < 2 or seeds < 2:
        raise ValueError("fitting needs at least two models and two seeds")
    mean = float(outcomes.mean())
    same_model, same_seed, unrelated = _disagreements(outcomes)
    concentration = unrelated / (2 * mean * (1 - mean) - unrelated)  # rho = 0: E[2q(1-q)] = 2m(1-m) c/(c+1)
    rho_model = _solve_rho(mean, concentration, same_model, 0.0, MAX_RHO)
    rho_seed = _solve_rho(mean, concentration, same_seed, 0.0, MAX_RHO - rho_model)
    base = CrossedModel(mean, concentration, rho_seed, rho_model, 0.0, 0.0)
    ms_seed, ms_interaction = _table_mean_squares(outcomes.mean(-1))
    tau_checkpoint, tau_seed, without = _fit_effects(base, models, seeds, n, ms_seed, ms_interaction, seed)
    accuracy = outcomes.mean(-1)
    return Fit((models, seeds), n, same_model, same_seed, unrelated,
               float(np.sqrt(np.mean(accuracy.var(axis=1, ddof=1)))), float(ms_interaction / without),
               CrossedModel(mean, concentration, rho_seed, rho_model, tau_seed, tau_checkpoint))


def _disagreements(outcomes: np.ndarray) -> tuple[float, float, float]:
    models, seeds, _ = outcomes.shape
    pairs = list(itertools.combinations(range(models), 2))
    same_model = [np.mean(outcomes[m, s] != outcomes[m, t])
                  for m in range(models) for s, t in itertools.combinations(range(seeds), 2)]
    same_seed = [np.mean(outcomes[m, s] != outcomes[k, s]) for m, k in pairs for s in range(seeds)]
    unrelated = [np.mean(outcomes[m, s] != outcomes[k, t]) for m, k in pairs
                 for s in range(seeds) for t in range(seeds) if s != t]
    return float(np.mean(same_model)), float(np.mean(same_seed)), float(np.mean(unrelated))


def _solve_rho(mean: float, concentration: float, target: float, low: float, high: float) -> float:
    f = lambda rho: disagreement(mean, concentration, rho) - target  # noqa: E731 - decreasing in rho
    if f(low) <= 0:
        return low
    if f(high) >= 0:
        return high
    return float(brentq(f, low, high, xtol=1e-4))


def _table_mean_squares(accuracy: np.ndarray) -> tuple[float, float]:
    """Seed and interaction mean squares of a (..., models, seeds) table of accuracies (two-way ANOVA)."""
    models, seeds = accuracy.shape[-2:]
    grand = accuracy.mean((-2, -1), keepdims=True)
    seed_means, model_means = accuracy.mean(-2, keepdims=True), accuracy.mean(-1, keepdims=True)
    ms_seed = models * ((seed_means - grand) ** 2).sum((-2, -1)) / (seeds - 1)
    residual = accuracy - seed_means - model_means + grand
    return ms_seed, (residual ** 2).sum((-2, -1)) / ((models - 1) * (seeds - 1))


def _fit_effects(base: CrossedModel, models: int, seeds: int, n: int, ms_seed: float, ms_interaction: float,
                 seed: int) -> tuple[float, float, float]:
    """tau_checkpoint, then tau_seed, matching the expected mean squares over MOMENT_REPS simulated designs
    that share their random numbers; also the interaction mean square expected without checkpoint effects."""
    rng = np.random.default_rng(seed)
    threshold = special.ndtri(_difficulty(base, rng, (MOMENT_REPS, 1, 1, n)))
    latent = _latent(base, rng, MOMENT_REPS, models, seeds, n)
    a, b = rng.standard_normal((MOMENT_REPS, 1, seeds, 1)), rng.standard_normal((MOMENT_REPS, models, seeds, 1))

    def expected(tau_seed: float, tau_checkpoint: float) -> tuple[float, float]:
        correct = latent < threshold + tau_seed * a + tau_checkpoint * b
        ms = _table_mean_squares(correct.mean(-1))
        return float(ms[0].mean()), float(ms[1].mean())

    without = expected(0.0, 0.0)[1]
    tau_checkpoint = _solve_tau(lambda t: expected(0.0, t)[1] - ms_interaction)
    tau_seed = _solve_tau(lambda t: expected(t, tau_checkpoint)[0] - ms_seed)
    return tau_checkpoint, tau_seed, without


def _solve_tau(f) -> float:
    if f(0.0) >= 0:
        return 0.0
    return float(brentq(f, 0.0, 3.0, xtol=1e-3))


def reference_outcomes(runs_dir: Path) -> dict[str, np.ndarray]:
    """Per attack, the (models, seeds, examples) correct-under-attack outcomes of every model and seed the
    records of `runs_dir` have for it, on the examples all of them attacked (only complete models x seeds)."""
    from robench.core.records import iter_records, read_examples

    found: dict[str, dict[tuple[str, int], dict[int, bool]]] = {}
    for rec in iter_records(Path(runs_dir)):
        results = read_examples(runs_dir, rec.run_id)
        found.setdefault(rec.spec["attack"], {})[(rec.spec["model"], rec.spec["seed"])] = {
            r.index: r.status == "failed" for r in results if r.status != "error"}
    out = {}
    for attack, runs in sorted(found.items()):
        models, seeds = sorted({m for m, _ in runs}), sorted({s for _, s in runs})
        if any((m, s) not in runs for m in models for s in seeds):
            continue
        common = sorted(set.intersection(*(set(v) for v in runs.values())))
        out[attack] = np.array([[[runs[(m, s)][i] for i in common] for s in seeds] for m in models])
    return out


# ---------------------------------------------------------------- the tables of docs/studies/statistics.md

SIZE_SEEDS, SIZE_EXAMPLES = (3, 4, 5, 10), (100, 300, 1000, 2000)
POWER_SEEDS, POWER_EXAMPLES = (3, 4, 5, 10, 20), (100, 148, 300, 1000, 2000)


def table(model: CrossedModel, shift: float, seeds: tuple[int, ...], examples: tuple[int, ...], reps: int,
          seed: int = 0) -> list[list[str]]:
    """Rows of rejection rates (percent, with the Monte-Carlo standard error) by seeds (rows) x examples."""
    rows = []
    for s in seeds:
        cells = []
        for n in examples:
            if s < MIN_SEEDS:
                cells.append("no verdict")
                continue
            rate, se = rejection_rate(model, s, n, reps, seed + 1000 * s + n, (shift, 0.0))
            cells.append(f"{100 * rate:.1f} ± {100 * se:.1f}")
        rows.append([str(s)] + cells)
    return rows


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def main(results_dir: str = "results/evidence-cpu/reference-v2", reps: int = 4000) -> None:
    """Print the fit of `results_dir`'s records (packed or not) and the size and power tables (`reps` repetitions
    per size cell)."""
    from robench.core.packed import runs_to_read

    for attack, outcomes in reference_outcomes(runs_to_read(Path(results_dir))).items():
        print(f"{attack}: {fit(outcomes)}")
    for name, model in FITTED.items():
        print(f"\n## {name}: {asdict(model)}")
        for shift, what in ((0.0, "size"), (0.03, "power, +3 points"), (0.05, "power, +5 points")):
            seeds, examples = (SIZE_SEEDS, SIZE_EXAMPLES) if shift == 0 else (POWER_SEEDS, POWER_EXAMPLES)
            cell_reps = reps if shift == 0 else reps // 4
            print(f"\n{what} (%, {cell_reps} repetitions)\n")
            print(markdown_table(["seeds"] + [f"n = {n:,}" for n in examples],
                                 table(model, shift, seeds, examples, cell_reps)))


if __name__ == "__main__":  # python studies/verdict_simulation.py [RESULTS_DIR [REPS]] (not a command)
    main(*sys.argv[1:2], *(int(a) for a in sys.argv[2:3]))
