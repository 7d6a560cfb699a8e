"""`freelb`: FreeLB adversarial training on the word embeddings.

Zhu, Cheng, Gan, Sun, Goldstein and Liu, "FreeLB: Enhanced Adversarial
Training for Natural Language Understanding", ICLR 2020.

Each training step runs K ascent steps on a perturbation delta of the word
embeddings and accumulates the parameter gradients of all K steps ("free"
large-batch adversarial training):

    delta_0 ~ U(-1, 1) * m * init_mag / sqrt(L * d)     (m: real tokens, L: their number, d: hidden)
    for t = 1..K:
        loss_t = CE(f(E(x) + delta_{t-1}), y) / K;  backward (gradients accumulate)
        delta_t = delta_{t-1} + adv_lr * g / ||g||_2     (g = d loss_t / d delta, per example)
        delta_t = project onto ||delta||_2 <= max_norm    (when max_norm > 0)

The model receives `inputs_embeds` = word embeddings + delta, so position and
token-type embeddings (and the embedding LayerNorm) are applied as usual. The
word embeddings come from `model.get_input_embeddings()`, so the objective
works on any architecture, e.g. `imbert+freelb`.

Defaults (`FreeLBParams`) are TextDefender's BERT-base settings (Li et al.,
"Searching for an Effective Defender", EMNLP 2021): adv_steps K = 5,
adv_lr = 0.03, adv_init_mag = 0.05, adv_max_norm = 0 (no projection), L2 norm.
The official FreeLB SST-2 settings are larger: RoBERTa-large (fairseq launch
script) K = 2, adv_lr = 0.1, init_mag = 1.0 (0.5 in the alternative runs),
max_norm = 0.6, lr 1e-5, batch 32, 20,935 updates with 1,256 warm-up;
ALBERT-xxlarge (transformers launch script) K = 3, adv_lr = 0.1,
init_mag = 1.0, max_norm = 0.6, lr 1e-5, batch 16.

Deviations: when adv_max_norm > 0 the initial delta is projected too (a no-op
unless init_mag > max_norm, since ||delta_0||_2 <= init_mag); the ascent step
is masked to real tokens (their gradient is zero at pad positions anyway);
robench's shared training settings (lr 5e-5, batch 32, 3 epochs) and the
MiniLM backbone instead of BERT-base; only the L2 threat model is offered.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from robench.core.params import bounded
from robench.training.defense import MODELS, Defense
from robench.training.objective import Objective


@dataclass(frozen=True)
class FreeLBParams:
    adv_steps: int = bounded(5, 1, 100)  # K ascent steps per batch
    adv_lr: float = bounded(0.03, 0, 10, cost=False)  # ascent step size (L2-normalised steps)
    adv_init_mag: float = bounded(0.05, 0, 10, cost=False)  # random initial perturbation (0: start at zero)
    adv_max_norm: float = bounded(0.0, 0, 100, cost=False)  # L2 bound per example; 0: unbounded

    def __post_init__(self) -> None:
        if self.adv_steps < 1:
            raise ValueError(f"adv_steps must be >= 1, got {self.adv_steps}")
        if self.adv_lr < 0 or self.adv_init_mag < 0 or self.adv_max_norm < 0:
            raise ValueError("adv_lr, adv_init_mag and adv_max_norm must be >= 0")


def embedding_inputs(model: torch.nn.Module, batch: dict[str, torch.Tensor]
                     ) -> tuple[torch.nn.Module, torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
    """What an ascent on the word embeddings needs of a batch: the embedding layer, the token ids, the other model
    inputs and the real-token mask (batch, length, 1), float."""
    rest = {k: v for k, v in batch.items() if k != "input_ids"}
    return model.get_input_embeddings(), batch["input_ids"], rest, batch["attention_mask"].unsqueeze(-1).float()


def initial_delta(embeds: torch.Tensor, mask: torch.Tensor, init_mag: float) -> torch.Tensor:
    """U(-1, 1) noise on real tokens, scaled by init_mag / sqrt(L * d) per example."""
    if init_mag <= 0:
        return torch.zeros_like(embeds)
    dims = mask.sum(dim=(1, 2)) * embeds.shape[-1]
    scale = init_mag / dims.clamp(min=1).sqrt()
    return torch.empty_like(embeds).uniform_(-1, 1) * mask * scale.view(-1, 1, 1)


def project_l2(delta: torch.Tensor, max_norm: float) -> torch.Tensor:
    """Scale each example's delta back onto the L2 ball of radius max_norm (0: no bound)."""
    if max_norm <= 0:
        return delta
    norms = delta.flatten(1).norm(dim=1).view(-1, 1, 1)
    return delta * torch.where(norms > max_norm, max_norm / norms.clamp(min=1e-12), torch.ones_like(norms))


class FreeLB(Objective):
    """K-step embedding ascent with gradients accumulated over the K steps."""

    params: FreeLBParams

    def __init__(self, model: torch.nn.Module, params: FreeLBParams) -> None:
        super().__init__(model, params)
        self.last_delta_norms: torch.Tensor | None = None  # (K, batch) L2 norms of the deltas used

    def step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        p = self.params
        embed, ids, rest, mask = embedding_inputs(self.model, batch)
        with torch.no_grad():
            delta = project_l2(initial_delta(embed(ids).float(), mask, p.adv_init_mag), p.adv_max_norm)
        total, norms = torch.zeros((), device=ids.device), []
        for k in range(p.adv_steps):
            delta.requires_grad_(True)
            loss = self.model(inputs_embeds=embed(ids) + delta, **rest).loss / p.adv_steps
            loss.backward()
            total += loss.detach()
            norms.append(delta.detach().flatten(1).norm(dim=1))
            if k == p.adv_steps - 1:
                break
            grad = delta.grad.detach()
            step = grad / grad.flatten(1).norm(dim=1).clamp(min=1e-8).view(-1, 1, 1)
            delta = project_l2((delta.detach() + p.adv_lr * step) * mask, p.adv_max_norm)
        self.last_delta_norms = torch.stack(norms)
        return total


MODELS.register("freelb")(Defense(
    "freelb", f"FreeLB adversarial training on word embeddings (Zhu et al., 2020); K={FreeLBParams.adv_steps}",
    objective=FreeLB, params=FreeLBParams,
))
