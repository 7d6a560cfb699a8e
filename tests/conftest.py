"""Shared fixtures: a tiny random BERT backbone, a tiny data dir cut from shared/data, settings."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):  # `pytest -n N`: N processes share the cores, one thread each
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("ROBENCH_DATA_DIR") or REPO.parent / "shared" / "data").resolve()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not (SHARED_DATA / "sst2" / "dev.tsv").is_file():
        pytest.fail(f"shared data not found at {SHARED_DATA}; set ROBENCH_DATA_DIR")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_backbone(tmp_path_factory) -> Path:
    """A 2-layer, 32-wide randomly initialised BERT with the packaged MiniLM's uncased tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from robench.classifier.backbone import resolve_backbone

    path = tmp_path_factory.mktemp("tiny-bert")
    tokenizer = AutoTokenizer.from_pretrained(resolve_backbone("minilm").location)
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    import torch

    torch.manual_seed(0)
    BertModel(config).save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_mlm(tmp_path_factory, tiny_backbone) -> Path:
    """A 2-layer random BertForMaskedLM with the MiniLM tokenizer, saved like a hub model."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    path = tmp_path_factory.mktemp("tiny-mlm")
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig.from_pretrained(tiny_backbone)).save_pretrained(path, safe_serialization=True)
    AutoTokenizer.from_pretrained(tiny_backbone).save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_lm(tmp_path_factory, tiny_backbone) -> Path:
    """A 2-layer, 16-wide random Llama causal LM with the MiniLM tokenizer ([CLS] begins a text): what every test
    scores fluency with (`ROBENCH_LANGUAGE_MODEL`) unless it asks for the real one (`real_language_model`)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    path = tmp_path_factory.mktemp("tiny-lm")
    tokenizer = AutoTokenizer.from_pretrained(tiny_backbone)
    config = LlamaConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                         bos_token_id=tokenizer.cls_token_id, tie_word_embeddings=True)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(autouse=True)
def _tiny_language_model(monkeypatch, tiny_lm):
    from robench.engine.resources.causal_lm import LM_DIR_ENV

    monkeypatch.setenv(LM_DIR_ENV, str(tiny_lm))


@pytest.fixture
def real_language_model(monkeypatch):
    """The packaged SmolLM2 (integration tests only: its first use converts the GGUF file, minutes)."""
    from robench.engine.resources.causal_lm import LM_DIR_ENV

    monkeypatch.delenv(LM_DIR_ENV, raising=False)


def _head(src: Path, dst: Path, rows: int) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    dst.write_text("".join(lines[: rows + 1]), encoding="utf-8")


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory, shared_data) -> Path:
    """A data dir laid out like shared/data with a few rows per file (fast unit tests)."""
    root = tmp_path_factory.mktemp("tiny-data")
    _head(shared_data / "sst2" / "train.tsv", root / "sst2" / "train.tsv", 96)
    _head(shared_data / "sst2" / "dev.tsv", root / "sst2" / "dev.tsv", 48)
    _head(shared_data / "rte" / "train.tsv", root / "rte" / "train.tsv", 48)
    _head(shared_data / "rte" / "dev.tsv", root / "rte" / "dev.tsv", 24)
    adv = json.loads((shared_data / "advglue" / "dev.json").read_text())
    (root / "advglue").mkdir()
    (root / "advglue" / "dev.json").write_text(json.dumps({"sst2": adv["sst2"][:24], "rte": adv["rte"][:12]}))
    for part in ("mr", "counterfitted", "nltk_data"):
        (root / part).symlink_to(shared_data / part)
    return root


@pytest.fixture
def settings(tmp_path, tiny_data):
    from robench.core.paths import resolve_settings

    return resolve_settings(tiny_data, tmp_path / "cache", tmp_path / "results")


def tiny_spec(backbone: Path, **overrides):
    """A RunSpec that trains the tiny backbone for one short epoch."""
    from robench.runs.spec import RunSpec, TrainConfig

    base = dict(task="sst2", model="bert", attack="advglue", backbone=str(backbone), seed=0,
                train=TrainConfig(epochs=1, batch_size=16, max_length=32, lr=1e-3))
    base.update(overrides)
    return RunSpec(**base)


MINILM_SST2 = dict(task="sst2", model="bert", backbone="minilm", seed=0, train_size=2000)


@pytest.fixture(scope="session")
def minilm_sst2(tmp_path_factory, shared_data):
    """The real packaged MiniLM fine-tuned on 2,000 SST-2 examples (3 epochs), trained once per session.

    Returns (settings, spec, trained model). Integration tests share it.
    """
    from robench.core.paths import resolve_settings
    from robench.runs.runner import train
    from robench.runs.spec import RunSpec

    root = tmp_path_factory.mktemp("minilm-sst2")
    settings = resolve_settings(shared_data, root / "cache", root / "results")
    spec = RunSpec(**MINILM_SST2)
    return settings, spec, train(spec, settings, device="cpu")


@pytest.fixture(autouse=True)
def _real_minilm_only_in_integration_tests(request, monkeypatch):
    """A test not marked `integration` fails if it loads the packaged MiniLM's weights (its tokenizer is fine:
    the tiny backbone uses it), so `pytest -m "not integration"` stays fast."""
    if request.node.get_closest_marker("integration") is not None:
        return
    from transformers import PreTrainedModel

    from robench.classifier.backbone import resolve_backbone

    packaged = Path(resolve_backbone("minilm").location).resolve()
    original = PreTrainedModel.from_pretrained.__func__

    def guarded(cls, location, *args, **kwargs):
        if Path(str(location)).expanduser().resolve() == packaged:
            pytest.fail("this test loads the real packaged MiniLM: mark it @pytest.mark.integration or use "
                        "the tiny_backbone fixture")
        return original(cls, location, *args, **kwargs)

    monkeypatch.setattr(PreTrainedModel, "from_pretrained", classmethod(guarded))


