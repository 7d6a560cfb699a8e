"""One verdict per comparison, and the published verdicts stay published (robench.report.compare.published_families,
robench.report.reference.published_among): over the shipped reference's records, its pre-specified claims keep the
claims family's published verdicts, its other comparisons form its exploratory family, and a user's runs beside
them form their own family, so adding a run changes no published row or adjusted p-value."""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from robench.core.records import RunRecord, examples_path, iter_records, record_path
from robench.report.compare import CLAIMS, EXPLORATORY, YOURS, compare, group_settings
from robench.report.reference import published_among, reference_runs_dir

CLAIMS_JSON = Path(__file__).resolve().parents[1] / "results" / "reference" / "claims.json"


@pytest.fixture(scope="module")
def published_runs(tmp_path_factory) -> Path:
    return reference_runs_dir("reference", tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def published_verdicts(published_runs) -> dict[str, tuple]:
    return _verdicts(published_runs)


def _verdicts(runs: Path) -> dict[str, tuple]:
    records = list(iter_records(runs))
    found = compare(group_settings(records), runs, "bert", {}, published_among(records))
    return {c.setting.id: (c.family_name, c.family, c.adjusted_p, c.verdict_text) for c in found}


def _checkpoint_of(record: RunRecord, name: str) -> RunRecord:
    """`record` as a user's checkpoint run (one record, a given checkpoint) on the same examples."""
    spec = {**record.spec, "model": f"weights@{name}", "train_size": None,
            "checkpoint": {"kind": "checkpoint", "location": f"/{name}", "weights_sha256": name * 32}}
    return dataclasses.replace(record, run_id=f"mine-{name}-{record.spec['attack']}", spec=spec, manifest=None)


def test_a_users_runs_change_no_published_verdict(published_runs, published_verdicts, tmp_path):
    before = published_verdicts
    families = {family for family, *_ in before.values()}
    assert families == {EXPLORATORY, CLAIMS}
    claims = json.loads(CLAIMS_JSON.read_text())
    assert sum(f == CLAIMS for f, *_ in before.values()) == sum(c["records"] == "reference" for c in claims)

    mixed = tmp_path / "runs"
    shutil.copytree(published_runs, mixed)
    bert = [r for r in iter_records(published_runs) if r.spec["model"] == "bert" and r.spec["seed"] == 0]
    for record in bert:  # one checkpoint of the user's at each of the protocol's attack settings
        mine = _checkpoint_of(record, "ab")
        record_path(mixed, mine.run_id).write_text(json.dumps(dataclasses.asdict(mine)))
        shutil.copy(examples_path(published_runs, record.run_id), examples_path(mixed, mine.run_id))
    after = _verdicts(mixed)
    assert {k: v for k, v in after.items() if k in before} == before  # every published row, as published
    yours = [v for k, v in after.items() if k not in before]
    assert len(yours) == len(bert) and {(f, n) for f, n, *_ in yours} == {(YOURS, len(bert))}


def test_each_comparison_is_in_one_family_named_with_its_size(published_verdicts):
    found = published_verdicts
    sizes = {}
    for family, size, *_ in found.values():
        assert sizes.setdefault(family, size) == size
    assert sizes[EXPLORATORY] == sum(f == EXPLORATORY for f, *_ in found.values())
    assert sizes[CLAIMS] == len([c for c in json.loads(CLAIMS_JSON.read_text()) if c.get("family")])
