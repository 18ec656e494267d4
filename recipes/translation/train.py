#!/usr/bin/env python3
"""Train a Transformer translator, score it with sacreBLEU, and write a run directory.

With no arguments it trains a 2+2-layer model on the bundled English ->
Spanish corpus (`keras_attention_en_es`, built locally by TFDS on first use)
for 400 steps, about 2 minutes of training on a 2-core CPU with AVX-512 BF16
and about 6 on a 2-core AVX2-only one (measured: 1.8 minutes on an Intel
Xeon, 5.7 on an AMD EPYC of the first Zen generation), then translates its
test split with beam search.

With --train-files alone it trains on your own parallel text with the
`own_corpus` defaults: validation and test split off the file (grouped by
source sentence) unless you give --validation-files/--test-files, validation
BLEU at each epoch end, early stopping, and the best checkpoints averaged.

Examples:
  python recipes/translation/train.py                       # the bundled corpus
  python recipes/translation/train.py --train-files spa.txt --time-budget 60 \\
      --source-lang en --target-lang es --workdir runs/spa   # Tatoeba's TSV, one hour
  python recipes/translation/train.py --train-files train.en train.es \\
      --validation-files dev.en dev.es --test-files test.en test.es --workdir runs/mine
  python recipes/translation/train.py --preset ted_hrlr_pt_en --workdir runs/pt_en
  TF_CONFIG=... python recipes/translation/train.py --strategy multi_worker ...
  KERAS_BACKEND=jax python recipes/translation/train.py --strategy data_parallel \\
      --coordinator-address 10.0.0.1:1234 --num-processes 2 --process-id 0 ...

Started again with the same flags and --workdir, a run resumes from its
latest backup (it is saved every --backup-every-steps steps and on SIGTERM).
"""

import argparse
import logging
import os

if not __package__:  # run as a file, not with `python -m recipes.translation.train`
    import _repo_root  # noqa: F401  (puts the repository root on sys.path)

from recipes.translation.config import add_config_flags, config_from_args  # noqa: E402

DEFAULT_WORKDIR = os.path.join("runs", "translation")


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="train.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workdir", default=DEFAULT_WORKDIR,
                        help=f"run directory (default: {DEFAULT_WORKDIR})")
    parser.add_argument("--quiet", action="store_true", help="no progress bars or summary")
    parser.add_argument("--no-export", dest="export", action="store_false",
                        help="leave out the SavedModel (export/) and the attention heatmaps "
                             "(attention/); export.py and visualize.py make them later")
    processes = parser.add_argument_group(
        "processes (KERAS_BACKEND=jax, --strategy data_parallel|model_parallel; see "
        "docs/scaling.md)")
    processes.add_argument("--num-processes", metavar="N|auto",
                           help="train on N processes (jax.distributed), each started with "
                                "the same flags and its own --process-id; 'auto': as the "
                                "environment says (TPU pods, SLURM, KERAS_DISTRIBUTION_*)")
    processes.add_argument("--coordinator-address", metavar="HOST:PORT",
                           help="process 0's address, where the processes meet")
    processes.add_argument("--process-id", type=int, metavar="I",
                           help="this process's index in [0, N); process 0 writes the run")
    add_config_flags(parser)
    args = parser.parse_args(argv)
    config = config_from_args(args)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    logging.getLogger("keras_attention").setLevel(logging.INFO)

    from recipes._startup import import_tensorflow

    import_tensorflow()  # first: it hides the CUDA start-up noise of CPU-only machines
    from recipes.translation.train_lib import train_and_evaluate

    try:
        _join_processes(args)
        train_and_evaluate(config, args.workdir, verbose=0 if args.quiet else 1,
                           export=args.export)
    except (ValueError, OSError, RuntimeError) as e:  # OSError: e.g. a full disk, naming its path
        parser.exit(2, f"error: {e}\n")


def _join_processes(args):
    """Joins the run's other processes (`jax_distribution.initialize`) before
    anything runs on JAX, when --num-processes is given."""
    given = (args.coordinator_address, args.process_id)
    if args.num_processes is None:
        if any(v is not None for v in given):
            raise ValueError("--coordinator-address and --process-id go with --num-processes.")
        return
    from keras_attention.training import jax_distribution

    if args.num_processes == "auto":
        if any(v is not None for v in given):
            raise ValueError("--num-processes auto reads the coordinator and this process's "
                             "index from the environment: leave out --coordinator-address "
                             "and --process-id.")
        jax_distribution.initialize()
        return
    try:
        count = int(args.num_processes)
    except ValueError:
        raise ValueError(f"--num-processes must be a whole number or 'auto'; received "
                         f"{args.num_processes!r}.") from None
    if None in given:
        raise ValueError("--num-processes N needs --coordinator-address HOST:PORT and "
                         "--process-id I.")
    jax_distribution.initialize(args.coordinator_address, count, args.process_id)


if __name__ == "__main__":
    main()
