#!/usr/bin/env python3
"""Translates text files of any size with Apache Beam's RunInference: on this
machine (DirectRunner) or on Dataflow, Flink or Spark, unchanged.

Each line of each input file is one sentence (blank lines stay blank, as
`python -m keras_attention translate` treats them). The lines are read with
their line numbers, spread over the workers, batched by Beam and translated
by `TranslatorModelHandler` (each worker loads the model once), and written
as shards of TSV records

    line_number<TAB>source<TAB>translation

with line numbers from 0 within each input file, so that the order can be
restored and a rerun deduplicated. TABs and line breaks inside a field
become spaces; with --n-best and --scores the translation field is what
`translate_file` writes on that line (`score<TAB>text`, joined by TABs).
One input file writes PREFIX-SSSSS-of-NNNNN.tsv; several write
PREFIX.<file name>-SSSSS-of-NNNNN.tsv each. `--output-format text` also
writes each file's translations in input order, PREFIX.txt (or
PREFIX.<file name>.txt): byte for byte what `translate_file` writes,
after checking that no line is missing or doubled.

Examples:
  python recipes/translation/beam_translate.py --input news.en --output out/news \\
      --preset tatoeba_en_es --direct_num_workers 2 --direct_running_mode multi_processing
  python recipes/translation/beam_translate.py --input 'gs://bucket/corpus/*.en' \\
      --output gs://bucket/out/corpus --preset gs://bucket/presets/en_es \\
      --runner DataflowRunner --project P --region us-central1 \\
      --temp_location gs://bucket/tmp --requirements_file requirements.txt

Beam's own pipeline options (--runner, --direct_num_workers, --project, ...)
pass through to Beam (docs/scaling.md). Needs the [beam] extra.
"""

import argparse
import logging
import os
import sys
import tempfile

if not __package__:  # run as a file, not with `python -m recipes.translation.beam_translate`
    import _repo_root  # noqa: F401  (puts the repository root on sys.path)

from recipes.translation.config import positive_int  # noqa: E402
from recipes.translation.decoding_flags import (  # noqa: E402
    add_decoding_flags,
    decoding_overrides,
)

OUTPUT_FORMATS = ("tsv", "text")
_BUCKET_LINES = 100_000  # lines sorted in memory at a time when writing the ordered text


def _parser():
    parser = argparse.ArgumentParser(
        prog="beam_translate.py", description=__doc__.split("\n\n")[0],
        epilog="Beam's pipeline options (e.g. --runner DataflowRunner, --direct_num_workers 2 "
               "--direct_running_mode multi_processing) are passed to Beam.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--input", required=True, metavar="PATTERN",
                        help="the text file(s) to translate: a path or a glob, local or on "
                             "any file system Beam reads (gs://, s3://, hdfs://)")
    parser.add_argument("--output", required=True, metavar="PREFIX",
                        help="where the shards go: PREFIX-SSSSS-of-NNNNN.tsv")
    parser.add_argument("--preset", required=True,
                        help="a shipped preset's name, a preset or run folder every worker can "
                             "read, or an hf:// handle (Translator.from_preset)")
    parser.add_argument("--dtype", default=None,
                        choices=("float32", "mixed_bfloat16", "mixed_float16"),
                        help="compute dtype (default: the preset's rule)")
    parser.add_argument("--output-format", choices=OUTPUT_FORMATS, default="tsv",
                        help="tsv: the record shards; text: also each file's translations in "
                             "input order (PREFIX.txt), as translate_file writes them")
    parser.add_argument("--n-best", type=positive_int, default=None, metavar="N",
                        help="the N best translations of each line, joined by TAB")
    parser.add_argument("--scores", action="store_true",
                        help="each translation preceded by its score and a TAB")
    parser.add_argument("--column", type=int, default=None, metavar="K",
                        help="the lines are TSV and column K (from 0) is the sentence")
    parser.add_argument("--errors", choices=("strict", "replace"), default="strict",
                        help="a line that is not UTF-8: an error naming it, or its bad bytes "
                             "as U+FFFD")
    parser.add_argument("--batch-size", type=positive_int, default=64,
                        help="sentences decoded together")
    parser.add_argument("--max-batch-size", type=positive_int, default=None,
                        help="sentences Beam hands to one translate call (default: 4 x "
                             "--batch-size)")
    parser.add_argument("--large-model", action="store_true",
                        help="one copy of the model per machine, shared by its processes")
    add_decoding_flags(parser, default="the preset's")
    return parser


