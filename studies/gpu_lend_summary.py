"""studies/gpu_lend.py's summary: every step's figures so far as Markdown (`<out>/summary.md`), and the bundle
the device tool returns (`publish`)."""
from __future__ import annotations

import json
import os
import shutil
import statistics
import tarfile
from pathlib import Path
from typing import Any

from gpu_lend_plan import CLAIMS_SCRIPT, CPU_CLAIMS, IMBERT_CLAIM, SATURATED, Paths, Protocol, read_json


def summary(protocol: Protocol, paths: Paths, state: dict[str, Any]) -> str:
    parts = [f"# GPU lend: {protocol.name} protocol (run {state.get('runs', 1)} on this out dir)", "",
             _attack_summary(protocol, paths), _probe_summary(paths), _claims_summary(paths, state)]
    return "\n".join(p for p in parts if p) + "\n"


def _csv_rows(path: Path) -> dict[str, list[str]]:
    import csv

    if not path.is_file():
        return {}
    return {row[0]: row[1:] for row in csv.reader(path.open(encoding="utf-8"))}


ATTACK_ROWS = ("examples (errors)", "clean accuracy", "accuracy under attack", "attack wall time (s)",
               "seconds per example", "victim forwards (inputs run through the model)",
               "raw forward rate, same inputs, at the attack's load (per second)",
               "  fraction of the raw rate (target: 85%)",
               "  difference to robench (points; target: within 2)", "  robench speed-up, wall (target: 5x)",
               "same adversarial text as robench")


