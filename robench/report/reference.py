"""The published reference protocols, and your checkpoint beside them (docs/studies/reference.md).

* `reference_runs_dir(name)`: the records of shipped protocol `name` (`results/reference`, `reference-lowres`,
  `reference-qnli`), installed with the package as `robench.results` in packed form, so a wheel has them offline;
  unpacked into the cache (`robench.core.packed`) as a runs directory (one .json and one .csv per run).
* `protocol_runs`: a given checkpoint's runs for every attack setting of the protocol's baseline
  (`robench run --checkpoint DIR --protocol reference`): the same task, attacks, attack parameters, eval
  sizes and eval seed, so the same examples, as the published runs; each is resolved once and checked to
  resolve to the published attack setting before anything runs, and runs on from its resolved form.
* `with_reference`: a runs directory that holds the protocol's records and yours at its attack settings
  (links, not copies), for `robench leaderboard --with-reference` and `robench compare --with-reference`. Your
  checkpoint is compared with the baseline's seeds by `robench.report.compare.single`.
* `published` / `published_among`: what a protocol published (its run ids and pre-specified claims), and which
  protocol a set of records holds, for `robench.report.compare.published_families`: its verdicts stay as
  published whatever runs are added.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from robench.core.errors import RobenchError
from robench.core.packed import READINGS_DIR, RECORDS, is_packed, unpack
from robench.core.paths import Settings
from robench.core.records import RunRecord, examples_path, iter_records, record_path, without_earlier_knobs
from robench.report.identity import attack_setting_id

if TYPE_CHECKING:
    from robench.report.compare import Published
    from robench.runs.resolve import ResolvedRun

SHIPPED = ("reference", "reference-lowres", "reference-qnli")
REFERENCE = "reference"  # the default protocol
BASELINE = "bert"  # every published protocol's baseline
CLAIMS_FILE = ("reference", "claims.json")  # the pre-specified claims of every protocol (studies/claims.py)
log = logging.getLogger(__name__)


def results_root() -> Path:
    """Where the shipped results are: the installed `robench.results` package, else (an editable install made
    before it existed) the source checkout's `results/`."""
    spec = importlib.util.find_spec("robench.results")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parents[2] / "results"


def reference_results_dir(name: str) -> Path:
    """The packed results directory of shipped protocol `name` (its records and its leaderboard tables)."""
    if name not in SHIPPED:
        raise RobenchError(f"no shipped reference protocol {name!r}; choose one of {', '.join(SHIPPED)}")
    path = results_root() / name
    if not is_packed(path):
        raise RobenchError(f"the packed records of the {name} protocol are missing from {path}; reinstall robench")
    return path


def reference_runs_dir(name: str, cache_dir: Path | None = None) -> Path:
    """The runs directory of shipped protocol `name`: one `.json` record and one `.csv` per run, exactly as the
    grid wrote them, unpacked under `<cache_dir>/unpacked/` (default: the cache directory)."""
    return unpack(reference_results_dir(name), cache_dir)


def baseline_records(name: str) -> list[RunRecord]:
    """The protocol's baseline records, one per attack setting and seed."""
    records = [r for r in iter_records(reference_runs_dir(name)) if r.spec.get("model") == BASELINE]
    if not records:
        raise RobenchError(f"protocol {name!r} has no records of its baseline {BASELINE}")
    return records


def protocol_runs(name: str, checkpoint: str, settings: Settings, label_map: str | None = None,
                  seeds: tuple[int, ...] = (0,)) -> list[ResolvedRun]:
    """The runs of `checkpoint` under every attack setting of protocol `name`, resolved (once: the run goes on
    from them, `robench.runs.runner.run_resolved`) and each checked to resolve to the published setting."""
    from robench.runs.options import RunOptions, specs
    from robench.runs.resolve import resolve_run

    firsts: dict[str, RunRecord] = {}
    for rec in sorted(baseline_records(name), key=lambda r: (r.spec["attack"], r.spec["seed"])):
        firsts.setdefault(attack_setting_id(rec), rec)
    out = []
    for rec in firsts.values():
        spec = rec.spec
        options = RunOptions(task=spec["task"], attack=spec["attack"], seeds=seeds, preset="paper",
                             eval_size="full" if spec.get("eval_size") is None else spec["eval_size"],
                             eval_seed=spec.get("eval_seed", 0), max_length=spec["train"]["max_length"],
                             attack_params=spec.get("attack_params") or {}, checkpoint=checkpoint,
                             label_map=label_map, data_source=spec.get("data_source"))
        for mine in specs(options, settings):
            resolved = resolve_run(mine, settings)
            if _published_attack(resolved.hyperparameters()) != _published_attack(rec.hyperparameters):
                raise RobenchError(f"protocol {name!r}: {spec['attack']} resolves here to other parameters than the "
                                   f"published run {rec.run_id} (a different robench version?); its records would "
                                   "not be comparable")
            require_published_resources(name, rec, resolved)
            out.append(resolved)
    return out


def _published_attack(hyperparameters: dict | None) -> object:
    """A run's attack parameters as compared with a published run's: a knob added since, at the value that
    reproduces the earlier code, is no difference (`robench.core.records.KNOBS_ADDED_LATER`)."""
    return _plain(without_earlier_knobs(hyperparameters or {}).get("attack"))


