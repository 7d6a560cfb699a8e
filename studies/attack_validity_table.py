"""The before/after table of docs/studies/attacks.md#valid-attacks: per model and word-level attack, the old records
(the v2 reference's, results/evidence-cpu/reference-v2: counter-fitted GloVe-50d, no budget, no antonym filter)
against the new ones (results/evidence-cpu/attack-validity: the `lexicon` source, the textdefender budget,
BERT-Attack's antonym filter; and, as "textdefender + wordnet_pos", results/evidence-cpu/pos-in-context: the same
checkpoints under today's default, with the part-of-speech-in-context check), 100 SST-2 dev examples (eval_seed
0) x the training seeds present. Accuracy under attack and success rate with the 95% intervals of
robench.report.stats (seeds and examples resampled, docs/guide/statistics.md); the swap audit pooled over seeds
(robench.engine.audit; the old records audited from their CSVs). Writes
results/evidence-cpu/attack-validity/evidence_table.json and prints markdown rows.

    ROBENCH_DATA_DIR=/path/to/shared/data python studies/attack_validity_table.py
"""
import json
from collections import defaultdict
from pathlib import Path

from robench.core.packed import runs_to_read
from robench.core.paths import resolve_settings
from robench.core.records import iter_records, read_examples
from robench.engine.audit import audit
from robench.engine.resources.lexicon import lexicon
from robench.report.compare import outcomes
from robench.report.stats import outcome_matrix, proportion_intervals

EVIDENCE = Path(__file__).resolve().parents[1] / "results" / "evidence-cpu"
HERE = EVIDENCE / "attack-validity"
OLD, NEW, POS = (runs_to_read(EVIDENCE / name) for name in ("reference-v2", "attack-validity", "pos-in-context"))
ATTACKS = ("textfooler", "gradient-swap", "bert-attack")
OLD_LISTS = {"textfooler": ["ppdb"], "gradient-swap": ["ppdb"], "bert-attack": []}


def setting(rec) -> str:
    """The budget setting, with " + wordnet_pos" when the part-of-speech-in-context check was on."""
    params = rec.hyperparameters.get("attack") or {}
    return params.get("budget", "") + (" + wordnet_pos" if params.get("wordnet_pos") else "")


def groups(*folders: Path) -> dict[tuple[str, str, str], list]:
    """(model, attack, setting) -> (folder, records); the old records have no setting ("")."""
    out = defaultdict(lambda: (None, []))
    for runs in folders:
        for rec in iter_records(runs):
            if rec.spec["attack"] in ATTACKS and rec.spec.get("eval_size") == 100:
                key = (rec.spec["model"], rec.spec["attack"], setting(rec))
                out[key] = (runs, out[key][1] + [rec])
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
            "budget": setting(records[0]) or "old attack",
            "mlm_heldout": (records[0].resources.get("attack") or {}).get("masked_lm_heldout_accuracy")}


def pct(x) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def main() -> None:
    lex = lexicon(resolve_settings())
    old, new = groups(OLD), groups(NEW, POS)
    table = {}
    order, printed = ("textdefender", "textdefender + wordnet_pos", "morris2020"), set()
    for key in sorted(new, key=lambda k: (k[0] != "bert", k[0], ATTACKS.index(k[1]), order.index(k[2]))):
        model, attack, budget = key
        folder, records = new[key]
        seeds = {r.spec["seed"] for r in records}
        before = summary(OLD, [r for r in old[(model, attack, "")][1] if r.spec["seed"] in seeds], lex,
                         OLD_LISTS[attack])
        after = summary(folder, records, lex, [] if attack == "bert-attack" else ["alzantot", "ppdb", "wordnet"])
        table[f"{model} {attack} {budget}"] = {"before": before, "after": after}
        rows = [("after", after)] if (model, attack) in printed else [("before", before), ("after", after)]
        printed.add((model, attack))
        for name, s in rows:
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
