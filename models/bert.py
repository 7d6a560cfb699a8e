"""`bert`: vanilla fine-tuning of a BERT-architecture backbone with cross-entropy.

Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers for
Language Understanding", NAACL 2019. A linear classifier on the pooled [CLS]
representation, all weights fine-tuned with AdamW and linear warmup/decay
(robench's training defaults: lr 5e-5, batch 32, 10% warmup, weight decay 0.01,
max length 128). Deviation: the embedded default backbone is MiniLM-L6-H384,
not BERT-base, and its pooler is the one shipped with that checkpoint.
"""
from robench.training.defense import MODELS, Defense

MODELS.register("bert")(Defense("bert", "Vanilla fine-tuning with cross-entropy (Devlin et al., 2019)"))
