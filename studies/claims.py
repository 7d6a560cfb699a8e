"""The seed claims tested on the v3 records (docs/reference.md, "The claims"): per claim, the defence minus bert
in accuracy under attack, paired over matched seeds and the shared examples (robench.report.compare), its 95%
interval, p, the difference detectable with 80% power, and the verdict against the claimed size:

* confirmed: more robust (p < 0.05 over the claims tested here, Holm) and the interval holds the claim;
* refuted: the interval excludes the claimed size (for a claim of direction only, without a size: less robust,
  Holm p < 0.05);
* not distinguishable: neither; the detectable difference says what the protocol could have seen;
* insufficient seeds: fewer than MIN_SEEDS matched seeds (no verdict).

    python studies/claims.py      # needs no data dir; writes results/reference/claims.md and claims.json

The records: results/reference (the main grid, results/grid-reference.toml), results/reference-lowres
(results/grid-reference-lowres.toml) and results/reference-qnli (results/grid-reference-qnli.toml), packed.
"""
import json
from pathlib import Path

from robench.core.packed import runs_to_read
from robench.core.records import iter_records
from robench.report.compare import compare, group_settings, with_holm
from robench.report.stats import MIN_SEEDS

NOTE = ("The defence minus bert in accuracy under attack, paired over matched seeds and shared examples "
        "(robench.report.compare); Holm over the claims with records; detectable: the difference the test finds with "
        "80% power at alpha 0.05 (docs/statistics.md). Written by studies/claims.py from the records.")
RESULTS = Path(__file__).resolve().parents[1] / "results"
# (name, records, task, model, attack, training sentences, claimed points or None for a direction). IM-BERT: its
# paper, arXiv 2505.06889. FreeLB: the published BERT-base SST-2 figures under TextAttack's TextFooler (FreeLB
# 14.4% against fine-tuning's 5.0%; ../shared/DESIGN.md). SMART: an adversarial-robustness baseline (Jiang et
# al., ACL 2020), a direction without a published TextFooler figure on SST-2.
CLAIMS = [
    ("IM-BERT, AdvGLUE-sst2, +8.3 points (3,000 sentences)", "reference", "sst2", "imbert", "advglue", 3000, 8.3),
    ("IM-BERT, AdvGLUE-qnli, +8.3 points (4,370 pairs)", "reference-qnli", "qnli", "imbert", "advglue", None, 8.3),
] + [
    (f"IM-BERT, low resource, +5.9 points: {size:,} sentences, {label}", "reference-lowres", "sst2", "imbert",
     attack, size, 5.9)
    for attack, label in (("advglue", "AdvGLUE"), ("textfooler", "TextFooler"))
    for size in (1000, 300, 100)
] + [
    ("FreeLB, TextFooler, +9.4 points", "reference", "sst2", "freelb", "textfooler", 3000, 9.4),
    ("SMART, TextFooler, more robust", "reference", "sst2", "smart", "textfooler", 3000, None),
]


def finite(x: float) -> float | None:
    return None if x != x else x


def number(x: float, spec: str) -> str:
    return "–" if x != x else format(x, spec)


def verdict(c, claimed: float | None) -> str:
    d = c.difference
    if len(c.seeds) < MIN_SEEDS:
        return "insufficient seeds"
    significant = c.adjusted_p < 0.05
    if claimed is None:
        return "confirmed" if significant and d.value > 0 else "refuted" if significant else "not distinguishable"
    if not d.low <= claimed / 100 <= d.high:
        return "refuted"
    return "confirmed" if significant and d.value > 0 else "not distinguishable"


def against_bert(runs: Path) -> list:
    """Every setting of a records folder compared with bert's (none when the folder has no records)."""
    return compare(group_settings(iter_records(runs)), runs, "bert") if runs.is_dir() else []


def main(folder: Path = RESULTS / "reference") -> None:
    rows, found = [], {}
    for name, records, task, model, attack, size, claimed in CLAIMS:
        if records not in found:
            found[records] = against_bert(runs_to_read(RESULTS / records))
        match = [c for c in found[records] if (c.setting.spec["task"], c.setting.spec["model"],
                                               c.setting.spec["attack"], c.setting.spec["train_size"])
                 == (task, model, attack, size)]
        rows.append((name, claimed, match[0] if match else None))
    tested = with_holm([c for _, _, c in rows if c is not None])
    by_id = {id(c): t for c, t in zip([c for _, _, c in rows if c is not None], tested)}
    out = []
    lines = ["| claim | seeds | examples | defence - bert, points [95%] | detectable (80%) | p | Holm p | verdict |",
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
