"""What a run trains on: the corpus its config names, the corpus rule's
settings for it, the tokenizers (the run's own, or learned from a sample),
the length statistics of that sample and the batches."""

import dataclasses
import os
import time

from keras_attention.data import (
    TextFilesCorpus,
    TfdsCorpus,
    length_statistics,
    load_shard,
    load_tokenizers,
    make_batches,
    pair_count,
    sample_pairs,
    train_tokenizers,
)
from recipes.translation import corpus_rule
from recipes.translation.config import load_config
from recipes.translation.config_checks import check_config


def make_corpus(config):
    """The `ParallelCorpus` the config names (own files are read and checked now)."""
    if config.dataset == "text_files":
        files = {"train": config.train_files}
        if config.validation_files:
            files["validation"] = config.validation_files
        if config.test_files:
            files["test"] = config.test_files
        start = time.perf_counter()
        corpus = TextFilesCorpus(files, config.source_lang or "source",
                                 config.target_lang or "target",
                                 tsv_columns=config.tsv_columns, holdout=config.holdout,
                                 split_seed=config.split_seed,
                                 in_memory_pairs=config.in_memory_pairs,
                                 holdout_max_pairs=config.holdout_max_pairs,
                                 sample_pairs=config.vocabulary_sample)
        sizes = ", ".join(f"{corpus.sizes[s]:,} {s}" for s in corpus.splits)
        streamed = (f"; {' and '.join(corpus.streamed)} streamed from disk"
                    if corpus.streamed else "")
        holdout = (f" (held out by a hash of the source sentence, seed {config.split_seed})"
                   if corpus.streamed and config.holdout else "")
        corpus.read_seconds = time.perf_counter() - start
        print(f"Read the text files in {corpus.read_seconds:.1f} s: {sizes} pairs"
              f"{holdout}{streamed}.", flush=True)
        return corpus
    return TfdsCorpus(config.dataset, config.source_lang, config.target_lang,
                      data_dir=config.data_dir)


def apply_corpus_rule(config, corpus, workdir=None):
    """`config` with its "auto" fields set by the corpus rule for `corpus`
    (recipes/translation/corpus_rule.py), which it prints; checked again. A
    run being resumed keeps the values it started with (its config.json),
    also one started before the rule existed."""
    auto = [name for name in corpus_rule.RULE_FIELDS if getattr(config, name) == corpus_rule.AUTO]
    if not auto:
        return config
    saved = os.path.join(workdir, "config.json") if workdir else None
    if saved and os.path.isfile(saved):
        started = load_config(saved)
        config = dataclasses.replace(config, corpus_rule=started.corpus_rule,
                                     **{name: getattr(started, name) for name in auto})
        print(f"Settings: as the run started ({started.corpus_rule or 'before the corpus rule'}).",
              flush=True)
        return config
    pairs = pair_count(corpus, "train")
    if isinstance(corpus, TextFilesCorpus):
        sources, targets = corpus.sample_text("train", corpus_rule.SCRIPT_SAMPLE)
    else:  # a TFDS corpus: its size from its metadata, its scripts from its first pairs
        sources, targets = [], []
        if pairs is None or pairs < corpus_rule.SMALL_CORPUS_PAIRS:  # the scripts matter
            sample = list(corpus.load("train").take(corpus_rule.SCRIPT_SAMPLE)
                          .as_numpy_iterator())
            sources = [s.decode("utf-8") for s, _ in sample]
            targets = [t.decode("utf-8") for _, t in sample]
            pairs = pairs or len(sample)
    config = corpus_rule.resolve(config, pairs, sources, targets)
    print(f"Settings: {config.corpus_rule}.", flush=True)
    check_config(config)
    return config


def check_splits(config, corpus):
    """Raises ValueError when the config needs a split the corpus lacks (a
    TFDS dataset can lack a validation split), or when --validation-files or
    --test-files hold only sentences of the training data; warns when they
    hold some (`check_overlap`)."""
    if config.early_stopping_patience is not None and "validation" not in corpus.splits:
        raise ValueError(f"--early-stopping-patience needs a validation split; the corpus has "
                         f"only {list(corpus.splits)}.")
    for split, overlap in getattr(corpus, "overlap", {}).items():
        check_overlap(split, getattr(config, f"{split}_files"), overlap)


def check_overlap(split, files, overlap):
    """A split with its own `files` whose source sentences are training's
    too (`TrainingOverlap`): scores on it measure memory, not translation.
    Every pair of it a sentence of the training files (all checked; the
    same files given twice, most often, whose --holdout share is not
    trained on but is another split's): ValueError, since no score of it
    would mean anything. Some trained on (or every pair of a sample): a
    warning with the count and the share."""
    flag = f"--{split}-files {' '.join(map(str, files))}"
    compared = ("(source sentences compared with spacing collapsed, case-folded, in Unicode's "
                "NFC form)")
    if overlap.in_training_files == overlap.pairs:
        held = ("" if overlap.shared == overlap.pairs else
                f"; {overlap.shared:,} trained on, the others held out by --holdout")
        raise ValueError(
            f"{flag}: all {overlap.pairs:,} of its pairs have a source sentence of the "
            f"training files {compared}{held}: its scores would measure what the model "
            f"memorised, not how it translates. Give {split} files held out from training, or "
            f"leave out --{split}-files and split {split} pairs off the training files with "
            "--holdout.")
    if not overlap.shared:
        return
    of = (f"of a sample of {overlap.checked:,} of its {overlap.pairs:,} pairs"
          if overlap.sampled else f"of its {overlap.pairs:,} pairs")
    print(f"Warning: {flag}: {overlap.shared:,} {of} ({overlap.shared / overlap.checked:.1%}) "
          f"have a source sentence that the training data has too {compared}: the {split} "
          "scores partly measure what the model memorised, not how it translates.", flush=True)


