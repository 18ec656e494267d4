"""The translation recipe as a library function: `train_and_evaluate(config,
workdir)`. The scripts next to this file only parse flags; the steps it
takes live next to it by concern: `corpora` (the corpus, tokenizers and
batches), `model_setup` (the model and optimizer), `checkpoint_selection`
(the final weights), `scoring`, `runs` (run directories: checks, the lock,
loading one, `evaluate_run`) and `attention_views` (heatmaps, HTML pages).

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
    .lock                while a command writes the run: who (`runs.run_lock`)
"""

import contextlib
import os
import time

import keras

from keras_attention._deprecation import moved_names
from keras_attention._io import atomic_write_text, read_json, write_json
from keras_attention.data import save_tokenizers
from keras_attention.training import (
    TimeBudget,
    Trainer,
    is_chief,
    jax_distribution,
    make_strategy,
    resolve_jit_compile,
    resolve_precision,
)
from keras_attention.translation import Translator
from recipes.translation import (
    attention_views,
    checkpoint_selection,
    corpora,
    model_setup,
    runs,
    scoring,
)
from recipes.translation.config_checks import check_config
from recipes.translation.decoding_flags import decoding_settings


def train_and_evaluate(config, workdir, callbacks=None, verbose=1, export=True):
    """Trains a Transformer as `config` says, in `workdir`, then scores it.

    Started again with the same config and workdir, it resumes from the
    latest backup. Returns the metrics dict (also in `metrics.json`).
    `export=False` leaves out the SavedModel (`export/`) and the heatmaps
    (`attention/`), which `Translator.export` and `visualize` make later from
    the run directory (the tests' shared runs do, on demand).

    On the JAX backend (`--strategy data_parallel|model_parallel`, or
    `auto` there) it trains with `JaxTrainer` under `keras.distribution`;
    a run of several processes joins them first
    (`jax_distribution.initialize`: train.py's --num-processes), and
    process 0 writes it.

    The process that writes the run (the chief) holds `run_lock` on
    `workdir` from its checks to its last file: a second command on the same
    workdir stops at once, naming it. Keras' global dtype policy is the
    caller's again when it returns (or raises).
    """
    begin = time.perf_counter()
    with contextlib.ExitStack() as lock:
        # The run sets Keras' global dtype policy to its precision; the
        # caller's comes back when it returns or raises.
        lock.callback(keras.config.set_dtype_policy, keras.config.dtype_policy())
        # Everything is checked before anything is written: a refused command
        # leaves the workdir as it was, so the corrected one starts afresh.
        # The strategy first: MultiWorkerMirroredStrategy must configure
        # TensorFlow's runtime before any op runs (reading a streamed corpus
        # in the checks runs some; building a model starts it).
        on_jax = _jax_strategy(config)
        strategy = (jax_distribution.distribution(on_jax, config.model_parallel)
                    if on_jax else make_strategy(config.strategy, tpu=config.tpu))
        config, corpus, resumed = _checked_start(config, workdir)
        if resumed and os.path.exists(os.path.join(workdir, "metrics.json")):
            return _finished_run(workdir)
        model_setup.check_model_settings(config)
        precision, jit_compile = _set_numerics(config, strategy, on_jax)
        chief = jax_distribution.process_index() == 0 if on_jax else is_chief(strategy)
        spread = _spread(strategy, on_jax)
        if on_jax and spread["processes"] > 1 and config.time_budget is not None:
            raise ValueError("--time-budget cannot stop several processes at the same step; "
                             "use --steps with several JAX processes.")
        if chief:  # held until `lock` closes, after the run's last file
            lock.enter_context(runs.run_lock(workdir, "train.py"))
        print(f"Run directory: {workdir} ({'resuming' if resumed else 'new'}); strategy "
              f"{spread['strategy']} with {spread['replicas']} replica(s)"
              f"{' over %d processes' % spread['processes'] if spread['processes'] > 1 else ''}"
              f"; precision {precision}; XLA {'on' if jit_compile else 'off'}.", flush=True)
        data = corpora.prepare_training_data(config, corpus, workdir)
        if chief:
            _write_run_start(config, workdir, resumed, data)
        translator, optimizer, learning_rate_factor, training_model = _build_translator(
            config, data, strategy, precision, verbose, on_jax)
        validation = data.validation_batches(config)
        callbacks, first_step, best = _callbacks(
            config, workdir, corpus, translator, lambda: trainer.step.numpy(), chief, verbose,
            learning_rate_factor, callbacks)
        trainer = _trainer(config, workdir, training_model, translator.model, optimizer,
                           strategy, jit_compile, learning_rate_factor, callbacks, verbose)
        batches = (data.training_batches(config, trainer.batch_multiple,
                                         one_shape=spread["processes"] > 1)
                   if on_jax else data.training_batches(config))
        start = time.perf_counter()
        history = trainer.fit(batches, config.steps, config.steps_per_epoch, validation)
        wall = time.perf_counter() - start
        selection = checkpoint_selection.select_checkpoints(config, workdir, translator.model,
                                                            best)
        metrics = {**_training_metrics(trainer, history, wall, spread, precision, data,
                                       first_step.at and first_step.at - begin),
                   **selection, "stopped_by": _stopped_by(callbacks, best)}
        if chief:
            # The SavedModel and heatmaps are TensorFlow's work: export.py and
            # visualize.py make them from the run under the TensorFlow backend.
            _save_and_score(config, workdir, corpus, translator, metrics,
                            export and not on_jax, verbose)
            if export and on_jax:
                print("SavedModel for TF Serving: make it under the TensorFlow backend with "
                      f"python recipes/translation/export.py --workdir {workdir}")
        return metrics


