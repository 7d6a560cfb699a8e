"""`pgd`: K-step projected gradient descent adversarial training on the word embeddings.

Madry, Makelov, Schmidt, Tsipras and Vladu, "Towards Deep Learning Models Resistant to Adversarial
Attacks", ICLR 2018 (https://arxiv.org/abs/1706.06083): minimise the loss at the worst perturbation
found by K projected ascent steps, min_theta E[max_{||delta|| <= eps} L(f(x + delta), y)]. For BERT the
perturbation acts on the word embeddings, as in TextDefender (Li, Song and Qiu, "Searching for an
Effective Defender: Benchmarking Defense against Adversarial Word Substitution", EMNLP 2021; its
`trainer/pgd.py` and `EmbeddingLevelGradientTrainer`):

    delta_0 ~ U(-1, 1) * m * init_mag / sqrt(L * d)     (m: real tokens, L: their number, d: hidden)
    for t = 1..K:
        g = d CE(f(E(x) + delta_{t-1}), y) / d delta     (the parameters get no gradient from these steps)
        delta_t = project(delta_{t-1} + adv_lr * g / ||g||)  (per example; L2 or L-inf, see adv_norm)
    loss = CE(f(E(x) + delta_K), y);  backward               (the clean batch is not trained on)

Unlike FreeLB (`freelb`), which accumulates the parameter gradients of all K ascent steps, PGD trains only on
the last, strongest perturbation: K + 1 forward and backward passes per batch, one parameter update.

Defaults (`PGDParams`) are TextDefender's BERT settings: adv_steps K = 5, adv_lr = 0.03, adv_init_mag = 0.05,
adv_max_norm = 0 (no projection), adv_norm = "l2". With adv_norm = "linf" the step is g / ||g||_inf and
the projection clamps every coordinate to [-max_norm, max_norm], as TextDefender's L-inf option.

Deviations: robench's shared training settings (lr, batch size, epochs, warm-up, weight decay 0.01 instead of
TextDefender's 1e-6) and the MiniLM backbone instead of BERT-base; the ascent step is masked to real tokens
(their gradient is zero at pad positions anyway); the initial delta is projected when adv_max_norm > 0 (a no-op
unless init_mag > max_norm); under CUDA bf16 autocast the perturbation is added in the embeddings' dtype.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from robench.core.params import bounded
from robench.models.freelb import embedding_inputs, initial_delta, project_l2
from robench.training.defense import MODELS, Defense
from robench.training.objective import Objective

NORMS = ("l2", "linf")


@dataclass(frozen=True)
class PGDParams:
    adv_steps: int = bounded(5, 1, 100)  # K ascent steps per batch
    adv_lr: float = bounded(0.03, 0, 10)  # ascent step size (normalised steps)
    adv_init_mag: float = bounded(0.05, 0, 10)  # magnitude of the random initial perturbation (0: start at zero)
    adv_max_norm: float = bounded(0.0, 0, 100)  # the ball's radius per example; 0: unbounded
    adv_norm: str = "l2"  # "l2" or "linf": the step's normalisation and the projection

    def __post_init__(self) -> None:
        if self.adv_norm not in NORMS:
            raise ValueError(f"adv_norm must be one of {NORMS}, got {self.adv_norm!r}")


def ascent_step(delta: torch.Tensor, grad: torch.Tensor, mask: torch.Tensor, p: PGDParams) -> torch.Tensor:
    """delta + adv_lr * g / ||g|| (per example), masked to real tokens and projected back onto the ball."""
    flat = grad.flatten(1)
    norm = flat.norm(dim=1) if p.adv_norm == "l2" else flat.abs().amax(dim=1)
    delta = (delta + p.adv_lr * grad / norm.clamp(min=1e-8).view(-1, 1, 1)) * mask
    return project(delta, p)


def project(delta: torch.Tensor, p: PGDParams) -> torch.Tensor:
    if p.adv_norm == "l2":
        return project_l2(delta, p.adv_max_norm)
    return delta.clamp(-p.adv_max_norm, p.adv_max_norm) if p.adv_max_norm > 0 else delta


class PGD(Objective):
    """K projected ascent steps on the word embeddings, then one update on the perturbed batch only."""

    params: PGDParams

    def __init__(self, model: torch.nn.Module, params: PGDParams) -> None:
        super().__init__(model, params)
        self.last_losses: list[float] = []  # loss at delta_0 .. delta_K of the last batch (the last one trained on)

    def step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        p = self.params
        embed, ids, rest, mask = embedding_inputs(self.model, batch)
        with torch.no_grad():
            clean = embed(ids)
            if p.adv_norm == "l2":
                delta = initial_delta(clean.float(), mask, p.adv_init_mag)
            else:
                delta = torch.empty_like(clean.float()).uniform_(-p.adv_init_mag, p.adv_init_mag) * mask
            delta = project(delta, p)
        losses = []
        for _ in range(p.adv_steps):
            delta.requires_grad_(True)
            loss = self.model(inputs_embeds=clean + delta.to(clean.dtype), **rest).loss
            (grad,) = torch.autograd.grad(loss, delta)  # the ascent only: no parameter gradients
            losses.append(float(loss.detach()))
            with torch.no_grad():
                delta = ascent_step(delta.detach(), grad.detach().float(), mask, p)
        loss = self.model(inputs_embeds=embed(ids) + delta.detach().to(clean.dtype), **rest).loss
        loss.backward()
        self.last_losses = losses + [float(loss.detach())]
        return loss.detach()


MODELS.register("pgd")(Defense(
    "pgd", f"K-step PGD adversarial training on word embeddings (Madry et al., 2018; TextDefender's BERT "
           f"settings); K={PGDParams.adv_steps}",
    objective=PGD, params=PGDParams,
))
