"""Every comparison statistic of the studies that report the reference (docs/studies/reference.md, results.md, gpu.md)
against what the packed records give (issue 58 item 7).

The records: results/reference, reference-lowres, reference-qnli (their comparisons with bert, Holm over each folder's
family), results/evidence-gpu (the first GPU lend), results/control-replication (the replicated positive control),
and the claims (results/reference/claims.json, which `make reference` regenerates from the same records). The
statistics are read from the page by their labels, each rounded as printed:

* an interval "+6.7 [+3.5, +9.8]" (points): a comparison's difference and 95% interval;
* "p 0.0031": a comparison's p-value of no difference; "claim p": the test of a claimed size (+8.3, +5.9, +9.4);
* "Holm p 0.076": a p-value Holm-adjusted over its folder's comparisons or over the claims; "claim Holm p": the
  claims' refuting p-value after Holm;
* "detectable 4.6": the difference one test alone detects with 80% power at alpha 0.05; "D 9.8": the difference the
  Holm-adjusted verdict finds with 80% power (docs/guide/statistics.md).

A section "History" is exempt: it keeps figures of earlier tests and partial grids, which no record regenerates.

    python studies/doc_figures.py   # prints each figure of the pages and whether the records give it
"""
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from robench.core.packed import is_packed, runs_to_read
from robench.core.records import iter_records
from robench.report.compare import compare, group_settings

ROOT = Path(__file__).resolve().parents[1]
PAGES = tuple(ROOT / "docs" / "studies" / f"{name}.md" for name in ("reference", "results", "gpu"))
FOLDERS = ("reference", "reference-lowres", "reference-qnli", "evidence-gpu", "control-replication")
CLAIMED_SIZES = (0.083, 0.059, 0.094)  # IM-BERT's AdvGLUE and low-resource claims, FreeLB's (studies/claims.py)
EXEMPT = "## History"
NUMBER = r"[+−-]?\d+(?:\.\d+)?"
INTERVAL = re.compile(rf"({NUMBER}) \[({NUMBER}), ({NUMBER})\]")
LABELLED = re.compile(rf"\b(claim Holm p|claim p|Holm p|p|detectable|D) ({NUMBER})(?![\d.]*%)")


@dataclass
class Figures:
    """The statistics the records give, by label (points for differences, plain for p-values)."""

    intervals: list[tuple[float, float, float]] = field(default_factory=list)
    by_label: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in (
        "p", "claim p", "Holm p", "claim Holm p", "detectable", "D")})


def _number(text: str) -> float:
    return float(text.replace("−", "-"))


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def records_figures(results: Path = ROOT / "results") -> Figures:
    """Every comparison with bert in the folders, and every claim's figures."""
    out = Figures()
    for name in FOLDERS:
        if not is_packed(results / name):  # the replication's records land packed when its runs are done
            continue
        runs = runs_to_read(results / name)
        for c in compare(group_settings(iter_records(runs)), runs, "bert"):
            d = c.difference
            out.intervals.append((100 * d.value, 100 * d.low, 100 * d.high))
            out.by_label["p"].append(c.p_value)
            out.by_label["Holm p"].append(c.adjusted_p)
            out.by_label["detectable"].append(100 * c.detectable)
            if hasattr(c, "detectable_adjusted"):
                out.by_label["D"].append(100 * c.detectable_adjusted)
            if c.test is not None and c.test.varies:
                out.by_label["claim p"] += [c.test.p_value_at(size) for size in CLAIMED_SIZES]
    for claim in json.loads((results / "reference" / "claims.json").read_text()):
        for label, key in (("p", "p"), ("Holm p", "holm_p"), ("claim p", "claim_p"), ("claim Holm p", "claim_holm_p"),
                           ("detectable", "detectable"), ("D", "detectable_holm")):
            if claim.get(key) is not None:
                out.by_label[label].append(100 * claim[key] if key.startswith("detectable") else claim[key])
        if claim.get("difference") and None not in claim["difference"]:
            out.intervals.append(tuple(100 * x for x in claim["difference"]))
    return out


def _near(shown: str, values: list[float]) -> bool:
    half = 0.5 * 10 ** -_decimals(shown) + 1e-9
    return any(abs(_number(shown) - v) <= half for v in values if v == v)


def checked_text(page: Path) -> str:
    """The page without its exempt section (from EXEMPT to the next second-level heading)."""
    text = page.read_text(encoding="utf-8")
    if EXEMPT not in text:
        return text
    head, tail = text.split(EXEMPT, 1)
    rest = re.search(r"^## ", tail, flags=re.M)
    return head + (tail[rest.start():] if rest else "")


def page_figures(text: str) -> list[tuple[str, str]]:
    """(label, as printed) of every labelled statistic of `text`: "interval" for an interval."""
    found = [("interval", m.group(0)) for m in INTERVAL.finditer(text)]
    return found + [(m.group(1), m.group(2)) for m in LABELLED.finditer(INTERVAL.sub("", text))]


def stale(text: str, figures: Figures) -> list[str]:
    """The page's statistics that no record gives, as "label value"."""
    out = []
    for label, shown in page_figures(text):
        if label == "interval":
            parts = INTERVAL.fullmatch(shown).groups()
            if not any(all(_near(s, [v]) for s, v in zip(parts, triple)) for triple in figures.intervals):
                out.append(f"interval {shown}")
        elif not _near(shown, figures.by_label[label]):
            out.append(f"{label} {shown}")
    return out


def main() -> None:
    figures = records_figures()
    for page in PAGES:
        text = checked_text(page)
        bad = set(stale(text, figures))
        for label, shown in page_figures(text):
            name = f"interval {shown}" if label == "interval" else f"{label} {shown}"
            print(f"{page.name}: {'STALE' if name in bad else 'ok   '} {name}")
        print(f"{page.name}: {len(page_figures(text))} figures, {len(bad)} not given by the records")


if __name__ == "__main__":
    main()