def main(argv=None):
    parser = _parser()
    args, beam_args = parser.parse_known_args(argv)
    decoding = decoding_overrides(parser, args)
    if args.column is not None and args.column < 0:
        parser.error(f"--column must be an integer >= 0; received {args.column}.")
    from recipes._startup import import_tensorflow

    import_tensorflow()  # quietly, here and (the environment) in the local workers
    os.environ.setdefault("KERAS_ATTENTION_QUIET_STARTUP", "1")
    if not any(a.startswith("--default_sdk_harness_log_level") for a in beam_args):
        beam_args = [*beam_args, "--default_sdk_harness_log_level=ERROR"]
    root = logging.getLogger()
    level, _ = root.level, root.setLevel(logging.ERROR)  # Beam's warnings as it imports
    try:
        import apache_beam as beam  # noqa: F401
    except ImportError:
        parser.exit(1, "beam_translate.py needs Apache Beam: pip install "
                       "\"keras-attention[beam]\".\n")
    finally:
        root.setLevel(level)
    from apache_beam.io.filesystems import FileSystems

    paths = sorted(m.path for m in FileSystems.match([args.input])[0].metadata_list)
    if not paths:
        parser.exit(1, f"beam_translate.py: error: no file matches --input {args.input!r}.\n")
    prefixes = output_prefixes(args.output, paths)
    from keras_attention.translation.run_inference import TranslatorModelHandler

    handler = TranslatorModelHandler(
        args.preset, dtype=args.dtype, num_return_sequences=args.n_best,
        return_scores=args.scores, batch_size=args.batch_size,
        max_batch_size=args.max_batch_size, large_model=args.large_model, **decoding)
    result = run(paths, prefixes, handler, beam_args, column=args.column, errors=args.errors)
    counts = counters(result)
    print(f"Wrote {', '.join(p + '-*.tsv' for p in prefixes)}: {counts['sentences']} "
          f"sentences translated, the model loaded {counts['model_loads']} times (once "
          "per worker process).", file=sys.stderr)
    if args.output_format == "text":
        for path, prefix in zip(paths, prefixes):
            lines = write_ordered_text(prefix + "-*-of-*.tsv", prefix + ".txt",
                                       count_lines(path))
            print(f"Wrote {prefix}.txt: {lines} lines in input order.", file=sys.stderr)
    return 0


def output_prefixes(output, paths):
    """One output prefix per input file: `output` for one file,
    `output.<file name>` for each of several (names must then differ)."""
    if len(paths) == 1:
        return [output]
    names = [os.path.basename(p) for p in paths]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:
        raise ValueError(f"Several input files are named {doubled[0]!r}; their outputs "
                         f"(PREFIX.<file name>) would collide: give a pattern of one folder.")
    return [f"{output}.{name}" for name in names]


def run(paths, prefixes, handler, beam_args, column=None, errors="strict"):
    """Builds and runs the pipeline (Beam's options from `beam_args`);
    returns Beam's `PipelineResult` when it is done."""
    import apache_beam as beam
    from apache_beam.ml.inference.base import KeyedModelHandler, RunInference
    from apache_beam.options.pipeline_options import PipelineOptions

    from keras_attention.translation.files import clean_field, output_line

    options = PipelineOptions(beam_args)
    pipeline = beam.Pipeline(options=options)
    lines = (pipeline
             | "Files" >> beam.Create(list(enumerate(paths)))
             | "Read numbered lines" >> beam.FlatMap(read_numbered_lines, column, errors)
             | "Spread over workers" >> beam.Reshuffle())
    blank, text = lines | "Blank or not" >> beam.Partition(
        lambda record, _: 0 if record[1] is None else 1, 2)
    translated = (text
                  | "Translate" >> RunInference(KeyedModelHandler(handler))
                  | "Format" >> beam.MapTuple(
                      lambda key, result: (key, result.example, output_line(
                          *(result.inference if handler.return_scores
                            else (result.inference, None))))))
    kept_blank = blank | "Blank stays blank" >> beam.MapTuple(lambda key, _: (key, "", ""))
    records = (translated, kept_blank) | "Join" >> beam.Flatten()
    by_file = records | "By file" >> beam.Partition(lambda record, n: record[0][0], len(paths))
    for index, (part, prefix) in enumerate(zip(by_file, prefixes)):
        (part
         | f"Record {index}" >> beam.MapTuple(
             lambda key, source, line: f"{key[1]}\t{clean_field(source)}\t{line}")
         | f"Write {index}" >> beam.io.WriteToText(prefix, file_name_suffix=".tsv"))
    result = pipeline.run()
    result.wait_until_finish()
    return result


