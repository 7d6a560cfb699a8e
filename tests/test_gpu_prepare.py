"""studies/gpu_prepare.py: the travelling size and the refusal over the limit, the float16 backbone copy packed and
unpacked byte for byte, and robench loading it through ROBENCH_MINILM_DIR (as float32, named in the fingerprint)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from study_scripts import load_study

REPO = Path(__file__).resolve().parents[1]


def _module():
    return load_study("gpu_prepare")


def _repo(tmp_path: Path) -> Path:
    """A git repo with a tracked file (1,000 bytes), an untracked one (500), an ignored one (9,000) and an ignored
    carried folder (2,000 bytes in two files)."""
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / ".gitignore").write_text("/.gpu/\n*.log\n")  # 13 bytes, tracked
    (repo / "tracked.txt").write_bytes(b"t" * 1000)
    subprocess.run(["git", "add", ".gitignore", "tracked.txt"], cwd=repo, check=True)
    (repo / "untracked.txt").write_bytes(b"u" * 500)
    (repo / "ignored.log").write_bytes(b"i" * 9000)
    (repo / ".gpu" / "wheels").mkdir(parents=True)
    (repo / ".gpu" / "wheels" / "a.whl").write_bytes(b"w" * 1500)
    (repo / ".gpu" / "pack.json").write_bytes(b"p" * 500)
    return repo


def test_the_travelling_size_counts_tracked_untracked_and_carried_but_not_ignored(tmp_path):
    prepare = _module()
    travel = prepare.travelling(_repo(tmp_path), [".gpu"])
    assert (travel.tracked, travel.untracked, travel.carried) == (1013, 500, {".gpu": 2000})
    assert travel.total == 3513
    prepare.check_fits(travel, limit=3513)
    text = prepare.report(travel, limit=3513)
    assert "carried .gpu" in text and ": fits" in text


def test_a_pack_over_the_limit_is_refused(tmp_path):
    prepare = _module()
    travel = prepare.travelling(_repo(tmp_path), [".gpu"])
    assert "OVER THE LIMIT" in prepare.report(travel, limit=3000)
    with pytest.raises(prepare.PrepareError, match="over the device tool's"):
        prepare.check_fits(travel, limit=3000)
    assert prepare.travelling(_repo(tmp_path / "b"), []).total == 1513  # nothing carried: only what git sends


def test_the_float16_copy_packs_unpacks_and_loads_as_float32(tmp_path, tiny_backbone, monkeypatch):
    import torch
    from transformers import AutoModel

    from robench.classifier.backbone import resolve_backbone

    prepare = _module()
    gpu, folder = tmp_path / "gpu", tmp_path / "build" / "minilm"
    gpu.mkdir()
    copy = prepare.float16_copy(tiny_backbone, folder, "tiny-bert==0")
    difference = prepare.encoder_difference(tiny_backbone, folder, ["a truly wonderful film", "dull"])
    assert 0 < difference["max_abs_hidden"] < 1e-2 and difference["max_abs_sentence_embedding"] < 1e-2
    copy.update(prepare.split_weights(folder))
    prepare._xz_tar(folder, gpu / "minilm.tar.xz")
    (tmp_path / "data" / "sst2").mkdir(parents=True)
    (tmp_path / "data" / "sst2" / "dev.tsv").write_text("sentence\tlabel\n")
    prepare._xz_tar(tmp_path / "data", gpu / "data.tar.xz")
    (gpu / "pack.json").write_text(json.dumps({"backbone": copy}))

    prepare.unpack(gpu, tmp_path / "there")
    unpacked = tmp_path / "there" / "minilm"
    assert sorted(p.name for p in unpacked.iterdir()) == sorted(
        ["config.json", "model.safetensors", "robench-copy.json", *(n for n in prepare.BACKBONE_FILES[1:]
                                                                     if (tiny_backbone / n).is_file())])
    assert (tmp_path / "there" / "data" / "sst2" / "dev.tsv").is_file()
    monkeypatch.setenv("ROBENCH_MINILM_DIR", str(unpacked))
    backbone = resolve_backbone("minilm")
    assert backbone.fingerprint == "tiny-bert==0 (copy stored as float16)" and backbone.location == str(unpacked)
    model = AutoModel.from_pretrained(backbone.location)
    original = AutoModel.from_pretrained(tiny_backbone)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    for (name, p), q in zip(model.named_parameters(), original.parameters()):
        assert torch.equal(p, q.half().float()), name

    (gpu / "pack.json").write_text(json.dumps({"backbone": {**copy, "weights_sha256": "0" * 64}}))
    with pytest.raises(prepare.PrepareError, match="does not match its checksum"):
        prepare.unpack(gpu, tmp_path / "again")


def test_a_minilm_dir_without_its_copy_description_is_refused(tmp_path, tiny_backbone, monkeypatch):
    from robench.classifier.backbone import resolve_backbone
    from robench.core.errors import RobenchError

    monkeypatch.setenv("ROBENCH_MINILM_DIR", str(tiny_backbone))
    with pytest.raises(RobenchError, match="no readable robench-copy.json"):
        resolve_backbone("minilm")


def test_the_wheels_travel_unpacked_in_one_xz_and_land_installed_in_the_site_folder(tmp_path):
    import zipfile

    prepare = _module()
    gpu, wheels = tmp_path / "gpu", tmp_path / "wheels"
    gpu.mkdir()
    wheels.mkdir()
    for name in ("alpha", "beta"):
        with zipfile.ZipFile(wheels / f"{name}-1.0-py3-none-any.whl", "w") as archive:
            archive.writestr(f"{name}/__init__.py", f"NAME = {name!r}\n")
            archive.writestr(f"{name}-1.0.dist-info/METADATA", f"Name: {name}\nVersion: 1.0\n")
    prepare.pack_site(gpu, wheels)
    assert sorted(p.name for p in gpu.iterdir()) == ["site.tar.xz"]  # the build folder is gone
    site = tmp_path / "site"
    prepare.unpack_site(gpu, site)
    assert (site / "alpha" / "__init__.py").read_text() == "NAME = 'alpha'\n"
    assert (site / "beta-1.0.dist-info" / "METADATA").is_file() and not (site / "site").exists()
