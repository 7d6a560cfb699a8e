"""`ascc`: adversarial sparse convex combination, adversarial training over the convex hull of each word's synonyms.

Dong, Luu, Ji and Liu, "Towards Robustness Against Natural Language Word Substitutions", ICLR 2021
(https://arxiv.org/abs/2104.10212; for BERT as in TextDefender, Li et al., EMNLP 2021: `trainer/ascc.py`,
`model/models.py` `ASCCModel`).

The substitution space of a word is modelled by the convex hull of the input embeddings of the word and its
synonyms. Per training batch:

1. for every token t the candidates are t itself and its synonyms N(t) (single tokens of the vocabulary);
   weights w (batch, length, candidates) start from Kaiming-normal noise;
2. `ascc_steps` = 5 Adam steps (lr `ascc_lr` = 1, weight decay 2e-5) on w minimise
   -KL(p_clean || p_adv) + alpha * H(softmax(w)), where the adversarial input embedding of each token is
   sum_m softmax(w)_m * E(candidate_m) (candidates outside N(t) masked out), p_clean are the (no-grad) clean
   class probabilities and H the entropy of the convex weights (alpha = `ascc_alpha` = 10 makes the
   combination sparse, near a vertex: a real substitution);
3. the model is trained on CE(clean) + beta * KL(p_clean || p_adv) with the final weights (beta = `ascc_beta`
   = 4; `F.kl_div(log p_adv, p_clean, "batchmean")`).

Inference is a plain forward pass (the checkpoint is BERT's), so attacks and costs at inference are bert's.

Synonyms: the `ascc_k` = 8 best neighbours with cosine >= `ascc_min_cos` = 0.5 in robench's default synonym table
(the one its attacks draw from; `ascc_synonym_source` names another). 8 is the size of the paper's sets (the
Alzantot et al. / Jia et al. neighbour lists, at most 8 per word) and keeps the hull tensor (batch x length x 9
x hidden) small on a CPU.

Why ASCC and not DNE (Zhou et al., ACL 2021): both train over convex hulls of synonym embeddings, but DNE also
predicts by an ensemble over Dirichlet samples of the hull (its 2-hop neighbourhoods and sampled inference make
every attack query several forward passes on a CPU, and a randomised victim), while an ASCC model is a plain
classifier at inference; ASCC needs only the synonym sets and the model's own embeddings, both offline.

Deviations: synonyms from robench's table (not the Jia et al. lists), restricted to words that are single tokens of
the backbone's vocabulary (as TextDefender's BERT version), and a token that is part of a multi-piece word (a
"##" piece or the piece before one) keeps only itself; the KL term's clean logits keep their gradient (as
TextDefender; the ICLR paper's formulation is the same loss); robench's shared training settings and the MiniLM
backbone. A bare `step` without `prepare` (outside robench's training loop) has empty synonym sets: every hull
is the token itself.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from robench.core.params import bounded
from robench.engine import resources
from robench.engine.resources.synonyms import DEFAULT_SOURCE
from robench.training.defense import MODELS, Defense
from robench.training.objective import Objective, TrainingContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ASCCParams:
    ascc_alpha: float = bounded(10.0, 0, 1000)  # weight of the entropy (sparsity) term in the inner problem
    ascc_beta: float = bounded(4.0, 0, 1000)  # weight of KL(clean || adversarial) in the training loss
    ascc_steps: int = bounded(5, 1, 100)  # Adam steps on the convex weights per batch
    ascc_lr: float = bounded(1.0, 0, 100, low_open=True)  # their learning rate
    ascc_weight_decay: float = bounded(2e-5, 0, 1)  # their weight decay
    ascc_k: int = bounded(8, 1, 1000)  # synonyms per word ...
    ascc_min_cos: float = bounded(0.5, -1, 1)  # ... with at least this cosine in the table's space
    ascc_synonym_source: str | None = None  # None: the default synonym table of robench's attacks

    def __post_init__(self) -> None:
        if self.ascc_synonym_source is not None and self.ascc_synonym_source not in resources.SOURCES:
            raise ValueError(f"ascc_synonym_source must be one of {resources.SOURCES} or null, got "
                             f"{self.ascc_synonym_source!r}")


def synonyms_of(params: ASCCParams, settings) -> Any:
    return resources.synonym_table(settings, params.ascc_synonym_source or DEFAULT_SOURCE)


def token_neighbours(tokenizer, table, k: int, min_cos: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(candidates [vocab, M] token ids, mask [vocab, M], continuation [vocab]): column 0 is the token itself, then
    its synonyms that are single tokens of the vocabulary; `continuation` marks "##" pieces."""
    vocab: dict[str, int] = tokenizer.get_vocab()
    size = max(vocab.values()) + 1
    special = set(getattr(tokenizer, "all_special_ids", []))
    rows: dict[int, list[int]] = {}
    for token, i in vocab.items():
        if i in special or not (token.isascii() and token.isalpha() and token.islower()):
            continue
        ids = [vocab[w] for w, _ in table.neighbours(token, k=k, min_cos=min_cos) if w in vocab and vocab[w] != i]
        if ids:
            rows[i] = ids
    width = 1 + max((len(v) for v in rows.values()), default=0)
    candidates = torch.arange(size).unsqueeze(1).repeat(1, width)
    mask = torch.zeros(size, width, dtype=torch.bool)
    mask[:, 0] = True
    for i, ids in rows.items():
        candidates[i, 1:1 + len(ids)] = torch.tensor(ids)
        mask[i, 1:1 + len(ids)] = True
    continuation = torch.zeros(size, dtype=torch.bool)
    for token, i in vocab.items():
        continuation[i] = token.startswith("##")
    return candidates, mask, continuation