def _attack_summary(protocol: Protocol, paths: Paths) -> str:
    bench = paths.out / "bench"
    full = next(iter(sorted(bench.glob(f"attack-{protocol.task}-*-robench.csv"))), None) if bench.is_dir() else None
    full_rows = _csv_rows(full) if full else {}
    parity = _csv_rows(bench / f"attack-{protocol.task}-{protocol.textattack_examples}.csv")
    if not full_rows and not parity:
        return ""
    lines = ["## 1. Attack bench (TextFooler; target: whole SST-2 dev split in <= 30 s)", "",
             "| metric | robench, whole split | robench, subset | textattack:textfooler, subset |", "|---|---|---|---|"]
    for name in ATTACK_ROWS:
        cells = [(full_rows.get(name) or ["-"])[0], *(parity.get(name) or ["-", "-"])]
        if any(c != "-" for c in cells):
            lines.append(f"| {name.strip()} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _probe_summary(paths: Paths) -> str:
    saturation = read_json(paths.out / "saturation.json")
    if not saturation:
        return ""
    lines = [f"## 2. Concurrent training jobs on one device ({saturation['model']}, batch {saturation['batch_size']}, "
             f"{saturation['steps']} steps each)", "",
             "| jobs | examples/s, all jobs | speed-up over 1 job | s per step, mean job | GPU utilization |",
             "|---|---|---|---|---|"]
    for r in saturation["rounds"]:
        util = "-" if r["gpu_utilization"] is None else f"{r['gpu_utilization']:.0f}%"
        lines.append(f"| {r['jobs']} | {r['examples_per_second']:.0f} | {r['speedup']:.2f}x | "
                     f"{r['seconds_per_step']:.3f} | {util} |")
    lines.append(f"\nSaturated (within {SATURATED:.0%} of the best) at **{saturation['saturating_jobs']} jobs**.")
    return "\n".join(lines) + "\n"


def _claims_summary(paths: Paths, state: dict[str, Any]) -> str:
    from robench.core.packed import runs_to_read
    from robench.core.records import iter_records
    from robench.report.compare import compare, group_settings

    runs = runs_to_read(paths.out, paths.cache)
    records = [r for r in iter_records(runs) if r.spec["attack"] == "advglue"
               and r.spec["train_size"] == state.get("train_size")] if runs.is_dir() else []
    if not records:
        return ""
    by_model: dict[str, list] = {}
    for r in records:
        by_model.setdefault(r.spec["model"], []).append(r)
    lines = [f"## 3. Claims: AdvGLUE-sst2 at {state.get('train_size')} SST-2 sentences, {state.get('jobs')} jobs at "
             "once", "", "| model | seeds | SST-2 dev acc | AdvGLUE-sst2 acc |", "|---|---|---|---|"]
    for model, recs in by_model.items():
        dev = [100 * r.metrics["dev_accuracy"] for r in recs]
        adv = [100 * r.metrics["robust_accuracy"] for r in recs]
        lines.append(f"| {model} | {len(recs)} | {_mean_std(dev)} | {_mean_std(adv)} |")
    if "bert" in by_model and len(by_model) > 1:
        found = compare(group_settings(records), runs, "bert")
        lines += ["", "| model - bert | seeds | points [95%] | detectable | Holm p | verdict | claim verdict |",
                  "|---|---|---|---|---|---|---|"]
        claim = _claim_verdict(found)
        lines += [_comparison_row(c, claim.get(id(c), "")) for c in found]
        lines.append(f"\nCPU reference ({_cpu_claim()}).")
    return "\n".join(lines) + "\n"


def _comparison_row(c, claim: str) -> str:
    """One `robench compare` row (robench.report.compare.Comparison) and the claim's verdict, if any."""
    d = c.difference
    interval = f"{100 * d.value:+.1f}" + ("" if d.low != d.low else f" [{100 * d.low:+.1f}, {100 * d.high:+.1f}]")
    return (f"| {c.setting.spec['model']} | {len(c.seeds)} | {interval} | {_number(100 * c.detectable, '.1f')} | "
            f"{_number(c.adjusted_p, '.3g')} | {c.verdict} | {claim} |")


def _number(value: float, spec: str) -> str:
    return "–" if value != value else format(value, spec)


def _mean_std(values: list[float]) -> str:
    return f"{values[0]:.1f}" if len(values) == 1 else f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def _claim_verdict(found: list) -> dict[int, str]:
    """IM-BERT's claim (+8.3 points) judged as studies/claims.py judges the CPU records: refuted when the paired
    test of +8.3 points has p < 0.05 (one claim: Holm changes nothing). The lend of 2026-12-04 passed 8.3 itself
    as that p-value, so its summary said "not distinguishable" where the test refuted the claim."""
    import importlib.util

    loader = importlib.util.spec_from_file_location("reference_claims", CLAIMS_SCRIPT)
    claims = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(claims)
    return {id(c): f"{IMBERT_CLAIM[0]}: {claims.verdict(c, claims.against_claim(c, IMBERT_CLAIM[1]))}"
            for c in found if c.setting.spec["model"] == "imbert"}


def _cpu_claim() -> str:
    rows = json.loads(CPU_CLAIMS.read_text(encoding="utf-8"))
    row = next(r for r in rows if r["claim"].startswith(IMBERT_CLAIM[0]))
    value, low, high = (100 * x for x in row["difference"])
    return f"{row['claim']}: {len(row['seeds'])} seeds, {value:+.1f} [{low:+.1f}, {high:+.1f}], {row['verdict']}"


def publish(protocol: Protocol, paths: Paths, state: dict[str, Any]) -> None:
    """Print the summary of every step so far, write it, refresh the bundle."""
    from robench.core.files import atomic_write

    text = summary(protocol, paths, state)
    print(text, flush=True)
    atomic_write(paths.out / "summary.md", text)
    if paths.bundle is None:
        return
    paths.bundle.mkdir(parents=True, exist_ok=True)
    partial = paths.bundle / "evidence-gpu.tar.gz.partial"
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(paths.out, arcname=paths.out.name, filter=lambda info: None if info.name.endswith(".lock") else info)
    os.replace(partial, paths.bundle / "evidence-gpu.tar.gz")
    shutil.copyfile(paths.out / "summary.md", paths.bundle / "summary.md")
