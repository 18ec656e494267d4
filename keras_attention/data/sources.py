"""Where sentence pairs come from: a TFDS translation dataset (including the
bundled `keras_attention_en_es`) or the user's own text files.

Every source is a `ParallelCorpus` (the protocol below): `load(split)`
returns a `tf.data.Dataset` of scalar `(source, target)` string pairs for
`split` in "train", "validation" or "test".
"""

import dataclasses
import inspect
import math
import typing

import tensorflow as tf
import tensorflow_datasets as tfds

from keras_attention._validation import check_non_negative_int, check_positive_int
from keras_attention.data.bundled import KerasAttentionEnEs
from keras_attention.data.text_files import (
    HOLDOUT_MAX_PAIRS,
    IN_MEMORY_PAIRS,
    SAMPLE_PAIRS,
    STRIP_PATTERN,
    ParallelText,
    check_unchanged,
    group_key,
    grouped_split,
    read_text,
    resolve_files,
    scan_text,
    split_buckets,
)

SPLITS = ("train", "validation", "test")
# Lines a streamed split reads, strips and places per vectorized step.
_STREAM_BATCH = 1024


@typing.runtime_checkable
class ParallelCorpus(typing.Protocol):
    """What the recipes need from a source of sentence pairs (`TfdsCorpus`,
    `TextFilesCorpus` and `bundled_corpus()` provide it; so can your own).

    Attributes:
        name: the dataset's name, for logs and reports.
        source_language, target_language: the two sides' names.
        splits: the splits it has, a subset of `SPLITS`.
    """

    name: str
    source_language: str
    target_language: str

    @property
    def splits(self) -> tuple: ...

    def load(self, split: str) -> tf.data.Dataset:
        """The `(source, target)` scalar string pairs of `split`; a
        ValueError naming the available splits for any other. It may take
        `input_context` (a `tf.distribute.InputContext`) and return only
        that input pipeline's shard (`load_shard`)."""
        ...


def load_shard(corpus, split, input_context):
    """`(pairs, sharded)`: the pairs of `split` that the input pipeline of
    `input_context` reads, by `corpus.load(split, input_context=...)` where
    the corpus shards itself (`TextFilesCorpus` by file when a split has
    enough files), else the whole split (`sharded` False: `make_batches`
    shards it by data)."""
    if input_context is not None and "input_context" in inspect.signature(
            corpus.load).parameters:
        return corpus.load(split, input_context=input_context), True
    return corpus.load(split), False


def sample_pairs(corpus, split, size):
    """At most `size` pairs of `split` spread over it (`corpus.sample`), or
    its first `size` for a corpus without `sample`: what vocabularies and
    length statistics are learned from, in the same seconds at any corpus
    size."""
    check_positive_int("size", size)
    if hasattr(corpus, "sample"):
        return corpus.sample(split, size)
    return corpus.load(split).take(size)


def pair_count(corpus, split):
    """The exact number of pairs in `split` (`corpus.size`), or None."""
    return corpus.size(split) if hasattr(corpus, "size") else None


def _evenly_spaced(pairs, total, size):
    if total is None:
        return pairs.take(size)
    if total <= size:
        return pairs
    return pairs.shard(math.ceil(total / size), 0).take(size)


def _check_split(split, available):
    if split not in available:
        raise ValueError(f"Unknown split {split!r}; expected one of {list(available)}.")


