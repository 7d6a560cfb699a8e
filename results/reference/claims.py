"""IM-BERT's seed claims tested on the v3 records (docs/reference.md, "v3: the claims"): per claim, imbert minus
bert in accuracy under attack, paired over matched seeds and the shared examples (robench.report.compare), its
95% interval, p, the difference detectable with 80% power, and the verdict against the claimed size:

* confirmed: more robust (p < 0.05 over the claims tested here, Holm) and the interval holds the claim;
* refuted: the interval excludes the claimed size;
* not distinguishable: neither; the detectable difference says what the protocol could have seen;
* insufficient seeds: fewer than MIN_SEEDS matched seeds (no verdict).

    python results/reference/claims.py      # needs no data dir; writes claims.md and claims.json beside it

The records: results/reference/runs (the main grid, results/grid-reference.toml), results/reference-lowres/runs
(results/grid-reference-lowres.toml) and results/reference-qnli/runs (results/grid-reference-qnli.toml).
"""
import json
from pathlib import Path

from robench.core.records import iter_records
from robench.report.compare import compare, group_settings, with_holm
from robench.report.stats import MIN_SEEDS

NOTE = ("imbert minus bert in accuracy under attack, paired over matched seeds and shared examples "
        "(robench.report.compare); Holm over the claims with records; detectable: the difference the test finds with "
        "80% power at alpha 0.05 (docs/statistics.md). Written by results/reference/claims.py from the records.")
HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent
CLAIMS = [  # (name, records, task, attack, training sentences, claimed points: the IM-BERT paper, arXiv 2505.06889)
    ("AdvGLUE-sst2, +8.3 points (3,000 sentences)", "reference", "sst2", "advglue", 3000, 8.3),
    ("AdvGLUE-qnli, +8.3 points (4,370 pairs)", "reference-qnli", "qnli", "advglue", None, 8.3),
] + [
    (f"low resource, +5.9 points: {size:,} sentences, {label}", "reference-lowres", "sst2", attack, size, 5.9)
    for attack, label in (("advglue", "AdvGLUE"), ("textfooler", "TextFooler"))
    for size in (1000, 300, 100)
]


def finite(x: float) -> float | None:
    return None if x != x else x


def number(x: float, spec: str) -> str:
    return "–" if x != x else format(x, spec)


def verdict(c, claimed: float) -> str:
    d = c.difference
    if len(c.seeds) < MIN_SEEDS:
        return "insufficient seeds"
    if not d.low <= claimed / 100 <= d.high:
        return "refuted"
    return "confirmed" if c.adjusted_p < 0.05 and d.value > 0 else "not distinguishable"


def imbert_vs_bert(runs: Path) -> list:
    """Every imbert setting of a records folder compared with bert's (none when the folder has no records)."""
    if not runs.is_dir():
        return []
    settings = [s for s in group_settings(iter_records(runs)) if s.spec["model"] in ("bert", "imbert")]
    return compare(settings, runs, "bert")


def main(folder: Path = HERE) -> None:
    rows = []
    for name, records, task, attack, size, claimed in CLAIMS:
        match = [c for c in imbert_vs_bert(RESULTS / records / "runs") if c.setting.spec["task"] == task
                 and c.setting.spec["attack"] == attack and c.setting.spec["train_size"] == size]
        rows.append((name, claimed, match[0] if match else None))
    tested = with_holm([c for _, _, c in rows if c is not None])
    by_id = {id(c): t for c, t in zip([c for _, _, c in rows if c is not None], tested)}
    out = []
    lines = ["| claim | seeds | examples | imbert - bert, points [95%] | detectable (80%) | p | Holm p | verdict |",
             "|---|---|---|---|---|---|---|---|"]
    for name, claimed, c in rows:
        if c is None:
            lines.append(f"| {name} | – | – | no records yet | – | – | – | – |")
            out.append({"claim": name, "claimed": claimed, "verdict": "no records"})
            continue
        c = by_id[id(c)]
        d, v = c.difference, verdict(c, claimed)
        interval = f"{100 * d.value:+.1f}" + ("" if d.low != d.low else f" [{100 * d.low:+.1f}, {100 * d.high:+.1f}]")
        lines.append(f"| {name} | {len(c.seeds)} | {c.examples} | {interval} | {number(100 * c.detectable, '.1f')} | "
                     f"{number(c.p_value, '.3g')} | {number(c.adjusted_p, '.3g')} | {v} |")
        out.append({"claim": name, "claimed": claimed, "seeds": list(c.seeds), "examples": c.examples,
                    "difference": [finite(x) for x in (d.value, d.low, d.high)], "detectable": finite(c.detectable),
                    "p": finite(c.p_value), "holm_p": finite(c.adjusted_p), "verdict": v})
    (folder / "claims.json").write_text(json.dumps(out, indent=1) + "\n")
    (folder / "claims.md").write_text("\n".join(lines + ["", NOTE]) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
