#!/usr/bin/env python3
"""Build the presets the package ships (`keras_attention/presets/`), in two steps
around the training recipe:

  split    a parallel TSV -> train/validation/test TSVs where no test or
           validation pair shares a sentence, on either side, with a
           training pair (decontaminated: sentences are compared after
           Unicode NFC, case folding and whitespace collapsing), nor a test
           pair with a validation pair;
  decontaminate
           a split -> the same without the training and validation pairs
           that share a sentence with a public test set (the Tatoeba
           Challenge's), so that the public test set scores fairly;
  tune-decoding
           a run (or preset) -> BLEU and chrF on the validation pairs for
           each beam size and length penalty of a grid, and the cheapest
           setting within --tolerance BLEU of the best;
  package  a run of train.py -> a compact preset folder: the weights stored
           in float16, its decoding settings (those tune-decoding chose, or
           the run's), its metadata (test BLEU/chrF with the sacreBLEU
           signature, the training command) and a model card;
  public-test
           a preset -> its scores on a public test set, beside a published
           model's, in its metadata and model card;
  general-test
           a preset -> its scores on a general-domain test set (FLORES-200,
           NTREX-128: plain-text files), beside OPUS-MT's, in its metadata and
           its card's first section, which says what the preset is for
           (recipes/translation/general_test.py);
  calibrate-reliability
           a preset -> when it warns that a translation is unreliable,
           calibrated on its validation pairs, into its metadata
           (recipes/translation/reliability_calibration.py).

How the shipped en-es and es-en presets were made (the commands and curves:
benchmarks/results/*-zoo-*.json):

  python recipes/translation/zoo.py split spa-eng/spa.txt --output-dir zoo-data
  python recipes/translation/train.py --train-files zoo-data/train.tsv \\
      --validation-files zoo-data/validation.tsv --test-files zoo-data/test.tsv \\
      --source-lang en --target-lang es --time-budget 60 --workdir runs/en-es
  python recipes/translation/zoo.py tune-decoding runs/en-es \\
      --tsv zoo-data/validation.tsv --output runs/en-es/decoding.json
  python recipes/translation/zoo.py package runs/en-es --decoding runs/en-es/decoding.json \\
      --name tatoeba_en_es --output-dir keras_attention/presets
  python recipes/translation/zoo.py public-test tatoeba_en_es \\
      --tsv tatoeba-test-v2021-08-07.eng-spa.tsv --train-tsv zoo-data/train.tsv ...
  python recipes/translation/zoo.py general-test tatoeba_en_es \\
      --source flores200-devtest.eng --references flores200-devtest.spa ...
"""

import argparse
import json
import os
import platform
import shutil
import sys
import time

if not __package__:  # run as a file, not with `python -m recipes.translation.zoo`
    import _repo_root  # noqa: F401  (puts the repository root on sys.path)

from recipes.translation import general_test, reliability_calibration, zoo_split  # noqa: E402
from recipes.translation.model_card import (  # noqa: E402
    MODEL_CARD,
    PUBLIC_TEST_HEADING,
    decoding_choice,
    public_test_section,
    purpose_section,
    with_section,
)
from recipes.translation.zoo_split import (  # noqa: E402
    read_tsv_pairs,
    sentence_keys,
    without_shared_sentences,
    write_text,
)

# -- package -------------------------------------------------------------------------

WEIGHTS_FILE = "model.weights.h5"
LICENCE = ("Weights: CC-BY 2.0 FR, as their training data (Tatoeba sentences, by the "
           "Tatoeba contributors, https://tatoeba.org; English-Spanish pairs from "
           "manythings.org's Anki files). Code: the package's licence.")


