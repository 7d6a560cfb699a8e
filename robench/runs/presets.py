"""Named sets of explicit run settings: `--preset quick` (the CLI default) and `--preset paper`.

A preset is resolved into the `RunSpec` before it is hashed, so a record and its run id show the values
used, never the preset's name alone: `--preset quick` and spelling its values out give the same run id.
Explicit flags override a preset's values.

* `quick` makes the headline command (`robench run --model imbert --attack textfooler`) practical on a
  laptop CPU: a real SST-2 classifier from 1,000 training examples in 3 epochs, attacked on 30 fixed dev
  examples by the word-level attacks (replay attacks such as AdvGLUE always use their whole split).
  Measured costs and accuracies: docs/studies/presets.md.
* `paper` is the full setting of the papers robench reproduces (the whole training split, 3 epochs, the
  whole eval split), meant for a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass

from robench.core.errors import RobenchError


@dataclass(frozen=True)
class Preset:
    name: str
    summary: str
    train_size: int | None  # None: the whole train split
    epochs: int
    lr: float
    batch_size: int
    search_eval_size: int | None  # eval examples for search attacks (textfooler, bert-attack, ...); None: all

    def train_values(self) -> dict[str, float | int]:
        """The `TrainConfig` fields the preset sets."""
        return {"epochs": self.epochs, "lr": self.lr, "batch_size": self.batch_size}

    def eval_size(self, attack: str) -> int | None:
        """The eval examples `attack` gets: `search_eval_size` when it searches (queries the model per word); a
        replay attack (one query per example) always uses its whole split."""
        from robench.engine.attack import ATTACKS

        if self.search_eval_size is None:  # the same for every attack: the name is checked, nothing imported
            ATTACKS.require(attack)
            return None
        return self.search_eval_size if ATTACKS.get(attack).query_cost_per_word > 0 else None


PRESETS: dict[str, Preset] = {
    "quick": Preset("quick", "minutes on a CPU: 1,000 training examples x 3 epochs, 30 attacked examples",
                    train_size=1000, epochs=3, lr=1e-4, batch_size=16, search_eval_size=30),
    "paper": Preset("paper", "the full setting, for a GPU: whole train split x 3 epochs, whole eval split",
                    train_size=None, epochs=3, lr=5e-5, batch_size=32, search_eval_size=None),
}
DEFAULT_PRESET = "quick"


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise RobenchError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})") from None
