"""`smart`: SMART, smoothness-inducing adversarial regularisation + Bregman proximal point.

Jiang, He, Chen, Liu, Gao and Zhao, "SMART: Robust and Efficient Fine-Tuning
for Pre-trained Natural Language Models through Principled Regularized
Optimization", ACL 2020.

Each step minimises

    CE(f(x; theta), y)
      + lambda_s * l_s(f(x; theta), f(x + delta; theta))        smoothness-inducing regulariser
      + mu       * l_s(f(x; theta), f(x; theta_tilde))          Bregman proximal point term

where l_s(P, Q) = KL(P || Q) + KL(Q || P) is the symmetric KL divergence between
the class distributions (batch mean), x is the word-embedding output and delta
its adversarial perturbation: delta_0 = sigma * N(0, I) on real tokens, then one
projected ascent step delta <- Pi_{||delta||_inf <= eps}(delta_0 + eta * g),
g = the gradient of l_s(f(x), f(x + delta_0)) with respect to delta (f(x) held
fixed). theta_tilde is the momentum (EMA) teacher: a copy of the model updated
after every optimizer step as theta_tilde <- beta * theta_tilde + (1 - beta) * theta,
starting from the pretrained weights. Gradients flow through both arguments of
the regulariser; the teacher gets none. The word embeddings come from
`model.get_input_embeddings()`, so `imbert+smart` works too.

Hyperparameters (`SMARTParams`, the paper's GLUE settings): smart_noise sigma =
1e-5, smart_step eta = 1e-3, smart_eps eps = 1e-5, smart_ascent_steps T_x = 1,
bregman_mu mu = 1, ema_beta beta = 0.99, smart_lambda lambda_s = 1 (the paper
searches lambda_s in {1, 3, 5}; 1 is the smallest value of that grid and the
default of the authors' MT-DNN release).

Deviations:
* The paper uses beta = 0.99 for the first 10% of updates and 0.999 after; here
  beta is constant (0.99), because an objective does not know the schedule's
  length.
* One inner proximal step per batch (S = 1): the optimizer (robench's AdamW with
  linear warm-up/decay, lr 5e-5, batch 32) takes the proximal step, instead of
  the paper's Adamax with its own learning-rate grid.
* The ascent direction is the gradient normalised per token by its L_inf norm
  (as in the authors' MT-DNN code; the raw gradient is vanishingly small at
  sigma = 1e-5), the projection is onto the L_inf ball (a clamp), and the
  ascent step is masked to real tokens.
* The teacher runs in eval mode (no dropout); the student's two forward passes
  use independent dropout masks, as in the authors' code, so with eps = 1e-5 the
  regulariser largely measures dropout noise. Under CUDA bf16 autocast a 1e-5
  perturbation is also below bf16 resolution after the embedding LayerNorm.
* MiniLM backbone instead of BERT-base / RoBERTa / MT-DNN.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from robench.core.params import bounded
from robench.training.defense import MODELS, Defense
from robench.training.objective import Objective


@dataclass(frozen=True)
class SMARTParams:
    smart_lambda: float = bounded(1.0, 0, 100)  # lambda_s, weight of the smoothness-inducing regulariser
    smart_noise: float = bounded(1e-5, 0, 1, cost=False)  # sigma, std of the random start of delta
    smart_step: float = bounded(1e-3, 0, 10, cost=False)  # eta, ascent step size
    smart_eps: float = bounded(1e-5, 0, 1, cost=False)  # eps, L_inf radius of delta
    smart_ascent_steps: int = bounded(1, 0, 100)  # T_x, projected ascent steps
    bregman_mu: float = bounded(1.0, 0, 100)  # mu, weight of the Bregman proximal point term (0: off)
    ema_beta: float = bounded(0.99, 0, 1, high_open=True, cost=False)  # beta, momentum of the teacher

    def __post_init__(self) -> None:
        if min(self.smart_lambda, self.smart_noise, self.smart_step, self.smart_eps, self.bregman_mu) < 0:
            raise ValueError("smart_lambda, smart_noise, smart_step, smart_eps and bregman_mu must be >= 0")
        if self.smart_ascent_steps < 0:
            raise ValueError(f"smart_ascent_steps must be >= 0, got {self.smart_ascent_steps}")
        if not 0 <= self.ema_beta < 1:
            raise ValueError(f"ema_beta must be in [0, 1), got {self.ema_beta}")


def symmetric_kl(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(P || Q) + KL(Q || P) of the softmax distributions, averaged over the batch."""
    log_p, log_q = F.log_softmax(p_logits.float(), -1), F.log_softmax(q_logits.float(), -1)
    return (F.kl_div(log_q, log_p, log_target=True, reduction="batchmean")
            + F.kl_div(log_p, log_q, log_target=True, reduction="batchmean"))


class SMART(Objective):
    """Cross-entropy + lambda_s * adversarial smoothness + mu * Bregman proximal term (EMA teacher)."""

    params: SMARTParams

    def __init__(self, model: torch.nn.Module, params: SMARTParams) -> None:
        super().__init__(model, params)
        self.teacher = copy.deepcopy(model).eval()
        self.teacher.requires_grad_(False)
        self.last_delta: torch.Tensor | None = None  # the perturbation of the last step (detached)

    def step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        p = self.params
        ids = batch["input_ids"]
        inputs = {k: v for k, v in batch.items() if k not in ("input_ids", "labels")}
        embeds = self.model.get_input_embeddings()(ids)
        out = self.model(inputs_embeds=embeds, labels=batch["labels"], **inputs)
        loss = out.loss
        if p.smart_lambda > 0:
            mask = batch["attention_mask"].unsqueeze(-1).to(embeds.dtype)
            delta = self.perturbation(embeds.detach(), out.logits.detach(), mask, inputs)
            adv_logits = self.model(inputs_embeds=embeds + delta, **inputs).logits
            loss = loss + p.smart_lambda * symmetric_kl(out.logits, adv_logits)
        if p.bregman_mu > 0:
            with torch.no_grad():
                teacher_logits = self.teacher(input_ids=ids, **inputs).logits
            loss = loss + p.bregman_mu * symmetric_kl(out.logits, teacher_logits)
        loss.backward()
        return loss.detach()

    def perturbation(self, embeds: torch.Tensor, logits: torch.Tensor, mask: torch.Tensor,
                     inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """delta_0 = sigma * N(0, I), then projected L_inf ascent on l_s(f(x), f(x + delta))."""
        p = self.params
        delta = torch.randn_like(embeds) * p.smart_noise * mask
        for _ in range(p.smart_ascent_steps):
            delta.requires_grad_(True)
            adv_logits = self.model(inputs_embeds=embeds + delta, **inputs).logits
            (grad,) = torch.autograd.grad(symmetric_kl(logits, adv_logits), delta)
            direction = grad / (grad.abs().amax(dim=-1, keepdim=True) + 1e-6)
            delta = (delta.detach() + p.smart_step * direction).clamp(-p.smart_eps, p.smart_eps) * mask
        delta = delta.detach()
        self.last_delta = delta
        return delta

    @torch.no_grad()
    def after_optimizer_step(self) -> None:
        """theta_tilde <- beta * theta_tilde + (1 - beta) * theta."""
        for teacher, student in zip(self.teacher.parameters(), self.model.parameters()):
            teacher.lerp_(student.detach(), 1 - self.params.ema_beta)


MODELS.register("smart")(Defense(
    "smart", "SMART: adversarial smoothness regulariser + Bregman proximal point (Jiang et al., 2020)",
    objective=SMART, params=SMARTParams,
))