def float16_weights(path):
    """Rewrites the Keras weights file `path` with every float32 array stored
    as float16 (half the bytes; loading casts them back to the variables'
    float32). A new file replaces the old one, whole."""
    import h5py
    import numpy as np

    tmp = path + ".float16"

    def copy(source, target):
        target.attrs.update(source.attrs)
        for name, item in source.items():
            if isinstance(item, h5py.Group):
                copy(item, target.create_group(name))
            else:
                data = item[()]
                if getattr(data, "dtype", None) == np.float32:
                    data = data.astype(np.float16)
                target.create_dataset(name, data=data)
                target[name].attrs.update(item.attrs)

    with h5py.File(path, "r") as source, h5py.File(tmp, "w") as target:
        copy(source, target)
    os.replace(tmp, path)


def folder_bytes(folder):
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(folder) for name in names)


def score(translator, pairs, batch_size=64):
    """Test BLEU and chrF (sacreBLEU, with signatures) of `translator` on
    `pairs`, and its decoding speed."""
    from keras_attention.evaluation import corpus_bleu, corpus_chrf

    sources, references = [p[0] for p in pairs], [p[1] for p in pairs]
    # (compiled before the clock starts; no reliability check in the timing)
    translator.translate(sources[:batch_size], verbose=0, check_reliability=False)
    start = time.perf_counter()
    result = translator.search(sources, batch_size=batch_size, verbose=0, check_reliability=False)
    seconds = time.perf_counter() - start
    bleu, chrf = corpus_bleu(result.texts, references), corpus_chrf(result.texts, references)
    return {"bleu": round(bleu.score, 2), "bleu_signature": bleu.signature,
            "chrf": round(chrf.score, 2), "chrf_signature": chrf.signature,
            "sentences": len(pairs), "seconds": round(seconds, 1),
            "sentences_per_second": round(len(pairs) / seconds, 1),
            "target_tokens_per_second": round(sum(len(i) for i in result.ids) / seconds, 1)}


def machine():
    """The processor, its vector instruction sets and cores, in words."""
    lines = []
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
    flags = next((line for line in lines if line.startswith("flags")), "")
    name = next((line.split(":", 1)[1].strip() for line in lines
                 if line.startswith("model name")), platform.processor() or platform.machine())
    isa = [i for i in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f" {i}" in flags]
    return f"{name} ({', '.join(isa) or 'no AVX2'}), {os.cpu_count()} cores"




