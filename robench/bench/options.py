"""What each benchmark takes: its options dataclass, the one place its defaults live. Light (no benchmark module,
no pandas or torch), so that the `robench bench` parsers name the defaults in their help from here
(`robench.cli.bench`); each benchmark module imports its options from here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robench.core.errors import RobenchError

if TYPE_CHECKING:
    from robench.core.paths import Settings
    from robench.runs.spec import RunSpec

ROBENCH, TEXTATTACK = "textfooler", "textattack:textfooler"  # `robench bench attack`'s two sides
RECIPES = ("textfooler", "bert-attack", "gradient-swap")  # robench recipes the attack bench profiles


@dataclass(frozen=True)
class AnalysisBenchOptions:
    """What to analyse besides the runs (`robench bench analysis` flags of the same names)."""

    baseline: str = "bert"  # the model the others are compared with
    examples: int = 100  # eval examples per analysis
    shuffles: int = 5  # word shuffles per example
    out: Path | None = None  # the Markdown file (None: <results_dir>/analysis_bench.md)
    device: str = "auto"


@dataclass(frozen=True)
class AttackBenchOptions:
    """The victim, the examples and the shared resources (`robench bench attack` flags of the same names)."""

    examples: int = 200  # eval examples attacked
    task: str = "sst2"  # a registered task, a task file (my_task.toml) or csv:FILE (tsv:, jsonl:, parquet:)
    text_column: str | None = None  # with --task FORMAT:FILE (two comma-separated for sentence pairs)
    label_column: str | None = None
    labels: str | None = None  # with --task FORMAT:FILE: the label names, comma-separated
    model: str = "bert"
    backbone: str = "minilm"
    train_size: int = 2000
    epochs: int = 2
    seed: int = 0
    attack: str = ROBENCH  # the robench recipe: textfooler (beside TextAttack's), bert-attack or gradient-swap
    synonym_source: str = "lexicon"  # robench.engine.resources.DEFAULT_SOURCE; or counterfitted-glove, neighbors
    sentence_encoder: str = "minilm"  # minilm (calibrated thresholds) or use-m3
    query_budget: int | None = None  # per example, both attacks
    stock: bool = True  # also run TextAttack with its stock HuggingFaceModelWrapper (the slowest)
    robench_params: dict[str, Any] = field(default_factory=dict)  # extra robench textfooler parameters
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.examples <= 0:
            raise RobenchError("--examples must be positive")
        if self.attack not in RECIPES:
            raise RobenchError(f"--attack must be one of {', '.join(RECIPES)}, got {self.attack!r}")


@dataclass(frozen=True)
class DefensesOptions:
    """What to compare and how to train it (`robench bench defenses` flags of the same names)."""

    models: tuple[str, ...] = ("bert", "imbert", "freelb", "smart")  # bert is the baseline
    task: str = "sst2"  # a registered task, a task file (my_task.toml) or csv:FILE (tsv:, jsonl:, parquet:)
    text_column: str | None = None  # with --task FORMAT:FILE (two comma-separated for sentence pairs)
    label_column: str | None = None
    labels: str | None = None  # with --task FORMAT:FILE: the label names, comma-separated
    backbone: str = "minilm"
    train_size: int = 4000
    low_resource: int = 500  # the low-resource training subset; 0 skips it
    low_resource_epochs: int = 0  # 0: as many optimisation steps as the full subset gets
    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: int = 3
    lr: float = 5e-5
    batch_size: int = 32
    max_length: int = 128
    params: tuple[str, ...] = ()  # MODEL:KEY=VALUE or KEY=VALUE (robench.core.params.params_by_model)
    data_source: str | None = None  # None: local when a data dir is set, else the hub
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.low_resource_epochs < 0:
            raise RobenchError("--low-resource-epochs must be 0 (same number of steps) or positive")
        for name in ("train_size", "epochs", "batch_size", "max_length"):
            if getattr(self, name) <= 0:
                raise RobenchError(f"--{name.replace('_', '-')} must be positive")

    def epochs_for(self, size: int) -> int:
        """Full subset: `epochs`. Low-resource subset: `low_resource_epochs`, or the same number of steps."""
        if size == self.train_size:
            return self.epochs
        return self.low_resource_epochs or max(1, round(self.epochs * self.train_size / size))

    def spec(self, settings: Settings, model: str, seed: int, size: int, params: dict[str, Any]) -> RunSpec:
        from robench.runs.options import RunOptions, comma_list, specs

        (made,) = specs(RunOptions(
            task=self.task, text_column=comma_list(self.text_column), label_column=self.label_column,
            labels=comma_list(self.labels), model=model, attack="advglue", backbone=self.backbone, seeds=(seed,),
            train_size=size, eval_size="full", epochs=self.epochs_for(size), lr=self.lr, batch_size=self.batch_size,
            max_length=self.max_length, model_params=params, data_source=self.data_source), settings)
        return made


@dataclass(frozen=True)
class SearchGrid:
    """IM-BERT's search space (`--grid-gamma`, `--grid-steps`, `--grid-layers`)."""

    gamma: tuple[float, ...] = (0.005, 0.01, 0.02)
    steps: tuple[int, ...] = (3, 5)
    layers: tuple[str, ...] = ("all",)  # layer sets: all, or e.g. 0,1,2


@dataclass(frozen=True)
class StartupBenchOptions:
    run_id: str | None = None  # a word-level run in `results_dir` to show (default: the first one found)
    build_lexicon: bool = True  # also time building the lexicon's relations from scratch (13 s idle)
    small_run: bool = True  # also time a small `robench run` (trains MiniLM on 64 examples: about a minute)


@dataclass(frozen=True)
class TrainBenchOptions:
    """The fine-tuning both trainers run (`robench bench train` flags of the same names)."""

    task: str = "sst2"
    backbone: str = "minilm"
    train_size: int = 1000
    epochs: int = 1
    batch_size: int = 32
    seed: int = 0
    data_dir: str | None = None  # default: $ROBENCH_DATA_DIR
    device: str = "auto"
