"""The swap audit of a record (`metrics.validity`, robench.engine.audit) as report columns and marks.

The audit measures list membership (is each swap a listed synonym, inflection or antonym), not validity: a listed
synonym in the wrong sense or in a broken phrase is still listed. Reports call it "listed synonyms"; whether
readers accept the examples is `robench annotate`'s reading (robench.report.readings).

`validity_columns` flattens it into the leaderboard's and `robench compare`'s scalar columns; `validity_facts`
into the lines `robench show` and the run page print; `swap_marks` classifies the swaps of one example for
display (antonym and unlisted swaps are marked).
"""
from __future__ import annotations

from typing import Any

from robench.core.errors import RobenchError
from robench.core.paths import Settings

COLUMNS = {"synonym_swap_rate": "synonym", "inflection_swap_rate": "inflection", "antonym_swap_rate": "antonym",
           "unlisted_swap_rate": "unlisted"}
VALIDITY_METRICS = [*COLUMNS, "antonym_example_rate"]  # all shares (percent in tables)
MARKED = ("antonym", "unlisted")  # the swap classes display marks
LISTED = {"synonym": "listed synonym"}  # a class's name in reports: membership of the lists, not validity


def validity_columns(metrics: dict[str, Any]) -> dict[str, float | None]:
    """The audit's rates as flat columns; {} for a record without an audit (replay attacks, older records) or with
    an audit of an older format, whose classes mean something else (`robench audit` re-audits it)."""
    from robench.engine.audit import is_stale

    audit = metrics.get("validity")
    if not isinstance(audit, dict) or is_stale(audit):
        return {}
    rates = audit.get("rates") or {}
    out: dict[str, float | None] = {name: rates.get(cls) for name, cls in COLUMNS.items()}
    out["antonym_example_rate"] = audit.get("antonym_example_rate")
    return out


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def fluency_facts(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) lines of the run's LM fluency estimate (robench.engine.fluency), [] without one."""
    fluency = metrics.get("fluency")
    if not isinstance(fluency, dict):
        return []
    label = "LM-judged fluent share (an estimate, not a reading)"
    if fluency.get("unavailable") or fluency.get("not_calibrated"):
        return [(label, f"not estimated: {fluency.get('unavailable') or fluency['not_calibrated']}")]
    if fluency.get("lm_fluent_share") is None:
        return [(label, "no successful examples")]
    calib = fluency["calibration"]
    low, high = calib["auc_interval"]
    return [(label, f"{_pct(fluency['lm_fluent_share'])} of {fluency['scored']} successful examples (calibrated on "
                    f"{calib['pairs']} read pairs; AUC {calib['auc']:.2f} [{low:.2f}, {high:.2f}])")]


def validity_facts(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) lines of the audit and the fluency estimate, [] without either."""
    return _audit_facts(metrics) + fluency_facts(metrics)


def _audit_facts(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    from robench.engine.audit import is_stale

    audit = metrics.get("validity")
    if not isinstance(audit, dict):
        return []
    if is_stale(audit):
        return [("swap audit", "of an older format (listed inflections counted as synonyms): re-audit it "
                               "with `robench audit RESULTS_DIR`")]
    rates = audit.get("rates") or {}
    out = [("swaps audited (list membership, not validity)",
             f"{audit.get('swaps', 0)} in {audit.get('examples', 0)} successful examples")]
    out += [(f"{LISTED.get(cls, cls)} swaps", _pct(rates.get(cls)))
            for cls in ("synonym", "inflection", "antonym", "unlisted")]
    out.append(("successful examples with an antonym swap", _pct(audit.get("antonym_example_rate"))))
    if audit.get("independent_synonym_rate") is not None:
        others = [r for r in ("alzantot", "ppdb", "wordnet") if r not in audit.get("source_lists", [])]
        out.append((f"swaps listed by {', '.join(others)} (not the candidate source)",
                    _pct(audit["independent_synonym_rate"])))
    return out


def marked(pieces: list, marks: dict[str, str]) -> list:
    """`pieces` (robench.report.examples.Piece) with the changed words of a marked class marked."""
    import dataclasses

    return [dataclasses.replace(p, mark=marks.get(p.text.lower(), "")) if p.changed and
            marks.get(p.text.lower()) in MARKED else p for p in pieces]


def lexicon_settings() -> Settings | None:
    """The settings whose data dir holds the audit's lists ($ROBENCH_DATA_DIR), or None (then nothing is marked)."""
    from robench.core.paths import resolve_settings

    try:
        settings = resolve_settings()
        return settings if settings.data_dir is not None else None
    except (RobenchError, OSError):
        return None


def swap_marks(original: str, perturbed: str, settings: Settings | None) -> dict[str, str]:
    """The audit class of each swapped-in word (lower case) of one example; {} when the lexicon is unavailable."""
    if settings is None:
        return {}
    from robench.engine.audit import swap_classes
    from robench.engine.resources.lexicon import lexicon

    try:
        lex = lexicon(settings)
    except RobenchError:  # no data dir: show the example unmarked
        return {}
    return {new.lower(): cls for _, new, cls in swap_classes(lex, original, perturbed)}
