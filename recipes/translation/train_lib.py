"""The translation recipe as library functions: `train_and_evaluate(config, workdir)`
and `evaluate_run(workdir, ...)`. The scripts next to this file only parse flags.

A run directory holds:

    config.json          the resolved config (a restarted run must match it)
    vocab/               source/target WordPiece vocabularies (*.vocab.txt, *.json)
    backup/              the resumable backup (model, optimizer, step)
    checkpoints/         ckpt-<step>.weights.h5 at each epoch end (last N kept)
    tensorboard/         TensorBoard logs
    model.keras          the final model (averaged if --average-checkpoints > 1)
    preset/              the same as a Translator preset (`Translator.from_preset`)
    export/<version>/    the SavedModel for TF Serving (strings in, translations out)
    attention/*.png      cross-attention heatmaps of a few test sentences
    hypotheses.<split>.txt, metrics.json
    .lock                while a command writes the run: who (`run_lock`)
"""

import contextlib
import dataclasses
import json
import os
import re
import time

import keras

from keras_attention._io import atomic_write_text, directory_lock, read_json
from keras_attention.data import (
    RESERVED_TOKENS,
    TextFilesCorpus,
    TfdsCorpus,
    length_statistics,
    load_shard,
    load_tokenizers,
    make_batches,
    pair_count,
    sample_pairs,
    save_tokenizers,
    train_tokenizers,
)
from keras_attention.evaluation import corpus_bleu, corpus_chrf
from keras_attention.models import Transformer
from keras_attention.training import (
    BestCheckpoints,
    PlateauFactor,
    TimeBudget,
    Trainer,
    TransformerSchedule,
    average_checkpoints,
    is_chief,
    list_checkpoints,
    load_weights_checked,
    make_strategy,
    resolve_jit_compile,
    resolve_precision,
)
from keras_attention.translation import Translator
from keras_attention.visualization import save_attention_heatmaps
from recipes.translation import corpus_rule
from recipes.translation.config import check_config, decoding_settings, load_config


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


def _apply_corpus_rule(config, corpus, workdir=None):
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


def _check_workdir_path(workdir):
    """A workdir that is a directory this process may write in, or can be created."""
    existing = os.path.abspath(workdir)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        where = "" if existing == os.path.abspath(workdir) else f" ({existing} is in its path)"
        raise ValueError(f"--workdir {workdir}: {existing} is a file, not a directory{where}; "
                         "choose another --workdir.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--workdir {workdir}: cannot write in {existing} (permission "
                         "denied); choose a --workdir you can write to.")


def _check_model_settings(config):
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


def _check_workdir(config, workdir):
    """A new run directory, or one holding the same config (a resumed run)."""
    path = os.path.join(workdir, "config.json")
    if not os.path.exists(path):
        return False
    # XLA on or off (training step, decoding) changes the speed (and which
    # generator draws the dropout masks), not the run: a run may resume with
    # either, e.g. one written before --jit-compile's default became None (auto).
    previous = dataclasses.replace(load_config(path), jit_compile=config.jit_compile,
                                   decode_jit_compile=config.decode_jit_compile)
    if previous != config:
        changed = [
            f"{f.name}: {getattr(previous, f.name)!r} -> {getattr(config, f.name)!r}"
            for f in dataclasses.fields(config)
            if getattr(previous, f.name) != getattr(config, f.name)
        ]
        raise ValueError(
            f"{workdir} holds a run with another config ({'; '.join(changed)}). "
            "Resume it with the same flags, or choose another --workdir."
        )
    return True


def build_model(config, source_vocabulary_size, target_vocabulary_size):
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