def _checked_start(config, workdir):
    """`(config, corpus, resumed)`: the config checked, with the corpus
    rule's settings for its corpus (read and checked now: bad files stop the
    run before it writes anything), and whether `workdir` holds this run
    already (a ValueError when it holds another)."""
    check_config(config)
    runs.check_workdir_path(workdir)
    corpus = corpora.make_corpus(config)
    config = corpora.apply_corpus_rule(config, corpus, workdir)
    corpora.check_splits(config, corpus)
    return config, corpus, runs.check_workdir(config, workdir)


def _jax_strategy(config):
    """The keras.distribution strategy of the run on the JAX backend (`auto`
    is `data_parallel` there), or None on TensorFlow's."""
    jax = keras.backend.backend() == "jax"
    if config.strategy in jax_distribution.STRATEGIES and not jax:
        raise ValueError(f"--strategy {config.strategy} is keras.distribution's, on the JAX "
                         f"backend; Keras uses {keras.backend.backend()!r}. Run with "
                         "KERAS_BACKEND=jax, or use a tf.distribute strategy (--strategy "
                         "mirrored, multi_worker, tpu).")
    if jax and config.strategy not in (*jax_distribution.STRATEGIES, "auto"):
        raise ValueError(f"--strategy {config.strategy} is tf.distribute's, on the TensorFlow "
                         "backend; Keras uses 'jax'. Use --strategy data_parallel or "
                         "model_parallel, or unset KERAS_BACKEND.")
    if not jax:
        return None
    return "data_parallel" if config.strategy == "auto" else config.strategy


def _finished_run(workdir):
    """The metrics of the finished run in `workdir`: the same command again
    leaves its record as it is (training again would write a 0-step record,
    a second export and a new preset)."""
    metrics = read_json(os.path.join(workdir, "metrics.json"), "the finished run's metrics")
    print(f"{workdir} holds a finished run ({metrics.get('steps')} steps; metrics.json): "
          "nothing to do. Score it again with recipes/translation/evaluate.py, export it "
          "with export.py, or train another run in a new --workdir.", flush=True)
    return metrics


def _set_numerics(config, strategy, on_jax):
    """`(precision, jit_compile)` of the run, after setting the seed and the
    dtype policy (JAX compiles every step with XLA)."""
    keras.utils.set_random_seed(config.seed)
    if on_jax:
        precision = jax_distribution.precision(config.precision)
        keras.config.set_dtype_policy(precision)
        return precision, True
    precision = resolve_precision(config.precision, strategy)
    keras.config.set_dtype_policy(precision)
    return precision, resolve_jit_compile(config.jit_compile, precision, strategy)


def _write_run_start(config, workdir, resumed, data):
    """The chief's first files: config.json (a new run) and vocab/ (new
    tokenizers)."""
    os.makedirs(workdir, exist_ok=True)
    if not resumed:
        # Atomic: other workers may read it while the chief writes it.
        atomic_write_text(os.path.join(workdir, "config.json"), config.to_json())
    if data.vocabulary_seconds is not None:
        save_tokenizers(os.path.join(workdir, "vocab"), data.source_tokenizer,
                        data.target_tokenizer)


