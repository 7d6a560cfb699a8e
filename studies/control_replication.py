"""The positive control, replicated: the registered analysis of results/preregistration/a2t-control.md on the records of
results/control-replication (bert and a2t x seeds 5-9, TextFooler, the reference v3 settings; docs/studies/reference.md,
"The positive control, replicated").

The claim "a2t is more robust than bert under TextFooler" is a confirmatory family of this one comparison: a2t minus
bert in accuracy under attack, paired over matched seeds and shared examples (robench.report.compare), two-sided at
alpha 0.05 with no adjustment (m = 1). Confirmed (more robust): p < 0.05 and a positive difference; not confirmed:
p < 0.05 and a negative one (less robust), or p >= 0.05 (inconclusive, with the difference the test detects with 80%
power). Fewer than the 5 registered seeds: labelled incomplete.

    python studies/control_replication.py   # writes results/control-replication/confirmatory.{md,json}
"""
import json
from pathlib import Path

from robench.core.packed import is_packed, runs_to_read
from robench.core.records import iter_records
from robench.report.compare import compare, group_settings
from robench.report.stats import ALPHA, NO_VERDICT

FOLDER = Path(__file__).resolve().parents[1] / "results" / "control-replication"
REGISTERED_SEEDS = (5, 6, 7, 8, 9)
CLAIM = "a2t > bert under TextFooler, SST-2, 300 dev sentences (seeds 5-9, the reference v3 settings)"


def registered_verdict(difference: float, p: float, detectable: float, verdict: str) -> str:
    """The registered outcome of the one comparison, with the verdict's words (docs/guide/statistics.md; D, in a
    family of one, is the detectable difference at alpha 0.05); `verdict` for the cases with none."""
    if verdict in NO_VERDICT:
        return verdict
    if p < ALPHA:
        return "confirmed: more robust" if difference > 0 else "not confirmed: less robust"
    return f"not confirmed: inconclusive: differences up to {100 * detectable:.1f} points cannot be ruled out"


def result(folder: Path = FOLDER) -> dict:
    """The registered analysis of `folder`'s records, as a dictionary (the figures in points)."""
    runs = runs_to_read(folder)
    found = [c for c in compare(group_settings(iter_records(runs)), runs, "bert")
             if (c.setting.spec["model"], c.setting.spec["attack"]) == ("a2t", "textfooler")]
    if len(found) != 1:
        raise SystemExit(f"{folder}: expected one a2t - bert comparison under TextFooler, found {len(found)}")
    (c,) = found
    d = c.difference
    complete = tuple(c.seeds) + tuple(c.excluded) == REGISTERED_SEEDS
    return {"claim": CLAIM, "family": 1, "seeds": list(c.seeds), "left_out": list(c.excluded),
            "examples": c.examples, "difference": [round(100 * x, 4) for x in (d.value, d.low, d.high)],
            "p": float(f"{c.p_value:.6g}"), "detectable": round(100 * c.detectable, 4),
            "verdict": registered_verdict(d.value, c.p_value, c.detectable, c.verdict), "complete": complete}


def markdown(r: dict) -> str:
    lo, hi = r["difference"][1:]
    status = "" if r["complete"] else (f" **Incomplete: {len(r['seeds'])} of the {len(REGISTERED_SEEDS)} registered "
                                       "seeds.**")
    return "\n".join([
        "| claim | family | seeds | examples | a2t - bert, points [95%] | p (two-sided) | detectable (80%) | verdict |",
        "|---|---|---|---|---|---|---|---|",
        f"| {r['claim']} | {r['family']} (confirmatory) | {' '.join(map(str, r['seeds']))}"
        f"{' (left out: ' + ' '.join(map(str, r['left_out'])) + ')' if r['left_out'] else ''} | {r['examples']} | "
        f"{r['difference'][0]:+.1f} [{lo:+.1f}, {hi:+.1f}] | {r['p']:.3g} | {r['detectable']:.1f} | "
        f"{r['verdict']} |",
        "",
        "The analysis registered in results/preregistration/a2t-control.md before the runs: the paired test of "
        "robench.report.compare, two-sided at alpha 0.05, a family of this one claim (no adjustment); confirmed "
        "when p < 0.05 and the difference is positive. Written by studies/control_replication.py from the "
        f"records.{status}", ""])


def main(folder: Path = FOLDER) -> dict | None:
    if not is_packed(folder):  # the registered runs are not all packed yet: nothing to report
        print(f"{folder}: no packed records yet (results/preregistration/a2t-control.md)")
        return None
    r = result(folder)
    (folder / "confirmatory.json").write_text(json.dumps(r, indent=1) + "\n")
    (folder / "confirmatory.md").write_text(markdown(r))
    print(markdown(r), end="")
    return r


if __name__ == "__main__":
    main()