class TfdsCorpus:
    """A TFDS translation dataset, e.g. `ted_hrlr_translate/pt_to_en` or
    `wmt14_translate/de-en`, read in the direction `source_language` ->
    `target_language` (default: the dataset's supervised keys).

    Args:
        name: TFDS name with its config, as for `tfds.load`.
        source_language, target_language: feature names of the two sides.
        data_dir: TFDS data directory (default: TFDS's own, ~/tensorflow_datasets).
        download: let TFDS download and prepare the data when it is missing.
        split_names: map of our split names to the dataset's, for datasets
            that call them differently (e.g. `{"validation": "dev"}`).

    Example:

    >>> corpus = TfdsCorpus("ted_hrlr_translate/pt_to_en")
    >>> pairs = corpus.load("train")   # tf.data.Dataset of (pt, en) strings
    """

    def __init__(self, name, source_language=None, target_language=None, data_dir=None,
                 download=True, split_names=None):
        try:
            builder = tfds.builder(name, data_dir=data_dir)
        except tfds.core.registered.DatasetNotFoundError as e:
            raise ValueError(f"Unknown TFDS dataset {name!r}: {e}") from None
        languages = tuple(getattr(builder.info.features, "languages", ())) or tuple(
            builder.info.features.keys()
        )
        keys = builder.info.supervised_keys or (None, None)
        source_language = source_language or keys[0]
        target_language = target_language or keys[1]
        for role, language in (("source", source_language), ("target", target_language)):
            if language not in languages:
                raise ValueError(
                    f"{name} has no {role} language {language!r}; its languages are "
                    f"{list(languages)}."
                )
        if source_language == target_language:
            raise ValueError(f"Source and target language are both {source_language!r}.")
        self.name = name
        self.source_language = source_language
        self.target_language = target_language
        self.data_dir = data_dir
        self.download = download
        self.split_names = {split: split for split in SPLITS}
        self.split_names.update(split_names or {})

    @property
    def splits(self):
        return tuple(self.split_names)

    def load(self, split, shuffle_files=False, input_context=None):
        """`(source, target)` scalar string pairs of `split`; with a
        `tf.distribute.InputContext`, only that input pipeline's shard."""
        _check_split(split, self.split_names)
        # What `tfds.load` does, through the builder: `tfds.load` of a dataset
        # not prepared yet (the bundled corpus on first use) logs "WARNING
        # Variant folder ... has no dataset_info.json" on a healthy run.
        builder = tfds.builder(self.name, data_dir=self.data_dir)
        if self.download:
            builder.download_and_prepare()
        examples = builder.as_dataset(split=self.split_names[split], shuffle_files=shuffle_files)
        source, target = self.source_language, self.target_language
        if input_context is not None:
            examples = examples.shard(input_context.num_input_pipelines,
                                      input_context.input_pipeline_id)
        return examples.map(lambda ex: (ex[source], ex[target]),
                            num_parallel_calls=tf.data.AUTOTUNE)

    def size(self, split):
        """The number of pairs in `split` (from the dataset's info; None
        where the info does not say)."""
        _check_split(split, self.split_names)
        builder = tfds.builder(self.name, data_dir=self.data_dir)
        if self.download:
            builder.download_and_prepare()
        try:
            return builder.info.splits[self.split_names[split]].num_examples or None
        except KeyError:
            return None

    def sample(self, split, size):
        """At most `size` pairs of `split`, evenly spaced over it (every pair
        when it has no more)."""
        return _evenly_spaced(self.load(split), self.size(split), size)

    def __repr__(self):
        return f"TfdsCorpus({self.name!r}, {self.source_language!r} -> {self.target_language!r})"


def bundled_corpus(data_dir=None):
    """The English -> Spanish corpus that ships with the package, built
    locally (no network) by TFDS on first use; see `KerasAttentionEnEs`."""
    return TfdsCorpus(KerasAttentionEnEs.name, "en", "es", data_dir=data_dir)


def _strip(text):
    """What the Python reader strips (`text_files.STRIP_PATTERN`)."""
    return tf.strings.regex_replace(text, STRIP_PATTERN, "")


@dataclasses.dataclass(frozen=True)
class TrainingOverlap:
    """Of a split with files of its own: `shared` of its `checked` pairs
    have a source sentence that a training pair has too (compared as the
    holdout compares them, `group_key`: spacing collapsed, case-folded, in
    NFC form); `in_training_files` of them, a sentence of the training
    files, trained on or held out (>= `shared`). `checked` is all its
    `pairs`, or the sample of a split too long to hold in memory
    (`sampled`)."""

    shared: int
    checked: int
    pairs: int
    in_training_files: int

    @property
    def sampled(self):
        return self.checked < self.pairs


def _buckets(sources, seed):
    return split_buckets(list(sources), seed).numpy().tolist() if sources else []


def _training_overlap(own, training, held_out, seed, sizes):
    """`{split: TrainingOverlap}` of the splits of `own` (split -> its
    `ParallelText`) against `training` and `held_out` (what the holdout
    took from the training files): `ParallelText`s, or, when training is
    streamed, the sets of their `split_buckets` that its scan met
    (`ScannedText.seen`, `seen_held_out`): no second pass over a large
    corpus."""
    def found(texts, keys):
        return [key in texts for key in keys]

    if isinstance(training, ParallelText):
        trained = {group_key(s) for s in training.sources} if own else set()
        held = {group_key(s) for text in held_out for s in text.sources} if own else set()
        keys = {split: [group_key(s) for s in text.sources] for split, text in own.items()}
    else:
        trained, held = training, held_out
        keys = {split: _buckets(text.sources, seed) for split, text in own.items()}
    overlap = {}
    for split, text in own.items():
        in_training, in_held_out = found(trained, keys[split]), found(held, keys[split])
        overlap[split] = TrainingOverlap(sum(in_training), len(text), sizes[split],
                                         sum(map(any, zip(in_training, in_held_out))))
    return overlap