def _build_translator(config, data, strategy, precision, verbose, on_jax):
    """`(translator, optimizer, learning_rate_factor, training_model)`: a new
    model, built in the strategy's scope, and the one object that translates
    (validation BLEU, the final score, the heatmaps) and is saved (preset/,
    export/): over the same model on tf.distribute, over a copy on this
    process's device on JAX (`JaxTrainer`'s host model)."""
    def build():
        return model_setup.build_model(config, data.source_tokenizer.vocabulary_size,
                                       data.target_tokenizer.vocabulary_size)

    with strategy.scope():
        model = build()
        optimizer, learning_rate_factor = model_setup.build_optimizer(config, model.d_model,
                                                                      precision)
    if verbose:
        model.summary()
    translator = Translator(build() if on_jax else model, data.source_tokenizer,
                            data.target_tokenizer, **decoding_settings(config),
                            jit_compile=config.decode_jit_compile)
    return translator, optimizer, learning_rate_factor, model


class _FirstStep(keras.callbacks.Callback):
    """Records when the first training step of this call ended."""

    at = None

    def on_train_batch_end(self, batch, logs=None):
        if self.at is None:
            self.at = time.perf_counter()


def _callbacks(config, workdir, corpus, translator, step_fn, chief, verbose,
               learning_rate_factor, extra):
    """`(callbacks, first_step, best)`: the run's callbacks around the
    caller's `extra` ones: when the first step ended, the time budget, and
    the best checkpoints by validation BLEU (`best`; None without it)."""
    first_step = _FirstStep()
    callbacks = [first_step, *(extra or [])]
    if config.time_budget is not None:  # refused with several workers (check_config)
        callbacks.append(TimeBudget(config.time_budget, verbose=verbose))
    best = None
    if config.validation_bleu_sentences and "validation" in corpus.splits:
        best = checkpoint_selection.best_checkpoints_callback(
            config, workdir, corpus, translator, step_fn, chief, verbose, learning_rate_factor)
        callbacks.append(best)
    return callbacks, first_step, best


def _trainer(config, workdir, model, host_model, optimizer, strategy, jit_compile,
             learning_rate_factor, callbacks, verbose):
    """The resumable training loop, writing backup/, checkpoints/ and
    tensorboard/ in `workdir`: `Trainer` on tf.distribute, `JaxTrainer` on
    keras.distribution."""
    loop = dict(
        label_smoothing=config.label_smoothing, clip_norm=config.clip_norm,
        backup_dir=os.path.join(workdir, "backup"),
        backup_every_steps=config.backup_every_steps,
        checkpoint_dir=os.path.join(workdir, "checkpoints"),
        keep_checkpoints=config.keep_checkpoints,
        tensorboard_dir=os.path.join(workdir, "tensorboard"), callbacks=callbacks,
        verbose=verbose)
    if model is not host_model:
        from keras_attention.training.jax_trainer import JaxTrainer

        return JaxTrainer(model, host_model, optimizer, strategy,
                          learning_rate_factor=learning_rate_factor, **loop)
    return Trainer(model, optimizer, strategy, jit_compile=jit_compile, **loop)


def _spread(strategy, on_jax):
    """How the run is spread: the strategy's name, its data-parallel
    replicas, its processes."""
    if on_jax:  # a keras.distribution
        return {"strategy": type(strategy).__name__,
                "replicas": jax_distribution.replicas(strategy),
                "processes": jax_distribution.process_count()}
    import tensorflow as tf

    processes = 1
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        spec = strategy.cluster_resolver.cluster_spec().as_dict()
        processes = len(spec.get("chief", [])) + len(spec.get("worker", []))
    return {"strategy": type(strategy).__name__, "replicas": strategy.num_replicas_in_sync,
            "processes": processes}


def _training_metrics(trainer, history, wall, spread, precision, data, first_step_seconds):
    """What metrics.json records of the training itself."""
    seconds = sum(history.history.get("seconds", []))
    tokens = sum(history.history.get("tokens", []))  # source + target, without padding
    metrics = {
        "steps": int(trainer.step.numpy()),
        "train_seconds": round(wall, 1),
        "train_tokens_per_second": round(tokens / seconds, 1) if seconds else None,
        "train_loss": history.history["loss"][-1] if history.history.get("loss") else None,
        "precision": precision,
        **spread,  # strategy, replicas, processes
        "training_pairs": data.pairs,
        # Where the time before training went (None: nothing done in this call).
        "corpus_read_seconds": _rounded(getattr(data.corpus, "read_seconds", None)),
        "vocabulary_seconds": _rounded(data.vocabulary_seconds),
        "seconds_to_first_step": _rounded(first_step_seconds),
        "training_pairs_over_max_length": data.over_max_length,
    }
    if history.history.get("val_accuracy"):
        metrics["validation_token_accuracy"] = history.history["val_accuracy"][-1]
    return metrics


