"""The before/after table of docs/attacks.md#valid-attacks: per model and word-level attack, the old records
(results/reference/runs: counter-fitted GloVe-50d, no budget, no antonym filter) against the new ones (this
folder's runs: the `lexicon` source, the textdefender budget, BERT-Attack's antonym filter), 100 SST-2 dev
examples (eval_seed 0) x the training seeds present. Accuracy under attack and success rate with the 95%
intervals of robench.report.stats (seeds and examples resampled, docs/statistics.md); the swap audit pooled over
seeds (robench.engine.audit; the old records audited from their CSVs). Writes evidence_table.json and prints
markdown rows.

    ROBENCH_DATA_DIR=/path/to/shared/data python results/evidence-cpu/attack-validity/evidence_table.py
"""
import json
from collections import defaultdict
from pathlib import Path

from robench.core.paths import resolve_settings
from robench.core.records import iter_records, read_examples
from robench.engine.audit import audit
from robench.engine.resources.lexicon import lexicon
from robench.report.compare import outcomes
from robench.report.stats import outcome_matrix, proportion_intervals

HERE = Path(__file__).resolve().parent
OLD, NEW = HERE.parents[1] / "reference" / "runs", HERE / "runs"
ATTACKS = ("textfooler", "gradient-swap", "bert-attack")
OLD_LISTS = {"textfooler": ["ppdb"], "gradient-swap": ["ppdb"], "bert-attack": []}


def groups(runs: Path) -> dict[tuple[str, str, str], list]:
    """(model, attack, budget setting) -> records; the old records have no setting ("")."""
    out = defaultdict(list)
    for rec in iter_records(runs):
        if rec.spec["attack"] in ATTACKS and rec.spec.get("eval_size") == 100:
            budget = (rec.hyperparameters.get("attack") or {}).get("budget", "")
            out[(rec.spec["model"], rec.spec["attack"], budget)].append(rec)
    return out


def summary(runs: Path, records: list, lex, lists) -> dict:
    records = sorted(records, key=lambda r: r.spec["seed"])
    codes = outcome_matrix([outcomes(runs, r) for r in records])
    est = proportion_intervals(codes, ["robust_accuracy", "attack_success_rate"])
    results = [e for r in records for e in read_examples(runs, r.run_id)]
    a = audit(results, lex, lists)
    return {"seeds": [r.spec["seed"] for r in records], "runs": [r.run_id for r in records],
            **{m: {"value": e.value, "low": e.low, "high": e.high} for m, e in est.items()},
            "clean_accuracy": sum(r.metrics["clean_accuracy"] for r in records) / len(records),
            "avg_queries": sum(r.metrics["avg_queries"] for r in records) / len(records),
            "audit": {"swaps": a.swaps, "rates": a.rates, "antonym_example_rate": a.antonym_example_rate,
                      "resource_rates": a.resource_rates},
            "budget": (records[0].hyperparameters.get("attack") or {}).get("budget", "old attack"),
            "mlm_heldout": (records[0].resources.get("attack") or {}).get("masked_lm_heldout_accuracy")}


def pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def main() -> None:
    lex = lexicon(resolve_settings())
    old, new = groups(OLD), groups(NEW)
    table = {}
    for key in sorted(new, key=lambda k: (k[0] != "bert", k[0], ATTACKS.index(k[1]), k[2] != "textdefender")):
        model, attack, budget = key
        seeds = {r.spec["seed"] for r in new[key]}
        before = summary(OLD, [r for r in old[(model, attack, "")] if r.spec["seed"] in seeds], lex,
                         OLD_LISTS[attack])
        after = summary(NEW, new[key], lex, [] if attack == "bert-attack" else ["alzantot", "ppdb", "wordnet"])
        table[f"{model} {attack} {budget}"] = {"before": before, "after": after}
        for name, s in (("before", before), ("after", after)):
            r, su, au = s["robust_accuracy"], s["attack_success_rate"], s["audit"]
            print(f"| {model} | {attack} | {name} ({s['budget']}) | {','.join(map(str, s['seeds']))} | "
                  f"{pct(r['value'])} [{pct(r['low'])}, {pct(r['high'])}] | "
                  f"{pct(su['value'])} [{pct(su['low'])}, {pct(su['high'])}] | {s['avg_queries']:.0f} | "
                  f"{au['swaps']} | "
                  f"{pct(au['rates']['synonym'])} | {pct(au['rates']['inflection'])} | "
                  f"{pct(au['rates']['antonym'])} | {pct(au['rates']['unlisted'])} | "
                  f"{pct(au['antonym_example_rate'])} | {pct(au['resource_rates']['alzantot'])} |")
    (HERE / "evidence_table.json").write_text(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