class ASCC(Objective):
    """CE(clean) + beta * KL(clean || worst sparse convex combination of synonym embeddings)."""

    params: ASCCParams

    def __init__(self, model: torch.nn.Module, params: ASCCParams) -> None:
        super().__init__(model, params)
        self.candidates: torch.Tensor | None = None
        self.mask: torch.Tensor | None = None
        self.continuation: torch.Tensor | None = None
        self.last_inner_losses: list[float] = []  # the inner objective before each Adam step of the last batch
        self.info: dict[str, Any] = {}

    @classmethod
    def fingerprint(cls, params: ASCCParams, settings) -> dict[str, Any] | None:
        info = synonyms_of(params, settings).info
        return {"synonyms": info.get("name"), "key": info.get("key") or info.get("origin")}

    @classmethod
    def check(cls, params: ASCCParams, train: Any, settings) -> None:
        if settings is not None and getattr(settings, "data_dir", None) is not None:
            resources.require_synonym_source(settings, params.ascc_synonym_source or DEFAULT_SOURCE)

    def prepare(self, context: TrainingContext) -> None:
        self.use_table(context.tokenizer, synonyms_of(self.params, context.settings))

    def use_table(self, tokenizer, table) -> None:
        """Map the synonym table onto the tokenizer's vocabulary (what `prepare` does with the run's table)."""
        candidates, mask, continuation = token_neighbours(tokenizer, table, self.params.ascc_k,
                                                          self.params.ascc_min_cos)
        device = self.model.get_input_embeddings().weight.device
        self.candidates, self.mask, self.continuation = candidates.to(device), mask.to(device), continuation.to(device)
        with_synonyms = int(mask[:, 1:].any(dim=1).sum())
        self.info = {"tokens_with_synonyms": with_synonyms, "max_candidates": int(mask.shape[1]),
                     "synonyms": {k: table.info.get(k) for k in ("name", "key") if k in table.info}}

    def _hull(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(candidate ids [B, L, M], allowed [B, L, M]) of each token of `ids`."""
        if self.candidates is None:
            return ids.unsqueeze(-1), attention_mask.bool().unsqueeze(-1)
        cand, allowed = self.candidates[ids], self.mask[ids].clone()
        following = torch.cat([ids[:, 1:], torch.zeros_like(ids[:, :1])], dim=1)
        in_piece_word = self.continuation[ids] | self.continuation[following]
        allowed[..., 1:] &= ~in_piece_word.unsqueeze(-1)
        allowed[..., 1:] &= attention_mask.bool().unsqueeze(-1)
        return cand, allowed

    def step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.candidates is None and not self.info.get("warned"):
            log.warning("ascc: no synonym table was prepared (a bare step outside robench's training loop): every "
                        "token's convex hull is the token itself")
            self.info["warned"] = True
        p = self.params
        embed = self.model.get_input_embeddings()
        ids, labels = batch["input_ids"], batch["labels"]
        rest = {k: v for k, v in batch.items() if k not in ("input_ids", "labels")}
        cand, allowed = self._hull(ids, batch["attention_mask"])
        vertices = embed(cand)  # (B, L, M, H): the hull's corners, with the embedding's gradient
        with torch.no_grad():
            clean_probs = F.softmax(self.model(input_ids=ids, **rest).logits.float(), dim=-1)
        w = torch.empty(*cand.shape, 1, device=ids.device, dtype=torch.float32)
        torch.nn.init.kaiming_normal_(w)
        w.requires_grad_(True)
        inner = torch.optim.Adam([w], lr=p.ascc_lr, weight_decay=p.ascc_weight_decay)
        keep = allowed.unsqueeze(-1)
        fixed = vertices.detach()
        self.last_inner_losses = []
        for _ in range(p.ascc_steps):
            inner.zero_grad()
            weights = F.softmax(w.masked_fill(~keep, -1e4), dim=2) * keep
            adv = self.model(inputs_embeds=(fixed * weights.to(fixed.dtype)).sum(dim=2), **rest).logits.float()
            kl = F.kl_div(F.log_softmax(adv, dim=-1), clean_probs, reduction="sum")
            entropy = (-weights * torch.log(weights.clamp(min=1e-12))).sum(dim=2).mean()
            loss = -kl + p.ascc_alpha * entropy
            self.last_inner_losses.append(float(loss.detach()))
            (grad,) = torch.autograd.grad(loss, w)  # the model's parameters get nothing from the inner steps
            w.grad = grad
            inner.step()
        weights = (F.softmax(w.detach().masked_fill(~keep, -1e4), dim=2) * keep).to(vertices.dtype)
        clean_logits = self.model(input_ids=ids, **rest).logits.float()
        adv_logits = self.model(inputs_embeds=(vertices * weights).sum(dim=2), **rest).logits.float()
        loss = F.cross_entropy(clean_logits, labels) + p.ascc_beta * F.kl_div(
            F.log_softmax(adv_logits, dim=-1), F.softmax(clean_logits, dim=-1), reduction="batchmean")
        loss.backward()
        return loss.detach()


MODELS.register("ascc")(Defense(
    "ascc", "ASCC: adversarial sparse convex combinations of synonym embeddings (Dong et al., 2021)",
    objective=ASCC, params=ASCCParams,
))
