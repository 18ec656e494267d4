"""Which weights a run ends with: the best checkpoints by validation BLEU
(kept while training, with early stopping and the plateau), or the last
ones, averaged when asked."""

import os

from keras_attention.training import (
    BestCheckpoints,
    average_checkpoints,
    list_checkpoints,
    load_weights_checked,
)
from recipes.translation.scoring import validation_scorer


def best_checkpoints_callback(config, workdir, corpus, translator, step_fn, chief, verbose,
                              learning_rate_factor):
    """The `BestCheckpoints` callback that scores each epoch's weights on the
    validation sentences and keeps the best under `checkpoints/best/`."""
    keep = config.average_checkpoints if config.select_checkpoints == "best" else 1
    return BestCheckpoints(
        validation_scorer(config, corpus, translator),
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


def select_checkpoints(config, workdir, model, best):
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