class TextFilesCorpus:
    """The user's own parallel text, one entry per split.

    Args:
        files: dict from split name to a TSV file, or `(source, target)`
            aligned files; each a path, a glob or a list of files (shards,
            paired in sorted order; a 1-tuple holds several TSV files). "train"
            is required.
        source_language, target_language: names used in logs and reports.
        tsv_columns: the source and target columns of TSV files, counted from 0.
        holdout: `(validation, test)` sizes (fractions, or numbers of pairs) to
            split off the training files, grouped by source sentence: 0 for
            a split that has its own files (a size for one is refused);
            `None` to use the files as given.
        split_seed: the seed of that split.
        in_memory_pairs: a split's files with at most this many lines are
            read into memory, and the holdout is exact (`grouped_split`);
            longer ones stay on disk and stream through `tf.data`, with the
            hashed holdout (`scan_text`). 0 streams every split.
        holdout_max_pairs: the most pairs a holdout size given as a fraction
            takes (3 % of 30M pairs would be 900,000).
        sample_pairs: the most pairs `sample` gives of a streamed split.

    The files are read and checked when the corpus is created (one pass,
    keeping only the held-out pairs and a sample when streamed), so that a
    bad file stops a run before it writes anything; `sizes` then holds each
    split's exact count, and `overlap` (`{split: TrainingOverlap}`) how many
    pairs of each split with files of its own have a source sentence that
    training has too (from the same pass: a streamed training split is
    read once; a streamed other split is compared by its sample). A
    streamed holdout is keyed by the source sentence's text, never by line
    number: a file edited after the scan cannot stream a held-out sentence
    into training (the stream warns that the counts are stale).

    Example:

    >>> corpus = TextFilesCorpus({"train": "spa.txt"}, "en", "es", holdout=(2000, 2000))
    >>> corpus.splits, corpus.sizes["test"]    # ("test", "validation", "train"), ~2000
    """

    def __init__(self, files, source_language="source", target_language="target",
                 tsv_columns=(0, 1), holdout=None, split_seed=0,
                 in_memory_pairs=IN_MEMORY_PAIRS, holdout_max_pairs=HOLDOUT_MAX_PAIRS,
                 sample_pairs=SAMPLE_PAIRS):
        if "train" not in files:
            raise ValueError(f"Own text files need a 'train' entry; received splits {list(files)}.")
        check_non_negative_int("in_memory_pairs", in_memory_pairs)  # 0: stream every split
        check_positive_int("sample_pairs", sample_pairs)
        check_positive_int("holdout_max_pairs", holdout_max_pairs)
        for split in files:
            _check_split(split, SPLITS)
        if holdout is not None:
            for split, size in zip(("validation", "test"), holdout):
                if size and split in files:
                    raise ValueError(f"The holdout asks for {size:g} {split} pairs from the "
                                     f"training file, but {split} files were given too; "
                                     "give 0 for that split.")
        resolved = {split: resolve_files(paths, tsv_columns) for split, paths in files.items()}
        self.texts, self._streamed, self._samples, self.sizes = {}, {}, {}, {}
        own, seen = {}, None  # the pairs (or sample) of each split with files; see below
        # Training last: its one pass also looks for the other splits' sentences.
        for split in sorted(resolved, key=lambda name: name == "train"):
            text_files = resolved[split]
            held = split == "train" and holdout is not None
            if sum(text_files.lines) <= in_memory_pairs:
                text = read_text(text_files)
                if held:
                    self.texts.update(grouped_split(text, *holdout, seed=split_seed,
                                                    max_pairs=holdout_max_pairs))
                else:
                    self.texts[split] = text
            else:
                watch = set().union(*(_buckets(t.sources, split_seed) for t in own.values()))
                scanned = scan_text(text_files, split, holdout if held else (0, 0), split_seed,
                                    holdout_max_pairs, sample_pairs, in_memory_pairs,
                                    watch if split == "train" else ())
                self.texts.update(scanned.held_out)
                self.sizes.update({s: n for s, n in scanned.counts.items() if s != "skipped"})
                if split not in scanned.held_out:
                    self._streamed[split] = scanned
                self._samples[split] = scanned.sample
                if split == "train":
                    seen = scanned.seen, scanned.seen_held_out
            if split != "train":
                own[split] = self.texts.get(split) or self._samples[split]
        self.sizes.update({split: len(text) for split, text in self.texts.items()})
        held_out = [self.texts[s] for s in ("validation", "test")
                    if s in self.texts and s not in own]
        self.overlap = _training_overlap(
            own, *((self.texts.get("train"), held_out) if seen is None else seen),
            split_seed, self.sizes)
        order = ("test", "validation", "train") if holdout is not None else ()
        self._splits = tuple(dict.fromkeys(s for s in (*order, *files) if self.sizes.get(s)))
        self.name = "text_files"
        self.source_language = source_language
        self.target_language = target_language

    @property
    def splits(self):
        return self._splits

    @property
    def streamed(self):
        """The splits read from disk at every pass (the others are in memory)."""
        return tuple(s for s in self._splits if s in self._streamed)

    def size(self, split):
        """The exact number of pairs in `split`."""
        _check_split(split, self._splits)
        return self.sizes[split]

    def load(self, split, input_context=None):
        """The `(source, target)` pairs of `split`. With a
        `tf.distribute.InputContext`, only that input pipeline's shard: its
        share of the files when the split has at least one file per input
        pipeline, else every N-th pair."""
        _check_split(split, self._splits)
        if split in self._streamed:
            return self._stream(self._streamed[split], input_context)
        text = self.texts[split]
        pairs = tf.data.Dataset.from_tensor_slices((list(text.sources), list(text.targets)))
        if input_context is not None:
            pairs = pairs.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return pairs

    def sample(self, split, size):
        """At most `size` pairs of `split`, evenly spaced over it (every pair
        when it has no more; a streamed split's sample was taken by its
        scan, of at most `sample_pairs`)."""
        _check_split(split, self._splits)
        if split in self._samples:
            text = self._samples[split]
            every = max(1, math.ceil(len(text) / size))  # still spread over the split
            return tf.data.Dataset.from_tensor_slices(
                (list(text.sources[::every]), list(text.targets[::every])))
        return _evenly_spaced(self.load(split), self.sizes[split], size)

    def sample_text(self, split, size):
        """`(sources, targets)`: at most `size` pairs of `split` as Python
        strings, evenly spaced over it (a streamed split's from its scan's
        sample), without building a `tf.data` pipeline."""
        _check_split(split, self._splits)
        text = self._samples[split] if split in self._samples else self.texts[split]
        every = max(1, math.ceil(len(text) / size))
        return list(text.sources[::every]), list(text.targets[::every])

    @staticmethod
    def _stream(scanned, input_context):
        """The pairs of `split` read from its files: a pair with a blank side
        is skipped, and with a holdout only the pairs whose source sentence's
        `split_buckets` falls in training are kept (keyed by content, so an
        edit of the files after the scan cannot move a held-out sentence
        into training; `check_unchanged` warns about the stale counts)."""
        check_unchanged(scanned)
        text_files = scanned.text_files
        shards = list(text_files.files)
        by_data = input_context is not None and len(shards) < input_context.num_input_pipelines
        if input_context is not None and not by_data:
            shards = shards[input_context.input_pipeline_id::input_context.num_input_pipelines]

        def read(*paths):
            return tf.data.Dataset.zip(tuple(tf.data.TextLineDataset(p) for p in paths))

        lines = tf.data.Dataset.from_tensor_slices(tuple(
            tf.constant(column, tf.string) for column in zip(*shards)))
        lines = lines.interleave(read, cycle_length=min(len(shards), 8), block_length=1)
        if by_data:
            lines = lines.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        source_column, target_column = text_files.columns
        columns = max(text_files.columns) + 1

        def pairs_of(*batch):  # [n] lines (or [n] source, [n] target lines), vectorized
            if text_files.kind == "aligned":
                sources, targets = batch
            else:  # a short line reads as blank sides, skipped
                fields = tf.strings.split(batch[0], "\t").to_tensor("", shape=[None, columns])
                sources, targets = fields[:, source_column], fields[:, target_column]
            sources, targets = _strip(sources), _strip(targets)
            keep = (tf.strings.length(sources) > 0) & (tf.strings.length(targets) > 0)
            if scanned.thresholds is not None:  # only "train" streams with a holdout
                keep &= split_buckets(sources, scanned.seed) >= scanned.thresholds[1]
            return tf.boolean_mask(sources, keep), tf.boolean_mask(targets, keep)

        pairs = lines.batch(_STREAM_BATCH).map(pairs_of, num_parallel_calls=tf.data.AUTOTUNE,
                                               deterministic=True)
        return pairs.unbatch()

    def __repr__(self):
        described = {s: t.files for s, t in self.texts.items()}
        described.update({s: f"{scanned.text_files.names} (streamed)"
                          for s, scanned in self._streamed.items()})
        return f"TextFilesCorpus({ {s: described[s] for s in self._splits} })"