def counters(result):
    """`{"sentences": n, "model_loads": n}` from RunInference's metrics of a
    finished pipeline's `result` (its `num_inferences` counter, and its
    model-load latency, recorded once per load), summed over the workers."""
    from apache_beam.metrics.metric import MetricsFilter

    from keras_attention.translation.run_inference import NAMESPACE

    metrics = result.metrics().query(MetricsFilter().with_namespace(NAMESPACE))
    return {
        "sentences": sum(c.committed for c in metrics["counters"]
                         if c.key.metric.name == "num_inferences"),
        "model_loads": sum(d.committed.count for d in metrics["distributions"]
                           if d.key.metric.name == "load_model_latency_milli_secs"),
    }


def read_numbered_lines(indexed_path, column=None, errors="strict"):
    """`((file index, line number), sentence or None for a blank line)` for
    each line of the file, by `translate_file`'s reading rules (UTF-8, a
    BOM dropped, "\\r\\n" as "\\n", a bad line an error naming it)."""
    from apache_beam.io.filesystems import CompressionTypes, FileSystems

    from keras_attention.translation.files import source_text

    index, path = indexed_path
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        line = 0
        while True:
            raw = f.readline()
            if not raw:
                break
            yield (index, line), source_text(raw, path, line, errors, column)
            line += 1


def write_ordered_text(pattern, output, lines):
    """Joins the record shards matching `pattern` into `output`: each line's
    translation field in line order (what `translate_file` writes), after
    checking that each of the input's `lines` lines appears exactly once.
    Sorts `_BUCKET_LINES` lines at a time (local temporary files), and
    writes `output` under a temporary name, renamed when complete."""
    from apache_beam.io.filesystems import FileSystems

    shards = sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)
    partial, written = output + ".partial", 0
    with tempfile.TemporaryDirectory() as scratch:
        buckets = {}
        try:
            for shard in shards:
                with FileSystems.open(shard) as f:
                    for raw in f:
                        bucket = int(raw.split(b"\t", 1)[0]) // _BUCKET_LINES
                        if bucket not in buckets:
                            buckets[bucket] = open(os.path.join(scratch, str(bucket)), "wb")
                        buckets[bucket].write(raw)
        finally:
            for f in buckets.values():
                f.close()
        try:
            with FileSystems.create(partial) as out:
                for bucket in sorted(buckets):
                    with open(os.path.join(scratch, str(bucket)), "rb") as f:
                        records = sorted((int(r.split(b"\t", 1)[0]), r) for r in f)
                    for number, record in records:
                        if number != written:
                            raise _lost(pattern, written if number > written else number,
                                        "missing" if number > written else "there twice")
                        out.write(record.split(b"\t", 2)[2])
                        written += 1
            if written != lines:
                raise _lost(pattern, written, "missing")
        except BaseException:
            FileSystems.delete([partial])
            raise
    if FileSystems.exists(output):
        FileSystems.delete([output])
    FileSystems.rename([partial], [output])
    return written


def count_lines(path):
    """The lines of `path` (a last line without "\\n" counts)."""
    from apache_beam.io.filesystems import CompressionTypes, FileSystems

    count = 0
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        for _ in iter(f.readline, b""):
            count += 1
    return count


def _lost(pattern, line, what):
    return ValueError(f"Line {line} is {what} in the records {pattern!r}; run the pipeline "
                      "again (its output is replaced).")


if __name__ == "__main__":
    sys.exit(main())
