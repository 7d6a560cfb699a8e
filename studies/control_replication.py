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
    """The registered analysis of `folder`'s records, as a dictionary (the figures in points; None before a pair)."""
    runs = runs_to_read(folder)
    records = list(iter_records(runs))
    finished = {m: sorted(r.spec["seed"] for r in records if r.spec["model"] == m) for m in ("bert", "a2t")}
    found = [c for c in compare(group_settings(records), runs, "bert")
             if (c.setting.spec["model"], c.setting.spec["attack"]) == ("a2t", "textfooler")] if finished["a2t"] else []
    out = {"claim": CLAIM, "family": 1, "finished": finished, "seeds": [], "left_out": [], "examples": 0,
           "difference": None, "p": None, "detectable": None, "verdict": "no a2t - bert pair yet", "complete": False}
    if len(found) != 1:
        return out
    (c,) = found
    d = c.difference
    return {**out, "seeds": list(c.seeds), "left_out": list(c.excluded), "examples": c.examples,
            "difference": [_figure(100 * x) for x in (d.value, d.low, d.high)], "p": _figure(c.p_value, 6),
            "detectable": _figure(100 * c.detectable), "verdict": registered_verdict(d.value, c.p_value, c.detectable,
                                                                                    c.verdict),
            "complete": tuple(c.seeds) + tuple(c.excluded) == REGISTERED_SEEDS}


def _figure(x: float, digits: int = 4) -> float | None:
    """`x` rounded for the committed JSON (NaN: None)."""
    return None if x != x else (float(f"{x:.{digits}g}") if digits == 6 else round(x, digits))


def _number(x: float | None, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def markdown(r: dict) -> str:
    diff = "–" if r["difference"] is None else (_number(r["difference"][0], "+.1f") + (
        "" if r["difference"][1] is None else f" [{r['difference'][1]:+.1f}, {r['difference'][2]:+.1f}]"))
    seeds = " ".join(map(str, r["seeds"])) or "–"
    if r["left_out"]:
        seeds += " (left out: " + " ".join(map(str, r["left_out"])) + ")"
    done = ", ".join(f"{m} {' '.join(map(str, s)) or 'none'}" for m, s in r["finished"].items())
    status = "" if r["complete"] else (f" **Incomplete: {len(r['seeds'])} of the {len(REGISTERED_SEEDS)} registered "
                                       f"seeds paired** (finished runs: {done}).")
    return "\n".join([
        "| claim | family | seeds | examples | a2t - bert, points [95%] | p (two-sided) | detectable (80%) | verdict |",
        "|---|---|---|---|---|---|---|---|",
        f"| {r['claim']} | {r['family']} (confirmatory) | {seeds} | {r['examples']} | {diff} | "
        f"{_number(r['p'], '.3g')} | {_number(r['detectable'], '.1f')} | {r['verdict']} |",
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