class _TextAttackGuard:
    """A meta-path finder that refuses to load TextAttack (`find_spec` still answers, so robench can locate its
    files without importing it)."""

    def find_spec(self, name, path=None, target=None):
        if name != "textattack" and not name.startswith("textattack."):
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = self
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        pytest.fail("this test imports TextAttack (5-15 s): mark it @pytest.mark.textattack")


@pytest.fixture(autouse=True)
def _textattack_only_in_marked_tests(request):
    """A test marked neither `textattack` nor `integration` fails if it imports TextAttack, so `make check` (which
    leaves the marked ones out) never pays for it. Where an earlier test of the process imported it already, the
    import is not seen again; `make check` imports it nowhere, so there every test is checked."""
    if any(request.node.get_closest_marker(m) is not None for m in ("textattack", "integration")):
        yield
        return
    guard = _TextAttackGuard()
    sys.meta_path.insert(0, guard)
    try:
        yield
    finally:
        sys.meta_path.remove(guard)


class WorkCounter:
    """How often robench really trained a model and really attacked one (not how often it was asked to)."""

    def __init__(self) -> None:
        self.trained = 0
        self.attacked = 0

    @property
    def counts(self) -> dict[str, int]:
        return {"trained": self.trained, "attacked": self.attacked}


@pytest.fixture
def work(monkeypatch) -> WorkCounter:
    """Counts calls of the training loop (`robench.training.loop._train`, not called for a cached checkpoint) and of
    the run's attack stage (`robench.runs.runner.attack`, not called for a finished record), so a test can check
    that work is not redone without reading timestamps."""
    import robench.runs.runner as runner
    import robench.training.loop as loop

    counter, train, attack = WorkCounter(), loop._train, runner.attack

    def counted_train(*args, **kwargs):
        counter.trained += 1
        return train(*args, **kwargs)

    def counted_attack(*args, **kwargs):
        counter.attacked += 1
        return attack(*args, **kwargs)

    monkeypatch.setattr(loop, "_train", counted_train)
    monkeypatch.setattr(runner, "attack", counted_attack)
    return counter


@pytest.fixture
def where(settings) -> list:
    """The CLI flags that point a run at the test's settings, quiet, on the CPU."""
    return ["--data-dir", settings.data_dir, "--cache-dir", settings.cache_dir, "--results-dir",
            settings.results_dir, "--quiet", "--device", "cpu"]


@pytest.fixture
def base(where, tiny_backbone) -> list:
    """`where` plus a tiny, one-epoch training on the tiny random backbone."""
    return ["--backbone", tiny_backbone, "--epochs", "1", "--batch-size", "16", "--max-length", "32", *where]


# What is not a unit test, by the fixture it needs: `make check` leaves these markers out (with `integration`);
# `make test` runs them all.
MARK_BY_FIXTURE = {"browser": "browser", "ray_session": "ray", "plugin_site": "pip", "ta": "textattack"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for fixture, marker in MARK_BY_FIXTURE.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(getattr(pytest.mark, marker))


def _texts(data: Path, split: str) -> list[str]:
    """The sentences of the tiny data's SST-2 `split`."""
    return [line.split("\t")[0] for line in (data / "sst2" / f"{split}.tsv").read_text().splitlines()[1:]]


def random_table(texts: list[str]):
    """A synonym table ("lexicon", key "tiny") over the alphabetic words of `texts`: random unit vectors, each word's
    three candidates drawn at random. Unit tests attack with it instead of the real table (minutes to build)."""
    import numpy as np

    from robench.engine.resources import cut
    from robench.engine.resources.tables import SynonymTable

    words = [w for w in cut.text_words(texts) if w.isalpha()]
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(words), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    nn = np.stack([rng.choice([j for j in range(len(words)) if j != i], 3, replace=False) for i in range(len(words))])
    nn_cos = np.einsum("vd,vkd->vk", vectors, vectors[nn]).astype(np.float32)
    return SynonymTable(words, vectors, nn.astype(np.int32), nn_cos, {"name": "lexicon", "key": "tiny"})


@pytest.fixture(scope="session")
def tiny_train_table(tiny_data):
    """`random_table` over the tiny SST-2 train and dev words (a training-time attack's synonyms in unit tests)."""
    return random_table(_texts(tiny_data, "train") + _texts(tiny_data, "dev"))


@pytest.fixture(scope="session")
def lexicon_cut(tmp_path_factory, tiny_data) -> Path:
    """A lexicon cut (robench.engine.resources.cut) to the tiny dev split's words, for `ROBENCH_LEXICON_CUT`: a
    random table over them (three candidates a word), relations without pairs, every word a noun, verb, adjective
    and adverb to WordNet. A unit test attacking with the "lexicon" synonyms (or auditing swaps) uses it instead of
    building the real table and relations (minutes of WordNet and GloVe)."""
    from robench.engine.resources import cut

    root = tmp_path_factory.mktemp("lexicon-cut")
    texts = _texts(tiny_data, "dev")
    table = random_table(texts)
    relations = root / "relations.json"
    relations.write_text(json.dumps({"synonyms": {"alzantot": {}, "ppdb": {}, "wordnet": {}}, "antonyms": {},
                                     "indirect_antonyms": {}, "sense_rank": [], "morphology": {
                                         "exceptions": {p: {} for p in "nvar"}, "lemma_pos": {}}}))

    class AnyPos:
        def synsets(self, word):
            return [cut.PartOfSpeech(p) for p in "nvar"]

    cut.write_cut(table, relations, AnyPos(), texts, root / "cut", {"texts": "tiny sst2 dev"})
    return root / "cut"