def _rounded(seconds):
    return None if seconds is None else round(seconds, 1)


def _stopped_by(callbacks, best):
    """What ended the training: the time budget, early stopping or --steps."""
    if any(isinstance(c, TimeBudget) and c.stopped for c in callbacks):
        return "time_budget"
    return "early_stopping" if best is not None and best.stopped_early else "steps"


def _save_and_score(config, workdir, corpus, translator, metrics, export, verbose):
    """The chief's last files: model.keras, the final score on the test (or
    validation) split, preset/, with `export` export/ and attention/, and
    metrics.json (`metrics`, completed); then it prints what is where."""
    translator.model.save(os.path.join(workdir, "model.keras"))
    eval_split = next((s for s in (config.eval_split, "test", "validation") if s in corpus.splits),
                      None)
    if eval_split is None:
        print("No validation or test data: BLEU is not computed.")
    else:
        metrics.update(scoring.score(translator, corpus, config, workdir, split=eval_split,
                                     verbose=verbose))
        print(f"\nBLEU on {eval_split}: {metrics['bleu']:.2f}  ({metrics['sacrebleu_signature']})"
              f"\nchrF on {eval_split}: {metrics['chrf']:.2f}  ({metrics['chrf_signature']})")
    translator.metadata = scoring.preset_metadata(config, metrics)
    metrics["preset"] = translator.save_to_preset(os.path.join(workdir, "preset"),
                                                  overwrite=True)
    metrics["export"] = translator.export(os.path.join(workdir, "export")) if export else None
    if export and eval_split is not None and config.attention_plots:
        metrics["attention_plots"] = _attention_heatmaps(config, corpus, eval_split, translator,
                                                         workdir)
    write_json(os.path.join(workdir, "metrics.json"), metrics, sort_keys=True)
    _print_outputs(workdir, metrics)


def _attention_heatmaps(config, corpus, split, translator, workdir):
    """The heatmaps of the split's first --attention-plots sentences, in
    attention/; returns how many were written."""
    sentences = [s.decode("utf-8") for s, _ in
                 corpus.load(split).take(config.attention_plots).as_numpy_iterator()]
    # Every layer, head by head, of the first sentence; the others' last
    # layer (each sentence's cross_attention.png has every layer's
    # average): 3 figures per extra layer in all, not per sentence.
    attention_dir = os.path.join(workdir, "attention")
    plots = attention_views.visualize(translator, sentences[:1], attention_dir)
    plots += attention_views.visualize(translator, sentences[1:], attention_dir,
                                       layers=[translator.model.num_decoder_layers])
    return len(plots)


def _print_outputs(workdir, metrics):
    """Where the run's files are, and what to do next with them."""
    if metrics["export"]:
        print(f"SavedModel for TF Serving: {metrics['export']}")
    saved_model = ", export/ (SavedModel)" if metrics["export"] else ""
    heatmaps = ("  attention/ (heatmaps; more with recipes/translation/visualize.py)\n"
                if metrics.get("attention_plots") else "")
    print(f"Outputs in {workdir}:\n"
          f"  config.json, metrics.json, hypotheses.<split>.txt\n"
          f"  model.keras and vocab/ (Keras model and vocabularies){saved_model}\n"
          f"  preset/ (Translator.from_preset({os.path.join(workdir, 'preset')!r}))\n"
          f"{heatmaps}"
          f"  checkpoints/ (per epoch), backup/ (resume), tensorboard/ "
          f"(tensorboard --logdir {os.path.join(workdir, 'tensorboard')})")
    print(runs.next_steps(workdir))


# The public names this module held before they moved to the modules of
# their concern: still importable from here for one release, with a
# DeprecationWarning naming the new place.
_MOVED = {name: module for module, names in (
    (corpora, ("make_corpus",)),
    (model_setup, ("build_model", "build_optimizer")),
    (scoring, ("score", "preset_metadata")),
    (runs, ("evaluate_run", "load_run", "load_translator", "next_steps", "run_lock",
            "translator_from_files", "writes_inside")),
    (attention_views, ("heatmap_prefix", "visualize", "write_html")),
) for name in names}


__getattr__ = moved_names(__name__, _MOVED)
