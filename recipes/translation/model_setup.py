"""The model and the optimizer a run's config describes, and the check of
its model settings before anything is written."""

import keras

from keras_attention.data import RESERVED_TOKENS
from keras_attention.models import Transformer
from keras_attention.training import PlateauFactor, TransformerSchedule
from recipes.translation import corpus_rule


def build_model(config, source_vocabulary_size, target_vocabulary_size):
    """The config's Transformer for vocabularies of these sizes (their
    embeddings are shared only when the sizes are equal)."""
    overrides = {
        "encoder_vocabulary_size": source_vocabulary_size,
        "decoder_vocabulary_size": target_vocabulary_size,
        "max_length": config.max_length,
        "norm_first": config.norm_first,
    }
    if config.num_layers is not None:
        overrides["num_encoder_layers"] = overrides["num_decoder_layers"] = config.num_layers
    for name in ("d_model", "num_heads", "intermediate_dim", "dropout", "attention_dropout",
                 "activation_dropout"):
        if getattr(config, name) is not None:
            overrides[name] = getattr(config, name)
    if config.share_embeddings is not None:
        overrides["share_encoder_decoder_embeddings"] = config.share_embeddings
    if config.tie_output_embeddings is not None:
        overrides["tie_output_embeddings"] = config.tie_output_embeddings
    if source_vocabulary_size != target_vocabulary_size:
        overrides["share_encoder_decoder_embeddings"] = False
    return Transformer.from_preset(config.model_preset, **overrides)


def build_optimizer(config, d_model, precision):
    """`(optimizer, learning_rate_factor)`: Adam with the paper's schedule and,
    with --plateau-patience, the variable the plateau lowers (else None)."""
    schedule = TransformerSchedule(d_model, config.warmup_steps, config.learning_rate_scale)
    factor = None
    if config.plateau_patience is not None:  # a factor that the plateau lowers
        schedule = PlateauFactor(schedule)
        factor = schedule.factor
    optimizer = keras.optimizers.Adam(schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    if precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer, factor


def check_model_settings(config):
    """Raises ValueError for model settings the tokenizers or the Transformer
    refuse, before anything is written: builds the model once, with small
    vocabularies (the learned ones, at most `--vocabulary-size`, decide the
    real embedding sizes later: a huge `--vocabulary-size` on a small corpus
    must not allocate a huge throw-away model here)."""
    if config.vocabulary_size <= len(RESERVED_TOKENS):
        raise ValueError(f"--vocabulary-size must exceed the {len(RESERVED_TOKENS)} reserved "
                         f"tokens {list(RESERVED_TOKENS)}; received {config.vocabulary_size}.")
    try:
        small = len(RESERVED_TOKENS) + 4
        build_model(corpus_rule.placeholder(config), small, small)
    except ValueError as e:
        raise ValueError(f"The model settings (--model-preset {config.model_preset} with "
                         f"--num-layers/--d-model/--num-heads/--intermediate-dim/--dropout/"
                         f"--attention-dropout/--activation-dropout) "
                         f"are refused: {e}") from None
