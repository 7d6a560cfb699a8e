"""The validity audit (robench.engine.audit) of the v2 reference records' word-level attacks (the old
attacks: counter-fitted GloVe-50d candidates, BERT-Attack without an antonym filter). Writes
results/evidence-cpu/attack-validity/old_audit.json.

    ROBENCH_DATA_DIR=/path/to/shared/data python studies/attack_validity_audit.py
"""
import csv
import glob
import json
import sys
from pathlib import Path

from robench.core.packed import runs_to_read
from robench.core.paths import resolve_settings
from robench.core.types import ExampleResult
from robench.engine.audit import audit
from robench.engine.resources.lexicon import lexicon

EVIDENCE = Path(__file__).resolve().parents[1] / "results" / "evidence-cpu"
SOURCE_LISTS = {"textfooler": ["ppdb"], "gradient-swap": ["ppdb"], "bert-attack": []}  # what each drew from


def results(path: str) -> list[ExampleResult]:
    with open(path, encoding="utf-8", newline="") as fh:
        return [ExampleResult(int(r["index"]), int(r["label"]), r["original_text"], r["perturbed_text"],
                              int(r["original_prediction"]), int(r["perturbed_prediction"]), r["status"])
                for r in csv.DictReader(fh)]


def main() -> None:
    lex = lexicon(resolve_settings())
    out = {}
    for attack, lists in SOURCE_LISTS.items():
        files = sorted(glob.glob(str(runs_to_read(EVIDENCE / "reference-v2") / f"sst2-*-{attack}-s*.csv")))
        pooled = [r for f in files for r in results(f)]
        out[attack] = {"records": len(files), "pooled": audit(pooled, lex, lists).to_dict(),
                       "per_record": {Path(f).stem: audit(results(f), lex, lists).rates for f in files}}
        print(attack, len(files), json.dumps(out[attack]["pooled"]["rates"]), out[attack]["pooled"]["swaps"],
              out[attack]["pooled"]["antonym_example_rate"], file=sys.stderr)
    (EVIDENCE / "attack-validity" / "old_audit.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
