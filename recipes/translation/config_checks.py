"""The checks of a run's `TranslationConfig` (`check_config`), before
anything is written: each names the flag and the value received."""

from recipes.translation.corpus_rule import placeholder
from recipes.translation.decoding_flags import decoding_settings
from recipes.translation.decoding_flags import flag as _flag


def check_config(config):
    """Raises ValueError naming the first bad field (by its flag). Fields the
    corpus rule fills in later (`"auto"`) are checked at a value it can give."""
    config = placeholder(config)
    # Imported here: `--help` must not import Keras/TensorFlow (see config.py).
    from keras_attention._validation import (
        check_non_negative_int,
        check_positive_int,
        check_rate,
    )

    positive = ("vocabulary_size", "max_length", "batch_tokens", "steps", "steps_per_epoch",
                "warmup_steps", "eval_batch_size", "keep_checkpoints",
                "average_checkpoints", "backup_every_steps", "shuffle_buffer",
                "vocabulary_sample", "holdout_max_pairs", "model_parallel")
    for name in ("early_stopping_patience", "plateau_patience"):
        if getattr(config, name) is not None:
            positive += (name,)
    for name in positive:
        check_positive_int(_flag(name), getattr(config, name))
    if config.time_budget is not None and not (0 < config.time_budget < float("inf")):
        raise ValueError(f"--time-budget must be a positive number of minutes; "
                         f"received {config.time_budget!r}.")
    if config.time_budget is not None:
        # The one check, before anything is written: `auto` picks several
        # workers from TF_CONFIG, as the strategy will.
        from keras_attention.training import picks_multi_worker

        if picks_multi_worker(config.strategy):
            raise ValueError("--time-budget cannot stop several workers at the same step; "
                             "use --steps with --strategy multi_worker.")
    check_non_negative_int("--validation-bleu-sentences", config.validation_bleu_sentences)
    check_non_negative_int("--in-memory-pairs", config.in_memory_pairs)
    for name in ("early_stopping_patience", "plateau_patience"):
        if getattr(config, name) is not None and not config.validation_bleu_sentences:
            raise ValueError(f"{_flag(name)} needs validation BLEU: "
                             "--validation-bleu-sentences must be > 0.")
    if not 0 < config.plateau_decay < 1:
        raise ValueError(f"--plateau-decay must be in (0, 1); received {config.plateau_decay!r}.")
    if config.holdout is not None and any(not 0 <= h or h != h for h in config.holdout):
        raise ValueError(f"--holdout sizes must be >= 0; received {list(config.holdout)}.")
    if config.holdout is not None and any(h >= 1 and (h == float("inf") or h != int(h))
                                          for h in config.holdout):
        raise ValueError(f"--holdout sizes are fractions (below 1) or whole numbers of pairs; "
                         f"received {list(config.holdout)}.")
    if config.batch_tokens < config.max_length:
        raise ValueError(f"--batch-tokens {config.batch_tokens} cannot hold one sequence of "
                         f"--max-length {config.max_length}; give at least {config.max_length}.")
    for name, value in (("--learning-rate-scale", config.learning_rate_scale),
                        ("--clip-norm", config.clip_norm)):
        if value is not None and not 0 < value < float("inf"):
            raise ValueError(f"{name} must be a positive finite number; received {value!r}.")
    if (config.select_checkpoints == "last"
            and config.average_checkpoints > config.keep_checkpoints):
        raise ValueError(
            f"--average-checkpoints {config.average_checkpoints} needs at least that many kept "
            f"checkpoints; --keep-checkpoints is {config.keep_checkpoints}."
        )
    check_positive_int("--max-eval-sentences", config.max_eval_sentences, allow_none=True)
    check_non_negative_int("--attention-plots", config.attention_plots)
    if config.bucket_boundaries is not None:
        from keras_attention.data import check_bucket_boundaries

        check_bucket_boundaries(config.bucket_boundaries, config.max_length,
                                "--bucket-boundaries")
        if config.pack:
            raise ValueError(
                f"--bucket-boundaries {' '.join(map(str, config.bucket_boundaries))} shapes "
                "length buckets, but --pack (the default for your own files) packs the pairs "
                "into rows of --max-length instead; add --no-pack to bucket them.")
    check_rate("--label-smoothing", config.label_smoothing)
    # The decoding settings' one validation, naming the flags.
    from keras_attention.decoding import DecodingSettings

    DecodingSettings.check(decoding_settings(config), _flag)
    if config.max_output_length is not None and config.max_output_length > config.max_length:
        raise ValueError(f"--max-output-length {config.max_output_length} exceeds --max-length "
                         f"{config.max_length} (the model's positions).")
    if config.dataset == "text_files":
        if not config.train_files:
            raise ValueError("--dataset text_files needs --train-files SRC TGT (or a TSV file).")
    elif config.train_files or config.validation_files or config.test_files:
        raise ValueError(
            f"--train-files/--validation-files/--test-files need --dataset text_files; "
            f"received --dataset {config.dataset}."
        )
    for split, size in zip(("validation", "test"), config.holdout or ()):
        if size and getattr(config, f"{split}_files"):
            raise ValueError(f"--holdout asks for {size:g} {split} pairs from --train-files, "
                             f"but --{split}-files are given; give 0 for that split.")
    if (config.early_stopping_patience is not None and config.dataset == "text_files"
            and not config.validation_files and not (config.holdout or (0,))[0]):
        raise ValueError("--early-stopping-patience needs a validation split: give "
                         "--validation-files or a --holdout validation size.")
    if config.share_embeddings and not config.shared_vocabulary:
        raise ValueError("--share-embeddings needs one vocabulary for source and target: "
                         "add --shared-vocabulary.")
    for name in ("train_files", "validation_files", "test_files"):
        files = getattr(config, name)
        if files is not None and len(files) not in (1, 2):
            raise ValueError(f"--{name.replace('_', '-')} takes SRC TGT or one TSV file; "
                             f"received {list(files)}.")