def package_command(args):
    import keras

    from keras_attention.translation import Translator

    test = read_tsv_pairs(args.test_tsv, tuple(args.tsv_columns))
    output = os.path.join(args.output_dir, args.name)
    if os.path.exists(output) and not args.overwrite:
        raise FileExistsError(f"{output} exists; pass --overwrite to replace it.")
    if args.decoding and (args.beam_size, args.length_penalty) != (None, None):
        raise ValueError("give --decoding (tune-decoding's choice) or --beam-size and "
                         "--length-penalty, not both.")
    tuned = read_decoding_choice(args.decoding) if args.decoding else None
    settings = ({key: tuned["chosen"][key] for key in ("beam_size", "length_penalty")}
                if tuned else {key: value for key, value in (("beam_size", args.beam_size),
                               ("length_penalty", args.length_penalty)) if value is not None})
    keras.config.set_dtype_policy("float32")
    reference = Translator.from_preset(args.run_dir, dtype="float32")
    if settings:
        reference = reference.with_settings(**settings)
    staging = os.path.join(args.output_dir, f".{args.name}.packaging")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        reference.save_to_preset(staging)
        if args.weights == "float16":
            float16_weights(os.path.join(staging, WEIGHTS_FILE))
        print("Scoring the float32 weights ...", flush=True)
        float32_scores = score(reference, test)
        shipped = Translator.from_preset(staging, dtype="float32")
        print(f"Scoring the {args.weights} weights ...", flush=True)
        scores = score(shipped, test)
        rows = {}
        for policy in args.also_policies:
            print(f"Scoring the {args.weights} weights under {policy} ...", flush=True)
            rows[policy] = score(Translator.from_preset(staging, dtype=policy), test)
        config = shipped.model.get_config()
        zoo = {
            "description": args.description,
            "languages": [args.source, args.target],
            "parameters": shipped.model.count_params(),
            "weights": args.weights,
            "license": "CC-BY 2.0 FR",
            "licence_details": LICENCE,
            "test": {**scores, "test_set": args.test_set_description},
            "test_by_dtype_policy": rows,
            "test_with_float32_weights": float32_scores,
            "decoding": {"beam_size": shipped.beam_size, "length_penalty": shipped.length_penalty,
                         "tuned": tuned},
            "training_command": args.command,
            "training": args.training,
            "machine": machine(),
        }
        metadata_file = os.path.join(staging, "metadata.json")
        metadata = json.load(open(metadata_file, encoding="utf-8"))
        metadata["zoo"] = zoo
        with open(metadata_file, "w", encoding="utf-8") as f:
            json.dump(metadata, f, indent=2)
        example = args.example
        extra_rows = "".join(f"| {p} compute | {r['bleu']} | {r['chrf']} | "
                             f"{r['sentences_per_second']} |\n" for p, r in rows.items())
        card = MODEL_CARD.format(
            name=args.name, source=args.source, target=args.target,
            source_name=args.source_name, target_name=args.target_name,
            description=args.description, purpose=purpose_section(args.name, args.source,
                                                                  args.target), example=example,
            example_translation=shipped.translate([example], verbose=0)[0],
            layers=config["num_encoder_layers"], d_model=config["d_model"],
            heads=config["num_heads"], ff=config["intermediate_dim"],
            source_vocabulary=config["encoder_vocabulary_size"],
            target_vocabulary=config["decoder_vocabulary_size"],
            max_length=config["max_length"], parameters=zoo["parameters"],
            weights=args.weights, size_mb="{size_mb}", beam_size=shipped.beam_size,
            length_penalty=shipped.length_penalty,
            decoding_choice=decoding_choice(tuned, bool(settings)), train_pairs=args.train_pairs,
            validation_pairs=args.validation_pairs, test_pairs=len(test),
            training=args.training, command=args.command, machine=zoo["machine"],
            bleu=scores["bleu"], chrf=scores["chrf"], speed=scores["sentences_per_second"],
            extra_rows=extra_rows, bleu_signature=scores["bleu_signature"],
            chrf_signature=scores["chrf_signature"], bleu_float32=float32_scores["bleu"],
            bleu_delta=scores["bleu"] - float32_scores["bleu"], published=args.published)
        readme = os.path.join(staging, "README.md")
        with open(readme, "w", encoding="utf-8") as f:
            f.write(card)
        # The size, README included, goes into the metadata and the card last.
        size_mb = round(folder_bytes(staging) / 1e6, 1)
        zoo["size_mb"] = size_mb
        with open(metadata_file, "w", encoding="utf-8") as f:
            json.dump(metadata, f, indent=2)
        with open(readme, "w", encoding="utf-8") as f:
            f.write(card.replace("{size_mb}", str(size_mb)))
        if os.path.exists(output):
            shutil.rmtree(output)
        os.replace(staging, output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(json.dumps(zoo, indent=2))


# -- tune-decoding ---------------------------------------------------------------------

def cheapest_within(grid, tolerance):
    """The row of `grid` (beam_size, length_penalty, bleu, chrf) with the fewest
    beams among those within `tolerance` BLEU of the best, the highest BLEU
    (then chrF) among those: a wider beam is slower on every sentence, and a
    difference of a tenth of a point on a validation set is noise."""
    best = max(row["bleu"] for row in grid)
    close = [row for row in grid if row["bleu"] >= best - tolerance]
    return min(close, key=lambda row: (row["beam_size"], -row["bleu"], -row["chrf"]))


def tune_decoding_command(args):
    from keras_attention.presets import preset_path
    from keras_attention.translation import Translator

    if args.tolerance < 0:
        raise ValueError(f"--tolerance is {args.tolerance}; expected 0 or more BLEU.")
    pairs = read_tsv_pairs(args.tsv, tuple(args.columns))
    translator = Translator.from_preset(preset_path(args.preset), dtype="float32")
    grid = []
    for beam_size in args.beam_sizes:
        for length_penalty in args.length_penalties:
            row = score(translator.with_settings(beam_size=beam_size,
                                                 length_penalty=length_penalty), pairs)
            grid.append({"beam_size": beam_size, "length_penalty": length_penalty, **row})
            print(f"beam {beam_size}, length penalty {length_penalty}: BLEU {row['bleu']}, "
                  f"chrF {row['chrf']}, {row['sentences_per_second']} sentences/s", flush=True)
    chosen = cheapest_within(grid, args.tolerance)
    result = {"tsv": args.tsv, "columns": list(args.columns), "sentences": len(pairs),
              "tolerance": args.tolerance, "grid": grid,
              "best": max(grid, key=lambda row: row["bleu"]),
              "chosen": {key: chosen[key] for key in ("beam_size", "length_penalty", "bleu",
                                                      "chrf")}}
    if args.output:
        write_text(args.output, json.dumps(result, indent=2))
    print(json.dumps(result["chosen"]))


def read_decoding_choice(path):
    """`tune-decoding`'s --output, checked before `package` spends minutes."""
    with open(path, encoding="utf-8") as f:
        tuned = json.load(f)
    if not isinstance(tuned, dict) or not {"beam_size", "length_penalty"} <= set(
            tuned.get("chosen") or {}):
        raise ValueError(f"{path} has no chosen beam_size and length_penalty; expected the "
                         "--output of `zoo.py tune-decoding`.")
    return tuned


# -- public-test -----------------------------------------------------------------------

def public_test_command(args):
    from keras_attention.translation import Translator

    folder, metadata, card = general_test.read_preset_card(args.preset)
    pairs = read_tsv_pairs(args.tsv, tuple(args.columns))
    training = read_tsv_pairs(args.train_tsv, tuple(args.train_columns))
    clean = without_shared_sentences(pairs, sentence_keys(training))
    if not clean:
        raise ValueError(f"every pair of {args.tsv} shares a sentence with {args.train_tsv}; "
                         "expected test pairs the preset was not trained on.")
    print(f"Scoring {len(clean):,} of {len(pairs):,} pairs ({len(pairs) - len(clean):,} share "
          f"a sentence with the training pairs) ...", flush=True)
    scores = score(Translator.from_preset(folder, dtype="float32"), clean)
    entry = {**scores, "test_set": args.test_set, "pairs_in_file": len(pairs),
             "published": {"model": args.published_model, "bleu": args.published_bleu,
                           "chrf": args.published_chrf, "source": args.published_source}}
    zoo = metadata.setdefault("zoo", {})
    zoo["public_test"] = entry
    card = with_section(card, public_test_section(
        os.path.basename(os.path.normpath(folder)), entry, zoo.get("weights", "float32")),
        PUBLIC_TEST_HEADING)
    general_test.write_preset_card(folder, metadata, card)
    print(json.dumps(entry, indent=2))


def add_model_and_pairs(parser, metavar, model_help, tsv_help):
    """The model (`preset`) and the pairs (`--tsv`, `--columns`) a step scores."""
    parser.add_argument("preset", metavar=metavar, help=model_help)
    parser.add_argument("--tsv", required=True, help=tsv_help)
    parser.add_argument("--columns", type=int, nargs=2, default=(0, 1), metavar=("SRC", "TGT"),
                        help="source and target columns of --tsv")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="zoo.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    zoo_split.add_parsers(commands)
    package = commands.add_parser("package", help="a run of train.py -> a shipped preset",
                                  formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    package.add_argument("run_dir", metavar="RUN", help="the run directory of train.py")
    package.add_argument("--name", required=True, help="the preset's name (its folder)")
    package.add_argument("--output-dir", default="keras_attention/presets",
                         help="where the preset folder is written")
    package.add_argument("--overwrite", action="store_true", help="replace an existing preset")
    package.add_argument("--test-tsv", required=True, help="the held-out test pairs (TSV)")
    package.add_argument("--tsv-columns", type=int, nargs=2, default=(0, 1),
                         metavar=("SRC", "TGT"), help="source and target columns of --test-tsv")
    package.add_argument("--weights", choices=("float16", "float32"), default="float16",
                         help="how the weights are stored")
    package.add_argument("--also-policies", nargs="*", default=["mixed_bfloat16"],
                         help="dtype policies scored besides float32")
    package.add_argument("--source", required=True, help="source language code (en)")
    package.add_argument("--target", required=True, help="target language code (es)")
    package.add_argument("--source-name", required=True, help="source language (English)")
    package.add_argument("--target-name", required=True, help="target language (Spanish)")
    package.add_argument("--description", required=True, help="one sentence for the card")
    package.add_argument("--example", required=True, help="a sentence the card translates")
    package.add_argument("--command", required=True, help="the train.py command, as run")
    package.add_argument("--training", required=True,
                         help="how it trained: machine, minutes, steps, validation BLEU")
    package.add_argument("--train-pairs", type=int, required=True, help="training pairs")
    package.add_argument("--validation-pairs", type=int, required=True,
                         help="validation pairs")
    package.add_argument("--published", default="",
                         help="a published figure to set beside this one, for scale (the card "
                         "says whether it was measured on the same test set)")
    package.add_argument("--test-set-description", required=True,
                         help="what the test set is, for the metadata")
    package.add_argument("--decoding", metavar="FILE",
                         help="ship the beam size and length penalty that `zoo.py "
                         "tune-decoding` chose (its --output); the grid goes into the metadata")
    package.add_argument("--beam-size", type=int, help="ship this beam size (default: the run's)")
    package.add_argument("--length-penalty", type=float,
                         help="ship this length penalty (default: the run's)")
    package.set_defaults(run=package_command)
    tune = commands.add_parser(
        "tune-decoding", help="BLEU on validation pairs for a grid of beam sizes and length "
        "penalties", description="Translates validation pairs (never the test pairs: the "
        "choice is part of the model) with each beam size and length penalty of a grid, prints "
        "BLEU, chrF and speed, and chooses the fewest beams within --tolerance BLEU of the "
        "best; `zoo.py package --decoding FILE` ships that choice.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_model_and_pairs(tune, "RUN", "a run directory of train.py, or a preset",
                        "the validation pairs (TSV)")
    tune.add_argument("--beam-sizes", type=int, nargs="+", default=[4, 6, 8],
                      help="beam sizes to try")
    tune.add_argument("--length-penalties", type=float, nargs="+",
                      default=[0.6, 1.0, 1.3, 1.6, 2.0], help="GNMT length penalties to try")
    tune.add_argument("--tolerance", type=float, default=0.1,
                      help="BLEU below the best that a setting with fewer beams may give up")
    tune.add_argument("--output", help="a JSON file for the grid and the choice (for "
                      "`package --decoding`)")
    tune.set_defaults(run=tune_decoding_command)
    public = commands.add_parser(
        "public-test", help="score a preset on a public test set, beside a published figure",
        description="Scores a preset on a public test set (only its pairs that share no "
        "sentence with the preset's training pairs) and writes the scores, beside a published "
        "model's, into the preset's metadata (`zoo.public_test`) and model card.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_model_and_pairs(public, "PRESET", "a shipped preset's name or a folder",
                        "the public test pairs (TSV)")
    public.add_argument("--train-tsv", required=True, help="the preset's training pairs (TSV)")
    public.add_argument("--train-columns", type=int, nargs=2, default=(0, 1),
                        metavar=("A", "B"), help="sentence columns of --train-tsv")
    public.add_argument("--test-set", required=True,
                        help="the test set's name and version, for the card")
    general_test.add_published_arguments(public)
    public.set_defaults(run=public_test_command)
    general_test.add_parser(commands, argparse.ArgumentDefaultsHelpFormatter)
    reliability_calibration.add_parser(commands, argparse.ArgumentDefaultsHelpFormatter)
    args = parser.parse_args(argv)
    args.run(args)


if __name__ == "__main__":
    sys.exit(main())