@dataclasses.dataclass
class TrainingData:
    """A run's corpus with its tokenizers, and what the run records of them."""

    corpus: object
    source_tokenizer: object
    target_tokenizer: object
    pairs: int  # training pairs: counted, or (when the corpus cannot tell) the sample's
    over_max_length: int  # of them, longer than --max-length (scaled from the sample)
    vocabulary_seconds: float = None  # None: the run's saved tokenizers were loaded

    def training_batches(self, config, batch_multiple=1, one_shape=False):
        """`dataset_fn(input_context, seed_offset)` for `Trainer.fit`: the
        endless, shuffled training batches of one input pipeline (their rows
        a multiple of `batch_multiple`; with `one_shape`, all padded to
        --max-length, as several JAX processes' parts of a batch must be)."""
        def dataset_fn(input_context, seed_offset):
            # Each input pipeline (worker) reads its own shard: its share of
            # the files, or every N-th pair.
            pairs, sharded = load_shard(self.corpus, "train", input_context)
            return make_batches(
                pairs, self.source_tokenizer, self.target_tokenizer,
                max_length=config.max_length, length_policy=config.length_policy,
                batch_tokens=config.batch_tokens,
                bucket_boundaries=(config.max_length,) if one_shape else config.bucket_boundaries,
                shuffle_buffer=config.shuffle_buffer, seed=config.seed + seed_offset,
                deterministic=config.deterministic, repeat=True, input_context=input_context,
                shard=not sharded, pack=config.pack, batch_multiple=batch_multiple,
            )

        return dataset_fn

    def validation_batches(self, config):
        """The validation split's batches (validation loss and accuracy), or
        None without one."""
        if "validation" not in self.corpus.splits:
            return None
        return make_batches(
            self.corpus.load("validation"), self.source_tokenizer, self.target_tokenizer,
            max_length=config.max_length, batch_tokens=config.batch_tokens,
            bucket_boundaries=config.bucket_boundaries, training=False,
        )


def prepare_training_data(config, corpus, workdir):
    """The `TrainingData` of a run: its saved tokenizers, or new ones learned
    from a sample of the training pairs (the caller saves them), and the
    length statistics of the same sample, printed. Writes nothing; raises
    ValueError when the length policy leaves no training pair."""
    # One bounded sample of the training pairs for the vocabularies and the
    # length statistics, read once (cached: a TFDS sample is a pass over the
    # split).
    sample = sample_pairs(corpus, "train", config.vocabulary_sample).cache()
    source_tokenizer, target_tokenizer, vocabulary_seconds = _tokenizers(config, corpus, sample,
                                                                         workdir)
    # Length statistics of the same sample: a full pass would tokenize the
    # whole corpus before the first step.
    stats = length_statistics(sample, source_tokenizer, target_tokenizer, config.max_length)
    _check_training_pairs(config, stats)
    training_pairs = pair_count(corpus, "train") or stats["pairs"]
    over = stats["over_max_length"]
    if training_pairs != stats["pairs"]:  # scaled from the sample
        over = round(over * training_pairs / stats["pairs"])
    of_sample = (f" (from a sample of {stats['pairs']:,})" if training_pairs != stats["pairs"]
                 else "")
    action = "dropped" if config.length_policy == "drop" else "truncated"
    print(f"Training pairs: {training_pairs:,}; mean length {stats['mean_source_length']:.1f} "
          f"source / {stats['mean_target_length']:.1f} target tokens; "
          f"{'about ' if of_sample else ''}{over:,} over --max-length {config.max_length} "
          f"({action}){of_sample}.")
    return TrainingData(corpus, source_tokenizer, target_tokenizer, training_pairs, over,
                        vocabulary_seconds)


def _tokenizers(config, corpus, sample, workdir):
    """`(source, target, seconds)`: the run's saved tokenizers (`seconds`
    None), or new ones learned from `sample` (pairs of the training split)
    in `seconds` (saved by the caller)."""
    vocab_dir = os.path.join(workdir, "vocab")
    if os.path.exists(os.path.join(vocab_dir, "target.json")):
        return (*load_tokenizers(vocab_dir), None)
    print(f"Learning {config.tokenizer} vocabularies from {corpus!r} (at most "
          f"{config.vocabulary_sample:,} pairs, --vocabulary-sample) ...", flush=True)
    start = time.perf_counter()
    tokenizers = train_tokenizers(sample, config.vocabulary_size,
                                  shared=config.shared_vocabulary, lowercase=config.lowercase,
                                  algorithm=config.tokenizer)
    seconds = time.perf_counter() - start
    print(f"Learned {tokenizers[0].vocabulary_size} source and {tokenizers[1].vocabulary_size} "
          f"target tokens in {seconds:.1f} s.", flush=True)
    return (*tokenizers, seconds)


def _check_training_pairs(config, stats):
    """Raises ValueError when no training pair is left after the length policy
    (training would wait forever for its first batch)."""
    if stats["pairs"] == 0:
        raise ValueError("The training data has no sentence pairs.")
    if config.length_policy == "drop" and stats["over_max_length"] == stats["pairs"]:
        raise ValueError(
            f"No training pairs left: all {stats['pairs']} were dropped because they are "
            f"longer than --max-length {config.max_length} tokens (the longest has "
            f"{max(stats['max_source_length'], stats['max_target_length'])}). Raise "
            "--max-length, or keep them shortened with --length-policy truncate."
        )