def require_published_resources(name: str, published: RunRecord, resolved: ResolvedRun) -> None:
    """A RobenchError, before any work, when a resource the run's attack reads here is not the version the
    published run used (robench.engine.resources.identity): a BERT-Attack run with an MLM stopped early would
    be compared with the baseline's seeds attacked with the published one."""
    from robench.engine.resources.identity import differing, how_to_restore

    differ = differing(published.resources, resolved.resource_identity())
    if differ:
        shown = "; ".join(f"{resource} ({what})" for resource, what in differ.items())
        raise RobenchError(f"protocol {name!r}: {published.spec['attack']} would run with other resources than the "
                           f"published run {published.run_id}: {shown}. Its records would not be comparable; "
                           f"{how_to_restore(list(differ))}")


def with_reference(runs_dir: Path, name: str, into: Path) -> Path:
    """`into`/runs: links to protocol `name`'s records and to those of `runs_dir` at its attack settings, and to
    both folders' blind readings (run pages are written beside them, so `into` must not be a published results
    folder). It is a folder of its own: one that holds anything but such links (your runs) is refused, and only
    links to run and readings files are replaced. Each of your runs left out is named in a warning, with why."""
    published = reference_runs_dir(name)
    settings = {attack_setting_id(r) for r in baseline_records(name)}
    target = Path(into) / "runs"
    _check_view(target, runs_dir, published)
    mine = []
    for r in iter_records(runs_dir):
        why = None if attack_setting_id(r) in settings and r.spec.get("checkpoint") else \
            "not a given checkpoint's run" if not r.spec.get("checkpoint") else \
            f"its attack setting is none of protocol {name!r}'s (run it with `--protocol {name}`)"
        if why:
            log.warning("left out of --with-reference: run %s (%s %s): %s", r.run_id, r.spec.get("model"),
                        r.spec.get("attack"), why)
        else:
            mine.append(r)
    if not mine:
        raise RobenchError(f"no run records in {runs_dir} at protocol {name!r}'s settings: run "
                           f"`robench run --checkpoint DIR --protocol {name}` first")
    target.mkdir(parents=True, exist_ok=True)
    for stale in [*target.glob("*.json"), *target.glob("*.csv"), *(target / READINGS_DIR).glob("*.json")]:
        if stale.is_symlink():
            stale.unlink()
    for folder, run_ids in ((published, [r.run_id for r in iter_records(published)]),
                            (runs_dir, [r.run_id for r in mine])):
        for run_id in run_ids:
            for source in (record_path(folder, run_id), examples_path(folder, run_id)):
                if source.is_file():
                    (target / source.name).symlink_to(source.resolve())
    _link_readings([published, runs_dir], target / READINGS_DIR)
    return target


def _check_view(target: Path, runs_dir: Path, published: Path) -> None:
    """`target` may become the view: not your runs, not the published ones, and no folder that holds run files
    of its own (only links to them)."""
    where = target.resolve()
    if where in (Path(runs_dir).resolve(), published.resolve()) or \
            any(not p.is_symlink() for p in [*target.glob("*.json"), *target.glob("*.csv")]):
        raise RobenchError(f"--output {target.parent}: --with-reference writes links to the published records into "
                           f"{target}, which holds run records of its own; choose a folder of its own for --output "
                           "(the default is RESULTS_DIR/with-reference)")


def _link_readings(folders: list[Path], target: Path) -> None:
    """Link each folder's readings files into `target` (a name taken twice gets the folder's index before it)."""
    for i, folder in enumerate(folders):
        for source in sorted((Path(folder) / READINGS_DIR).glob("*.json")):
            target.mkdir(exist_ok=True)
            link = target / source.name
            if link.is_symlink() or link.exists():
                link = target / f"{i}-{source.name}"
            link.symlink_to(source.resolve())


def _plain(obj):
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


@functools.lru_cache(maxsize=len(SHIPPED))
def published_run_ids(name: str) -> frozenset[str]:
    """The run ids of shipped protocol `name`'s records, read from its packed records (nothing unpacked; none
    where an install lacks them). Read once per process: the shipped files do not change under it."""
    path = results_root() / name / RECORDS
    if not path.is_file():
        return frozenset()
    return frozenset(json.loads(line)["run_id"] for line in path.read_text(encoding="utf-8").splitlines() if line)


def published(name: str) -> Published:
    """What protocol `name` published: its records' run ids and its claims (rows of the claims file whose
    `records` is `name`), keyed as `robench.report.compare.claim_key`."""
    from robench.report.compare import Published

    path = results_root().joinpath(*CLAIMS_FILE)
    rows = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    claims = {(row["task"], row["model"], row["attack"], row["train_size"]): row for row in rows
              if row.get("records") == name and row.get("family")}
    return Published(name, published_run_ids(name), claims)


def published_among(records: list[RunRecord]) -> Published | None:
    """The shipped protocol whose published records are among `records` (the most of them; `robench compare
    --results-dir results/reference`, `--with-reference`, a copy of its records), else None."""
    ids = {r.run_id for r in records}
    found = max(SHIPPED, key=lambda name: len(published_run_ids(name) & ids))
    return published(found) if published_run_ids(found) & ids else None
