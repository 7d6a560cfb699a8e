"""The leaderboard tables' columns (`robench.report.leaderboard` documents each): the keys, metrics and their
units, the checkpoint table's order, the comparison's columns, the analysis columns, and what a note says once."""
from __future__ import annotations

from robench.report.validity import VALIDITY_METRICS
from robench.runs.chance import MARGIN

KEYS = ["task", "model", "attack", "backbone", "train_size"]
ROW = KEYS + ["setting", "seeds", "examples"]  # the leading columns of every leaderboard row
IDS = ["setting_id", "model_setting_id"]  # trailing columns: the setting and its model part (robench.report.identity)
LABELS = ["model_label", "attack_label"]  # the two parts of the `setting` label (before IDS)
METRICS = ["dev_accuracy", "clean_accuracy", "robust_accuracy", "accuracy_drop", "dev_minus_robust",
           "attack_success_rate", "perturbed_word_rate",
           "avg_words_per_input", "avg_queries", "train_seconds", "worst_case_accuracy",
           *VALIDITY_METRICS,  # the swap audit of word-level attacks (robench.report.validity)
           "certified_accuracy"]  # certified-robust accuracy: defences with a certificate only (SAFER)
PERCENT = {"dev_accuracy", "clean_accuracy", "robust_accuracy", "accuracy_drop", "dev_minus_robust",
           "attack_success_rate", "perturbed_word_rate",
           "worst_case_accuracy", *VALIDITY_METRICS, "certified_accuracy",
           "robust_accuracy_diff", "shuffle_flip_rate", "top1_share", "top3_share",
           "blimp_anaphor_gender_agreement", "blimp_anaphor_number_agreement", "blimp_overall", "probe_uuas_best"}
# per checkpoint (leaderboard.csv), in this order, before the attack settings' prefixed columns
CHECKPOINT = ["task", "rank", "rank_by", "rank_accuracy", "model", "model_label", "backbone", "train_size", "seeds",
              "untrained_seeds",
              "dev_accuracy_mean", "dev_accuracy_std",
              *(f"worst_case_accuracy_{k}" for k in ("mean", "std", "ci_low", "ci_high")),
              *(f"certified_accuracy_{k}" for k in ("mean", "std", "ci_low", "ci_high")),
              "masking_flags", "train_seconds_mean", "train_seconds_std", "model_setting_id", "baseline"]
OWN = ["dev_accuracy", "train_seconds"]  # metrics of the checkpoint itself: over the seeds of all its runs
REPLAYS = ("advglue", "transfer")  # attacks that replay fixed examples: their columns come first
RANK_BY = {"worst_case_accuracy": "worst-case accuracy under attack",
           "lowest_robust_accuracy": "the lowest accuracy under a single attack"}
UNTRAINED_NOTE = (f"untrained seeds: their checkpoint did not train (the 95% lower bound of its dev or clean accuracy "
                  f"is not {100 * MARGIN:.0f} points above the majority-class rate); they count in the means and "
                  "are left out of every comparison with the baseline")
DIFF = ["robust_accuracy_diff", "robust_accuracy_diff_ci_low", "robust_accuracy_diff_ci_high",
        "robust_accuracy_diff_p", "robust_accuracy_diff_p_holm", "robust_accuracy_diff_seeds",
        "robust_accuracy_diff_verdict", "robust_accuracy_diff_family"]  # with a baseline: model minus baseline
# `robench analyze` columns (leaderboard --with-analysis); an analysis does not depend on the attack
ANALYSIS_KEYS = ["task", "model", "backbone", "train_size", "model_setting_id"]
ANALYSIS_METRICS = ["shuffle_flip_rate", "shuffle_gold_prob_abs_change", "top1_share", "top3_share", "gini",
                    "entropy", "token_cosine", "cls_effective_rank", "cka_mean", "cka_last",
                    # `robench analyze --syntax` (empty for analyses without it)
                    "blimp_anaphor_gender_agreement", "blimp_anaphor_number_agreement", "blimp_overall",
                    "probe_uuas_best", "probe_spearman_best"]
DIGITS = {"shuffle_gold_prob_abs_change": 3, "gini": 3, "entropy": 2, "token_cosine": 3, "cka_mean": 3,
          "cka_last": 3, "probe_spearman_best": 3}  # decimals in Markdown (default 1)
