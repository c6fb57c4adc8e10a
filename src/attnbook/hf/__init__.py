"""Everything that knows how a Hugging Face transformers model is laid out, in one place.

* :mod:`.loading`: loading by hub name or folder, offline first (hub reachability, the shipped
  all-MiniLM-L6-v2, the paper's models at initialisation) and text inputs of a fixed length;
* :mod:`.surgery`: the pure-attention variants of Dong et al. (2021) (chapter "Rank collapse in
  pretrained transformers");
* :mod:`.measuring`: layer outputs, attention matrices and head roles of an encoder;
* :mod:`.gating`: head gates through forward pre-hooks, given through a context manager (chapter
  "Pruning heads");
* :mod:`.embeddings`: MiniLM's sentence embeddings and the task losses it is pruned with;
* :mod:`.relevance`: LRP relevance of every head to the sentence embedding (chapter "A translation model").

The names below are re-exported so that a chapter can write ``hf.load_pretrained(...)``.
"""

from attnbook.hf.embeddings import contrastive_loss, drop_words, embedding_similarity, mean_pooled
from attnbook.hf.gating import GateHooks, attach_head_gates, output_projections
from attnbook.hf.loading import (
    BASE_CONFIGS,
    MINILM_HUB_NAME,
    PAPER_MODELS,
    hub_offline_by_env,
    hub_reachable,
    init_model,
    load_paper_models,
    load_pretrained,
    load_tokenizer,
    minilm_source,
    text_batch,
)
from attnbook.hf.measuring import (
    attention_matrices,
    contraction_thresholds,
    encoder_head_roles,
    head_matrices,
    layer_outputs,
    residual_by_layer,
    residual_curves,
    token_counts,
    where_the_bound_applies,
    word_of_token,
)
from attnbook.hf.surgery import ARCHITECTURES, VARIANT_SWITCHES, VARIANTS, architecture, variant

__all__ = [
    "ARCHITECTURES", "BASE_CONFIGS", "GateHooks", "MINILM_HUB_NAME", "PAPER_MODELS", "VARIANTS",
    "VARIANT_SWITCHES", "architecture", "attach_head_gates", "attention_matrices", "contraction_thresholds", "contrastive_loss",
    "drop_words", "embedding_similarity", "encoder_head_roles", "head_matrices", "hub_offline_by_env", "hub_reachable",
    "init_model", "layer_outputs", "load_paper_models", "load_pretrained", "load_tokenizer", "mean_pooled",
    "minilm_source", "output_projections", "residual_by_layer", "residual_curves", "text_batch", "token_counts", "variant",
    "where_the_bound_applies", "word_of_token",
]
