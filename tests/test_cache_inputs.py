"""Caches keyed by content (issue 44, docs/studies/reliability.md): a loaded split is read again when its file
changes, and no cache is served for an input one byte different (file hashes, splits, run ids, checkpoints, speed
measurements, analyses, given checkpoints, synonym tables, run records)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch
from conftest import tiny_spec
from test_reliability_probe import _classifier
from test_reliability_probe3 import _evaluated

from robench.core.errors import RobenchError

# --- issue 44: splits are memoised by content ---------------------------------------------------------------

def test_a_long_lived_process_reads_a_changed_data_file_again(settings, tmp_path):
    from robench.core.paths import resolve_settings
    from robench.data import TASKS
    from robench.data.loading import load_split
    from robench.runs.resolve import resolve_run

    private = tmp_path / "data"
    shutil.copytree(settings.data_dir, private, symlinks=True)
    settings = resolve_settings(private, settings.cache_dir, settings.results_dir)
    task = TASKS.get("sst2")
    before = load_split(task, "eval", private, "local")
    first = resolve_run(tiny_spec("minilm"), settings).spec.run_id
    dev = private / "sst2" / "dev.tsv"
    dev.write_text(dev.read_text() + "an entirely new sentence .\t1\n")
    after = load_split(task, "eval", private, "local")
    assert len(after) == len(before) + 1 and after["sentence"][-1] == "an entirely new sentence ."
    assert resolve_run(tiny_spec("minilm"), settings).spec.run_id != first

# --- fault injection: one byte of a cached artefact's input changed, the cache is not served ------------------

def _flip_one_byte(path: Path) -> None:
    """Change one byte of `path` (a letter's case, so the size is kept), restoring its modification time as
    `cp -p` or an unpacked archive would: only the content tells."""
    data = bytearray(path.read_bytes())
    at = next(i for i in range(len(data) // 2, len(data)) if chr(data[i]).isalpha())
    data[at] = ord(chr(data[at]).swapcase())
    before = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _private(settings, tmp_path):
    from robench.core.paths import resolve_settings

    private = tmp_path / "data"
    for part in ("sst2", "advglue"):
        shutil.copytree(settings.data_dir / part, private / part)
    for part in ("mr", "counterfitted", "nltk_data"):
        (private / part).symlink_to(settings.data_dir / part)
    return resolve_settings(private, settings.cache_dir, settings.results_dir)


def _file_hash(settings, tmp_path, backbone):
    from robench.core.hashing import _sha256, file_sha256

    path = settings.data_dir / "sst2" / "dev.tsv"

    def served():
        _sha256.cache_clear()  # a new process: only the on-disk cache is left
        return file_sha256(path, settings.cache_dir), file_sha256(path)  # on disk, in memory

    return path, served


def _split_memo(settings, tmp_path, backbone):
    from robench.data import TASKS
    from robench.data.loading import load_split

    return settings.data_dir / "sst2" / "dev.tsv", \
        lambda: tuple(load_split(TASKS.get("sst2"), "eval", settings.data_dir, "local")["sentence"])


def _resolved(settings, backbone):
    from robench.runs.resolve import resolve_run

    return resolve_run(tiny_spec(backbone, attack="textfooler"), settings)


def _run_id(settings, tmp_path, backbone):
    return settings.data_dir / "sst2" / "dev.tsv", lambda: _resolved(settings, backbone).spec.run_id


def _checkpoint_key(settings, tmp_path, backbone):
    from robench.training.loop import checkpoint_key

    return settings.data_dir / "sst2" / "train.tsv", lambda: checkpoint_key(_resolved(settings, backbone))


def _speed_measurement(settings, tmp_path, backbone):
    from robench.runs.speed import _cache_path

    return settings.data_dir / "sst2" / "dev.tsv", \
        lambda: _cache_path(_resolved(settings, backbone), torch.device("cpu"))


def _analysis_id(settings, tmp_path, backbone):
    from robench.analysis.spec import AnalysisConfig, analysis_id

    def served():
        run = _resolved(settings, backbone)
        return analysis_id(run.spec, AnalysisConfig(), run.train_data)

    return settings.data_dir / "sst2" / "train.tsv", served


def _given_checkpoint(settings, tmp_path, backbone):
    from robench.runs.given import checkpoint_fields

    clf = _classifier(backbone, tmp_path / "clf")
    return clf / "model.safetensors", lambda: checkpoint_fields(str(clf), cache_dir=settings.cache_dir)["checkpoint"]


def _synonym_table_key(settings, tmp_path, backbone):
    from robench.engine.resources.files import inputs_digest
    from robench.engine.resources.synonyms import CONSTRAINTS

    copy = tmp_path / "data" / "counterfitted-copy"
    shutil.copytree(settings.data_dir / "counterfitted", copy)
    return copy / "mrksic_ppdb_antonyms.txt", lambda: inputs_digest(settings, [copy / Path(rel).name for rels in
                                                                                 CONSTRAINTS.values() for rel in rels])


def _run_record(settings, tmp_path, backbone):
    from robench.report.leaderboard import load_records

    record = _evaluated(settings, tmp_path)

    def served():
        try:
            return [r.run_id for r in load_records(settings.runs_dir).current]
        except RobenchError as exc:  # no record left that verifies
            return str(exc)

    return settings.runs_dir / f"{record.run_id}.csv", served


CACHES = {"file hash (sha256.json and in memory)": _file_hash, "a loaded split (in memory)": _split_memo,
          "run id (finished record, partial file)": _run_id, "checkpoint key": _checkpoint_key,
          "speed measurement": _speed_measurement, "analysis id": _analysis_id,
          "given checkpoint's identity": _given_checkpoint,
          "synonym table and lexicon inputs": _synonym_table_key, "run record and its CSV": _run_record}


@pytest.mark.parametrize("cache", list(CACHES))
def test_a_cache_is_never_served_for_an_input_one_byte_different(settings, tmp_path, tiny_backbone, cache,
                                                                 monkeypatch):
    import robench.core.hashing

    # every file here is new: without this, the hash caches would not keep them at all (the racy rule), and only
    # hashing afresh would be tested; with it, the cached digests must be refused by the stamp (ctime, inode)
    monkeypatch.setattr(robench.core.hashing, "SETTLE_SECONDS", 0)
    settings = _private(settings, tmp_path)
    path, served = CACHES[cache](settings, tmp_path, tiny_backbone)
    before = served()
    assert served() == before  # the cache is used while nothing changed
    _flip_one_byte(path)
    assert served() != before, cache


def test_a_file_changed_in_the_last_seconds_is_hashed_afresh_not_cached(tmp_path):
    from robench.core.hashing import CACHE_FILE, file_sha256

    path = tmp_path / "a.tsv"
    path.write_text("x\n")
    digest = file_sha256(path, tmp_path / "cache")
    assert not (tmp_path / "cache" / CACHE_FILE).exists()  # racy: an edit in this clock tick may keep its stamp
    path.write_text("y\n")  # same size, perhaps the same mtime
    assert file_sha256(path, tmp_path / "cache") != digest