def _write_json(path, value):
    atomic_write_text(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


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


def _validation_scorer(config, corpus, translator):
    """`score_fn()` -> validation BLEU and chrF of the `translator`'s greedy
    translations of the first `validation_bleu_sentences` validation pairs."""
    pairs = list(corpus.load("validation").take(config.validation_bleu_sentences)
                 .as_numpy_iterator())
    sources = [s.decode("utf-8") for s, _ in pairs]
    references = [t.decode("utf-8") for _, t in pairs]

    def score_fn():
        hypotheses = translator.translate(sources, beam_size=1,
                                          batch_size=config.eval_batch_size, verbose=0)
        return {"bleu": corpus_bleu(hypotheses, references).score,
                "chrf": corpus_chrf(hypotheses, references).score}

    return score_fn


def _best_checkpoints_callback(config, workdir, corpus, translator, step_fn, chief, verbose,
                               learning_rate_factor):
    keep = config.average_checkpoints if config.select_checkpoints == "best" else 1
    return BestCheckpoints(
        _validation_scorer(config, corpus, translator),
        os.path.join(workdir, "checkpoints", "best"), step_fn, monitor="bleu", keep=keep,
        patience=config.early_stopping_patience, plateau_patience=config.plateau_patience,
        plateau_decay=config.plateau_decay, learning_rate_factor=learning_rate_factor,
        # An epoch cut short (by the time budget, or a --steps that is no
        # multiple of --steps-per-epoch) under a quarter of --steps-per-epoch
        # after the last validation is not validated: its weights are nearly
        # the last epoch's, and both among the best would count twice.
        min_steps=max(1, config.steps_per_epoch // 4),
        # Every worker scores (they agree, and stop alike); the chief writes.
        verbose=verbose, write=chief,
    )


def _select_checkpoints(config, workdir, model, best):
    """Loads the final weights into `model`: the best checkpoint by validation
    BLEU (or the average of the best N, when that scores higher on the
    validation sentences), or the average of the last N. Returns what was
    chosen, for metrics.json."""
    if config.select_checkpoints == "best" and best is not None and best.best_paths():
        ranked = best.best()
        paths = best.best_paths(config.average_checkpoints)
        load_weights_checked(model, paths[0])
        chosen = {"selected_checkpoints": [os.path.basename(paths[0])],
                  "validation_bleu": round(ranked[0]["bleu"], 2),
                  "validation_chrf": round(ranked[0].get("chrf", float("nan")), 2),
                  "best_step": ranked[0]["step"]}
        if len(paths) > 1:
            average_checkpoints(model, paths)
            scores = best.score_fn()
            names = [os.path.basename(p) for p in paths]
            print(f"Average of the best {len(paths)} checkpoints {names}: validation BLEU "
                  f"{scores['bleu']:.2f} (best single: {ranked[0]['bleu']:.2f}).")
            if scores["bleu"] >= ranked[0]["bleu"]:
                chosen.update(selected_checkpoints=names, validation_bleu=round(scores["bleu"], 2),
                              validation_chrf=round(scores["chrf"], 2))
            else:
                load_weights_checked(model, paths[0])
        print(f"Final model: {' + '.join(chosen['selected_checkpoints'])} (validation BLEU "
              f"{chosen['validation_bleu']:.2f}).")
        return chosen
    if config.select_checkpoints == "best":
        reason = ("no validation split, or --validation-bleu-sentences 0" if best is None
                  else "no epoch ended before training stopped" if not best.history
                  else "no scored epoch has a finite BLEU (NaN: a diverged model?)")
        print(f"No validation BLEU ({reason}): --select-checkpoints best falls back to "
              "the last checkpoint" + (f"s (the last {config.average_checkpoints} averaged)."
                 if config.average_checkpoints > 1 else "."), flush=True)
    if config.average_checkpoints > 1:
        paths = list_checkpoints(os.path.join(workdir, "checkpoints"))[-config.average_checkpoints:]
        print(f"Averaging {len(paths)} checkpoints: {[os.path.basename(p) for p in paths]}")
        average_checkpoints(model, paths)
        return {"selected_checkpoints": [os.path.basename(p) for p in paths]}
    return {"selected_checkpoints": ["last"]}


class _FirstStep(keras.callbacks.Callback):
    """Records when the first training step of this call ended."""

    at = None

    def on_train_batch_end(self, batch, logs=None):
        if self.at is None:
            self.at = time.perf_counter()


def _rounded(seconds):
    return None if seconds is None else round(seconds, 1)


def run_lock(workdir, command):
    """The lock a command holds on a run directory while it writes there
    (`directory_lock`): a second command on the same --workdir stops at once
    with a DirectoryInUseError naming the process that holds it."""
    return directory_lock(workdir, command, advice=(
        "Wait for it to end or stop it, or give this command another --workdir (or "
        "--output-dir / --export-dir outside the run)"))


def writes_inside(workdir, path):
    """Whether `path` is `workdir` or inside it (a command writing there
    takes `run_lock`)."""
    workdir, path = os.path.realpath(workdir), os.path.realpath(path)
    return os.path.commonpath([workdir, path]) == workdir


def train_and_evaluate(config, workdir, callbacks=None, verbose=1, export=True):
    """Trains a Transformer as `config` says, in `workdir`, then scores it.

    Started again with the same config and workdir, it resumes from the
    latest backup. Returns the metrics dict (also in `metrics.json`).
    `export=False` leaves out the SavedModel (`export/`) and the heatmaps
    (`attention/`), which `Translator.export` and `visualize` make later from
    the run directory (the tests' shared runs do, on demand).

    The process that writes the run (the chief) holds `run_lock` on
    `workdir` from its checks to its last file: a second command on the same
    workdir stops at once, naming it.
    """
    with contextlib.ExitStack() as lock:
        return _train_and_evaluate(config, workdir, callbacks, verbose, export, lock)


def _train_and_evaluate(config, workdir, callbacks, verbose, export, lock):
    # Everything is checked before anything is written: a refused command
    # leaves the workdir as it was, so the corrected one starts afresh.
    begin = time.perf_counter()
    check_config(config)
    _check_workdir_path(workdir)
    corpus = make_corpus(config)  # bad files stop the run before it writes anything
    config = _apply_corpus_rule(config, corpus, workdir)
    if config.early_stopping_patience is not None and "validation" not in corpus.splits:
        raise ValueError(f"--early-stopping-patience needs a validation split; the corpus has "
                         f"only {list(corpus.splits)}.")
    resumed = _check_workdir(config, workdir)
    finished = os.path.join(workdir, "metrics.json")
    if resumed and os.path.exists(finished):
        # The same command again on a finished run: its record stays as it is
        # (training again would write a 0-step record, a second export and
        # a new preset).
        metrics = read_json(finished, "the finished run's metrics")
        print(f"{workdir} holds a finished run ({metrics.get('steps')} steps; metrics.json): "
              "nothing to do. Score it again with recipes/translation/evaluate.py, export it "
              "with export.py, or train another run in a new --workdir.", flush=True)
        return metrics
    strategy = make_strategy(config.strategy, tpu=config.tpu)
    # After the strategy: building a model starts TensorFlow's runtime, which
    # MultiWorkerMirroredStrategy must configure first.
    _check_model_settings(config)
    keras.utils.set_random_seed(config.seed)
    precision = resolve_precision(config.precision, strategy)
    keras.config.set_dtype_policy(precision)
    jit_compile = resolve_jit_compile(config.jit_compile, precision, strategy)
    chief = is_chief(strategy)
    if chief:  # held until `lock` closes, after the run's last file
        lock.enter_context(run_lock(workdir, "train.py"))
    print(f"Run directory: {workdir} ({'resuming' if resumed else 'new'}); strategy "
          f"{type(strategy).__name__} with {strategy.num_replicas_in_sync} replica(s); "
          f"precision {precision}; XLA {'on' if jit_compile else 'off'}.", flush=True)
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
    if chief:
        os.makedirs(workdir, exist_ok=True)
        if not resumed:
            # Atomic: other workers may read it while the chief writes it.
            atomic_write_text(os.path.join(workdir, "config.json"), config.to_json())
        if vocabulary_seconds is not None:
            save_tokenizers(os.path.join(workdir, "vocab"), source_tokenizer, target_tokenizer)

    with strategy.scope():
        model = build_model(config, source_tokenizer.vocabulary_size,
                            target_tokenizer.vocabulary_size)
        optimizer, learning_rate_factor = build_optimizer(config, model.d_model, precision)
    if verbose:
        model.summary()
    # The one object that translates (validation BLEU, the final score, the
    # heatmaps) and is saved (preset/, export/).
    translator = Translator(model, source_tokenizer, target_tokenizer,
                            **decoding_settings(config), jit_compile=config.decode_jit_compile)

    def dataset_fn(input_context, seed_offset):
        # Each input pipeline (worker) reads its own shard: its share of the
        # files, or every N-th pair.
        pairs, sharded = load_shard(corpus, "train", input_context)
        return make_batches(
            pairs, source_tokenizer, target_tokenizer, max_length=config.max_length,
            length_policy=config.length_policy, batch_tokens=config.batch_tokens,
            bucket_boundaries=config.bucket_boundaries, shuffle_buffer=config.shuffle_buffer,
            seed=config.seed + seed_offset,
            deterministic=config.deterministic, repeat=True, input_context=input_context,
            shard=not sharded, pack=config.pack,
        )

    validation = None
    if "validation" in corpus.splits:
        validation = make_batches(
            corpus.load("validation"), source_tokenizer, target_tokenizer,
            max_length=config.max_length, batch_tokens=config.batch_tokens,
            bucket_boundaries=config.bucket_boundaries, training=False,
        )
    first_step = _FirstStep()
    callbacks = [first_step, *(callbacks or [])]
    if config.time_budget is not None:
        if strategy.extended._in_multi_worker_mode():
            raise ValueError("--time-budget cannot stop several workers at the same step; "
                             "use --steps with --strategy multi_worker.")
        callbacks.append(TimeBudget(config.time_budget, verbose=verbose))
    best = None
    if config.validation_bleu_sentences and "validation" in corpus.splits:
        best = _best_checkpoints_callback(config, workdir, corpus, translator,
                                          lambda: trainer.step.numpy(), chief, verbose,
                                          learning_rate_factor)
        callbacks.append(best)
    trainer = Trainer(
        model, optimizer, strategy, label_smoothing=config.label_smoothing,
        clip_norm=config.clip_norm, jit_compile=jit_compile,
        backup_dir=os.path.join(workdir, "backup"),
        backup_every_steps=config.backup_every_steps,
        checkpoint_dir=os.path.join(workdir, "checkpoints"),
        keep_checkpoints=config.keep_checkpoints,
        tensorboard_dir=os.path.join(workdir, "tensorboard"), callbacks=callbacks,
        verbose=verbose,
    )
    start = time.perf_counter()
    history = trainer.fit(dataset_fn, config.steps, config.steps_per_epoch, validation)
    wall = time.perf_counter() - start
    seconds = sum(history.history.get("seconds", []))
    tokens = sum(history.history.get("tokens", []))  # source + target, without padding

    selection = _select_checkpoints(config, workdir, model, best)
    metrics = {
        "steps": int(trainer.step.numpy()),
        "train_seconds": round(wall, 1),
        "train_tokens_per_second": round(tokens / seconds, 1) if seconds else None,
        "train_loss": history.history["loss"][-1] if history.history.get("loss") else None,
        "precision": precision,
        "strategy": type(strategy).__name__,
        "replicas": strategy.num_replicas_in_sync,
        "training_pairs": training_pairs,
        # Where the time before training went (None: nothing done in this call).
        "corpus_read_seconds": _rounded(getattr(corpus, "read_seconds", None)),
        "vocabulary_seconds": _rounded(vocabulary_seconds),
        "seconds_to_first_step": _rounded(first_step.at and first_step.at - begin),
        "training_pairs_over_max_length": over,
    }
    if history.history.get("val_accuracy"):
        metrics["validation_token_accuracy"] = history.history["val_accuracy"][-1]
    metrics.update(selection)
    metrics["stopped_by"] = (
        "time_budget" if any(isinstance(c, TimeBudget) and c.stopped for c in callbacks)
        else "early_stopping" if best is not None and best.stopped_early else "steps"
    )
    if not chief:
        return metrics
    model.save(os.path.join(workdir, "model.keras"))
    eval_split = next((s for s in (config.eval_split, "test", "validation") if s in corpus.splits),
                      None)
    if eval_split is None:
        print("No validation or test data: BLEU is not computed.")
    else:
        metrics.update(score(translator, corpus, config, workdir, split=eval_split,
                             verbose=verbose))
        print(f"\nBLEU on {eval_split}: {metrics['bleu']:.2f}  ({metrics['sacrebleu_signature']})"
              f"\nchrF on {eval_split}: {metrics['chrf']:.2f}  ({metrics['chrf_signature']})")
    translator.metadata = preset_metadata(config, metrics)
    metrics["preset"] = translator.save_to_preset(os.path.join(workdir, "preset"),
                                                  overwrite=True)
    export_path = translator.export(os.path.join(workdir, "export")) if export else None
    metrics["export"] = export_path
    if export and eval_split is not None and config.attention_plots:
        sentences = [s.decode("utf-8") for s, _ in
                     corpus.load(eval_split).take(config.attention_plots).as_numpy_iterator()]
        # Every layer, head by head, of the first sentence; the others' last
        # layer (each sentence's cross_attention.png has every layer's
        # average): 3 figures per extra layer in all, not per sentence.
        attention_dir = os.path.join(workdir, "attention")
        plots = visualize(translator, sentences[:1], attention_dir)
        plots += visualize(translator, sentences[1:], attention_dir,
                           layers=[model.num_decoder_layers])
        metrics["attention_plots"] = len(plots)
    _write_json(os.path.join(workdir, "metrics.json"), metrics)
    if export_path:
        print(f"SavedModel for TF Serving: {export_path}")
    saved_model = ", export/ (SavedModel)" if export_path else ""
    heatmaps = ("  attention/ (heatmaps; more with recipes/translation/visualize.py)\n"
                if metrics.get("attention_plots") else "")
    print(f"Outputs in {workdir}:\n"
          f"  config.json, metrics.json, hypotheses.<split>.txt\n"
          f"  model.keras and vocab/ (Keras model and vocabularies){saved_model}\n"
          f"  preset/ (Translator.from_preset({os.path.join(workdir, 'preset')!r}))\n"
          f"{heatmaps}"
          f"  checkpoints/ (per epoch), backup/ (resume), tensorboard/ "
          f"(tensorboard --logdir {os.path.join(workdir, 'tensorboard')})")
    print(next_steps(workdir))
    return metrics


def next_steps(workdir):
    """What to do with a finished run, printed at its end."""
    return (f"Next:\n"
            f"  translate in Python:  from keras_attention import Translator\n"
            f"                        translator = Translator.from_preset({workdir!r})\n"
            f"                        translator.translate([\"The red book is on the table.\"])\n"
            f"  look inside it:       python3 run.py playground --workdir {workdir}  "
            f"(a page at http://127.0.0.1:8000/)\n"
            f"  more:                 README.md; docs/decoding.md (the Translator), "
            f"docs/serving.md (export/), docs/playground.md")


def score(translator, corpus, config, workdir, split=None, sources=None, references=None,
          output_prefix=None, verbose=1):
    """Translates a split (or given sentences) with the `translator`'s
    decoding settings, writes the hypotheses and returns BLEU with its
    signature."""
    split = split or config.eval_split
    if sources is None:
        pairs = list(corpus.load(split).as_numpy_iterator())
        sources = [s.decode("utf-8") for s, _ in pairs]
        references = [t.decode("utf-8") for _, t in pairs]
    if config.max_eval_sentences:
        sources = sources[: config.max_eval_sentences]
        references = references[: config.max_eval_sentences]
    print(f"Translating {len(sources)} sentences (beam size {translator.beam_size}) ...",
          flush=True)
    start = time.perf_counter()
    hypotheses = translator.translate(sources, batch_size=config.eval_batch_size,
                                      verbose=verbose)
    seconds = time.perf_counter() - start
    prefix = output_prefix or os.path.join(workdir, f"hypotheses.{split}")
    atomic_write_text(prefix + ".txt", "".join(h + "\n" for h in hypotheses))
    bleu = corpus_bleu(hypotheses, references)
    chrf = corpus_chrf(hypotheses, references)
    exact = sum(h == r for h, r in zip(hypotheses, references)) / max(len(references), 1)
    return {
        "bleu": round(bleu.score, 2),
        "sacrebleu_signature": bleu.signature,
        "bleu_details": bleu.details,
        "chrf": round(chrf.score, 2),
        "chrf_signature": chrf.signature,
        "eval_split": split,
        "eval_sentences": len(sources),
        "exact_match": round(exact, 4),
        "decode_seconds": round(seconds, 1),
    }


def preset_metadata(config, metrics):
    """What a run's preset records in `metadata.json`: the training config
    and the scores."""
    keys = ("bleu", "sacrebleu_signature", "chrf", "chrf_signature", "eval_split",
            "eval_sentences", "exact_match", "steps", "validation_bleu")
    return {"training_config": dataclasses.asdict(config),
            **{k: metrics[k] for k in keys if k in metrics}}


def load_translator(workdir, checkpoint=None):
    """`(config, translator)` of a run directory: its final model through
    `Translator.from_preset`, or the weights of `checkpoint` (a
    `.weights.h5` file, or a list of them, averaged; the latest checkpoint
    when the run has no `model.keras` yet), with the run's tokenizers and
    decoding settings."""
    config_path = os.path.join(workdir, "config.json")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{workdir} is not a run directory: it has no config.json.")
    config = load_config(config_path)
    if checkpoint is None:
        if os.path.isfile(os.path.join(workdir, "model.keras")):
            return config, Translator.from_preset(workdir)
        checkpoints = list_checkpoints(os.path.join(workdir, "checkpoints"))
        if not checkpoints:
            raise FileNotFoundError(f"{workdir} has neither model.keras nor checkpoints/.")
        checkpoint = checkpoints[-1]
    paths = list(checkpoint) if isinstance(checkpoint, (list, tuple)) else [checkpoint]
    if not paths:
        raise ValueError("`checkpoint` is an empty list; give one or more .weights.h5 files.")
    source_tokenizer, target_tokenizer = load_tokenizers(os.path.join(workdir, "vocab"))
    model = build_model(config, source_tokenizer.vocabulary_size, target_tokenizer.vocabulary_size)
    if len(paths) == 1:
        load_weights_checked(model, paths[0])
    else:
        average_checkpoints(model, paths)
    return config, Translator(model, source_tokenizer, target_tokenizer,
                              **decoding_settings(config))


def load_run(workdir, checkpoint=None):
    """The config, tokenizers and model of a run directory (`load_translator`,
    unpacked); `checkpoint`: a `.weights.h5` file to load instead of the
    final `model.keras`."""
    config, translator = load_translator(workdir, checkpoint)
    return config, translator.source_tokenizer, translator.target_tokenizer, translator.model


def translator_from_files(workdir=None, model_path=None, vocab_dir=None, **settings):
    """The `Translator` of a run directory (`Translator.from_preset`), or of
    a `.keras` file and a vocab folder; `settings` override its decoding
    settings (None values are ignored)."""
    settings = {k: v for k, v in settings.items() if v is not None}
    if workdir is not None:
        return Translator.from_preset(workdir, **settings)
    if not os.path.isfile(model_path):
        raise FileNotFoundError(f"Model file {model_path!r} does not exist.")
    source_tokenizer, target_tokenizer = load_tokenizers(vocab_dir)
    return Translator(keras.saving.load_model(model_path), source_tokenizer, target_tokenizer,
                      **settings)


def heatmap_prefix(sentence, output_dir):
    """A file-name prefix made of the sentence's first words ("the_red_book_"),
    numbered ("the_red_book_2_") when `output_dir` holds heatmaps with it
    already: heatmaps are never overwritten."""
    stem = "_".join(re.findall(r"\w+", sentence.lower()))[:40].strip("_") or "sentence"
    prefix, number = f"{stem}_", 1
    # Every set of heatmaps has `<prefix>cross_attention.png`; no other
    # prefix can produce that name.
    while os.path.exists(os.path.join(output_dir, f"{prefix}cross_attention.png")):
        number += 1
        prefix = f"{stem}_{number}_"
    return prefix


def visualize(translator, sentences, output_dir, target=None, layers=None):
    """Attention heatmaps (PNG) for each sentence, translated with the
    `translator`'s settings (or teacher-forced on `target`), named after the
    sentence (`heatmap_prefix`), never overwriting files. Returns the paths
    written."""
    paths = []
    for sentence in sentences:
        maps = translator.attention(sentence, target)
        paths += save_attention_heatmaps(maps, output_dir, layers=layers,
                                         prefix=heatmap_prefix(sentence, output_dir))
    return paths


def write_html(translator, sentences, path, target=None):
    """The playground's views of each sentence as a self-contained HTML page
    (`keras_attention.playground.attention_html`): `path` for one sentence,
    `<stem>_1.html`, `<stem>_2.html`, ... for several. Returns the paths."""
    from keras_attention.playground import attention_html

    stem, ext = os.path.splitext(path)
    paths = [path] if len(sentences) == 1 else [
        f"{stem}_{i}{ext or '.html'}" for i in range(1, len(sentences) + 1)]
    pages = [attention_html(translator, s, target=target) for s in sentences]  # all, then write
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    for page_path, page in zip(paths, pages):
        atomic_write_text(page_path, page)
    return paths


def evaluate_run(workdir, checkpoint=None, split=None, source_file=None, reference_file=None,
                 output_dir=None, decoding=None, verbose=1):
    """Scores a run directory (or one of its checkpoints, or the average of
    a list of them) on a split or on given files; writes
    `<output_dir>/hypotheses.<name>.txt` and `<output_dir>/scores.<name>.json`.
    Returns the scores. `decoding`: the decoding settings that replace the
    run's (`Translator.with_settings`). Writing into the run directory (the
    default `output_dir`), it holds `run_lock` on it."""
    inside = writes_inside(workdir, output_dir or workdir)
    with run_lock(workdir, "evaluate.py") if inside else contextlib.nullcontext():
        return _evaluate_run(workdir, checkpoint, split, source_file, reference_file,
                             output_dir, decoding, verbose)


def _evaluate_run(workdir, checkpoint, split, source_file, reference_file, output_dir,
                  decoding, verbose):
    config, translator = load_translator(workdir, checkpoint)
    translator = translator.with_settings(**(decoding or {}))
    config = dataclasses.replace(config, **translator.get_config())
    output_dir = output_dir or workdir
    sources = references = corpus = None
    if source_file is not None:
        from keras_attention.data import read_text

        if reference_file is None:
            raise ValueError("--source-file needs --reference-file to compute BLEU.")
        text = read_text((source_file, reference_file))
        sources, references = list(text.sources), list(text.targets)
        name = os.path.basename(str(source_file))
    else:
        corpus = make_corpus(config)
        split = split or config.eval_split
        name = split
    os.makedirs(output_dir, exist_ok=True)
    result = score(translator, corpus, config, workdir, split=split, sources=sources,
                   references=references,
                   output_prefix=os.path.join(output_dir, f"hypotheses.{name}"), verbose=verbose)
    paths = checkpoint if isinstance(checkpoint, (list, tuple)) else [checkpoint]
    result["checkpoint"] = ("model.keras" if checkpoint is None else str(paths[0])
                            if len(paths) == 1 else [str(p) for p in paths])
    result["decoding"] = translator.get_config()
    scores_path = os.path.join(output_dir, f"scores.{name}.json")
    _write_json(scores_path, result)
    print(f"Wrote {os.path.join(output_dir, f'hypotheses.{name}.txt')} and {scores_path}",
          flush=True)
    return result
