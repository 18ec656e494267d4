#!/usr/bin/env python3
"""The keras.io example "English-to-Spanish translation with KerasHub", as a baseline.

Example by Abheesht Sharma (created 2022/05/26, last modified 2024/04/30):
https://keras.io/examples/nlp/neural_machine_translation_with_keras_hub/
source: https://github.com/keras-team/keras-io/blob/master/examples/nlp/neural_machine_translation_with_keras_hub.py

Reproduced as published; only the training length is set by a wall-clock budget.

What is the example's, unchanged: both sides lowercased; one WordPiece
vocabulary per language from `keras_hub.tokenizers.compute_word_piece_vocabulary`
(vocabulary size 15000 each, reserved tokens [PAD] [UNK] [START] [END],
batches of 1000 sentences) learned on the training pairs; `WordPieceTokenizer`s
with `lowercase=False`; `StartEndPacker` preprocessing (English padded or cut to
40 tokens; Spanish given [START]/[END], packed to 41 and shifted by one into
decoder inputs and targets); the dataset pipeline (batch 64, map, shuffle(2048),
prefetch(16), cache()); the model (TokenAndPositionEmbedding + one
TransformerEncoder; TokenAndPositionEmbedding + one TransformerDecoder,
Dropout(0.5), Dense(15000, softmax); embedding 256, feed-forward 2048, 8 heads,
no padding mask, as published); `compile("rmsprop",
loss="sparse_categorical_crossentropy", metrics=["accuracy"])`; greedy decoding
with `keras_hub.samplers.GreedySampler` from a 40-token prompt of [START] and
[PAD]s, stopping at [END]; and the post-processing of the decoded text
(`.replace("[PAD]", "").replace("[START]", "").replace("[END]", "").strip()`).

What differs, and only where the example itself gives no answer:

- Training length: `fit(..., epochs=<very large>)` with a callback that stops
  training once `budget_seconds` of wall-clock time have passed since the first
  training batch began (checked after every batch). The example trains for
  EPOCHS = 1 ("should be at least 10 for convergence").
- Data: the caller's training/validation pairs instead of the example's
  download and its 70/15/15 split. They are lowercased here, as the example
  lowercases every pair when reading its file; `translate` lowercases its
  English input for the same reason.
- Decoding runs in batches inside one `tf.function` (TensorFlow backend)
  instead of the example's one sentence at a time in eager mode. Each row is
  computed exactly as the example's batch of one is (the same 40-token
  zero-padded encoder input, the same prompt, the model has no cross-row
  interaction); tokens that a row generates after its own [END] (the batch
  only stops when every row has ended) are reset to [PAD], which is what the
  example's prompt holds there. `decode_sequences_as_published` keeps the
  example's own function for checking this.
- Two inputs on which the example raises an error get an answer instead: an
  English sentence longer than 40 WordPiece tokens is cut to 40 (what the
  training packer does; the example's position embedding rejects it), and a
  generated id at or above the learned Spanish vocabulary's size (the output
  layer has SPA_VOCAB_SIZE = 15000 units whatever size the learned vocabulary
  has) is detokenized as [UNK] (the example's detokenizer raises ValueError).
  Like the example, the post-processing leaves "[UNK]" in the text.

    python benchmarks/kerasio_translation.py --tsv spa.txt --budget-minutes 10
"""

import argparse
import math
import os
import random
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import _repo_root  # noqa: E402,F401  (benchmarks/_repo_root.py: the repository root on sys.path, TensorFlow imported quietly)

# isort: split
import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow.data as tf_data  # noqa: E402
from keras import ops  # noqa: E402

EXAMPLE_URL = "https://keras.io/examples/nlp/neural_machine_translation_with_keras_hub/"

# The example's parameters/hyperparameters (EPOCHS = 1 is replaced by the budget).
BATCH_SIZE = 64
MAX_SEQUENCE_LENGTH = 40
ENG_VOCAB_SIZE = 15000
SPA_VOCAB_SIZE = 15000

EMBED_DIM = 256
INTERMEDIATE_DIM = 2048
NUM_HEADS = 8

RESERVED_TOKENS = ["[PAD]", "[UNK]", "[START]", "[END]"]
MANY_EPOCHS = 1_000_000  # training stops on the budget long before this


# -- the example's code, with its globals passed in ----------------------------

def train_word_piece(text_samples, vocab_size, reserved_tokens):
    word_piece_ds = tf_data.Dataset.from_tensor_slices(text_samples)
    vocab = keras_hub.tokenizers.compute_word_piece_vocabulary(
        word_piece_ds.batch(1000).prefetch(2),
        vocabulary_size=vocab_size,
        reserved_tokens=reserved_tokens,
    )
    return vocab


def make_preprocess_batch(eng_tokenizer, spa_tokenizer):
    def preprocess_batch(eng, spa):
        eng = eng_tokenizer(eng)
        spa = spa_tokenizer(spa)

        # Pad `eng` to `MAX_SEQUENCE_LENGTH`.
        eng_start_end_packer = keras_hub.layers.StartEndPacker(
            sequence_length=MAX_SEQUENCE_LENGTH,
            pad_value=eng_tokenizer.token_to_id("[PAD]"),
        )
        eng = eng_start_end_packer(eng)

        # Add special tokens (`"[START]"` and `"[END]"`) to `spa` and pad it as well.
        spa_start_end_packer = keras_hub.layers.StartEndPacker(
            sequence_length=MAX_SEQUENCE_LENGTH + 1,
            start_value=spa_tokenizer.token_to_id("[START]"),
            end_value=spa_tokenizer.token_to_id("[END]"),
            pad_value=spa_tokenizer.token_to_id("[PAD]"),
        )
        spa = spa_start_end_packer(spa)

        return (
            {
                "encoder_inputs": eng,
                "decoder_inputs": spa[:, :-1],
            },
            spa[:, 1:],
        )

    return preprocess_batch


def make_dataset(pairs, preprocess_batch):
    eng_texts, spa_texts = zip(*pairs)
    eng_texts = list(eng_texts)
    spa_texts = list(spa_texts)
    dataset = tf_data.Dataset.from_tensor_slices((eng_texts, spa_texts))
    dataset = dataset.batch(BATCH_SIZE)
    dataset = dataset.map(preprocess_batch, num_parallel_calls=tf_data.AUTOTUNE)
    return dataset.shuffle(2048).prefetch(16).cache()


def build_transformer():
    # Encoder
    encoder_inputs = keras.Input(shape=(None,), name="encoder_inputs")

    x = keras_hub.layers.TokenAndPositionEmbedding(
        vocabulary_size=ENG_VOCAB_SIZE,
        sequence_length=MAX_SEQUENCE_LENGTH,
        embedding_dim=EMBED_DIM,
    )(encoder_inputs)

    encoder_outputs = keras_hub.layers.TransformerEncoder(
        intermediate_dim=INTERMEDIATE_DIM, num_heads=NUM_HEADS
    )(inputs=x)
    encoder = keras.Model(encoder_inputs, encoder_outputs)  # noqa: F841  (built as published)

    # Decoder
    decoder_inputs = keras.Input(shape=(None,), name="decoder_inputs")
    encoded_seq_inputs = keras.Input(shape=(None, EMBED_DIM), name="decoder_state_inputs")

    x = keras_hub.layers.TokenAndPositionEmbedding(
        vocabulary_size=SPA_VOCAB_SIZE,
        sequence_length=MAX_SEQUENCE_LENGTH,
        embedding_dim=EMBED_DIM,
    )(decoder_inputs)

    x = keras_hub.layers.TransformerDecoder(
        intermediate_dim=INTERMEDIATE_DIM, num_heads=NUM_HEADS
    )(decoder_sequence=x, encoder_sequence=encoded_seq_inputs)
    x = keras.layers.Dropout(0.5)(x)
    decoder_outputs = keras.layers.Dense(SPA_VOCAB_SIZE, activation="softmax")(x)
    decoder = keras.Model(
        [
            decoder_inputs,
            encoded_seq_inputs,
        ],
        decoder_outputs,
    )
    decoder_outputs = decoder([decoder_inputs, encoder_outputs])

    transformer = keras.Model(
        [encoder_inputs, decoder_inputs],
        decoder_outputs,
        name="transformer",
    )
    return transformer


def postprocess(translated):
    """The example's clean-up of a decoded sentence."""
    return (
        translated.replace("[PAD]", "")
        .replace("[START]", "")
        .replace("[END]", "")
        .strip()
    )


# -- the wall-clock budget -------------------------------------------------------

class WallClockBudget(keras.callbacks.Callback):
    """Sets `model.stop_training` once `budget_seconds` have passed since the
    first training batch began; checked after every batch."""

    def __init__(self, budget_seconds):
        super().__init__()
        self.budget_seconds = float(budget_seconds)
        self.start = None
        self.steps = 0
        self.epoch_ends = []
        self.paused = 0.0  # seconds not counted (the curve's validation decoding)

    def elapsed(self):
        return 0.0 if self.start is None else time.perf_counter() - self.start - self.paused

    def on_train_batch_begin(self, batch, logs=None):
        if self.start is None:
            self.start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.elapsed() >= self.budget_seconds:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):  # after the epoch's validation
        self.epoch_ends.append(self.elapsed())


class ValidationBleuCurve(keras.callbacks.Callback):
    """At each epoch end, the validation BLEU of the model's greedy
    translations (the example's decoding) of `sources`, against `references`,
    lowercased as the example's output, with the training seconds so far:
    the time-to-BLEU curve. Its decoding is not counted in `budget`."""

    def __init__(self, budget, translator, sources, references):
        super().__init__()
        self.budget, self.translator = budget, translator
        self.sources, self.references = sources, references
        self.curve = []

    def on_epoch_end(self, epoch, logs=None):
        import sacrebleu

        seconds = self.budget.elapsed()  # training so far, before this decoding
        began = time.perf_counter()
        hypotheses = self.translator.translate(self.sources)  # the weights trained so far
        bleu = sacrebleu.metrics.BLEU(lowercase=True).corpus_score(hypotheses, [self.references])
        self.curve.append({"epoch": epoch + 1, "steps": self.budget.steps,
                           "train_seconds": round(seconds, 2),
                           "bleu": round(bleu.score, 2)})
        self.budget.paused += time.perf_counter() - began


# -- the trained translator ---------------------------------------------------------

class KerasIoTranslator:
    """The example's trained model and tokenizers, and its greedy decoding."""

    def __init__(self, transformer, eng_tokenizer, spa_tokenizer, *, vocabulary_seconds,
                 train_seconds, epochs, steps, steps_per_epoch, epoch_seconds, history,
                 curve=()):
        self.transformer = transformer
        self.eng_tokenizer = eng_tokenizer
        self.spa_tokenizer = spa_tokenizer
        self.vocabulary_seconds = vocabulary_seconds
        self.train_seconds = train_seconds
        self.epochs = epochs
        self.steps = steps
        self.steps_per_epoch = steps_per_epoch
        self.epoch_seconds = epoch_seconds  # per epoch, each with its validation pass
        self.history = history
        self.curve = list(curve)  # [{"epoch", "steps", "train_seconds", "bleu"}] per epoch
        self._generate_fn = None

    # The example's `decode_sequences`, verbatim (its globals made attributes) but for
    # one cast; one sentence at a time, eager. For checking `translate` against.
    def decode_sequences_as_published(self, input_sentences):
        eng_tokenizer, spa_tokenizer, transformer = (
            self.eng_tokenizer, self.spa_tokenizer, self.transformer)
        batch_size = 1

        # Tokenize the encoder input.
        encoder_input_tokens = ops.convert_to_tensor(
            eng_tokenizer(input_sentences), sparse=False, ragged=False
        )
        if ops.shape(encoder_input_tokens)[1] < MAX_SEQUENCE_LENGTH:
            pads = ops.zeros(
                (1, MAX_SEQUENCE_LENGTH - ops.shape(encoder_input_tokens)[1]),
                dtype=encoder_input_tokens.dtype,
            )
            encoder_input_tokens = ops.concatenate([encoder_input_tokens, pads], 1)

        # Define a function that outputs the next token's probability given the
        # input sequence.
        def next(prompt, cache, index):
            logits = transformer([encoder_input_tokens, prompt])[:, index - 1, :]
            # Ignore hidden states for now; only needed for contrastive search.
            hidden_states = None
            return logits, hidden_states, cache

        # Build a prompt of length 40 with a start token and padding tokens.
        length = 40
        start = ops.full((batch_size, 1), spa_tokenizer.token_to_id("[START]"))
        pad = ops.full((batch_size, length - 1), spa_tokenizer.token_to_id("[PAD]"))
        prompt = ops.concatenate((start, pad), axis=-1)

        generated_tokens = keras_hub.samplers.GreedySampler()(
            next,
            prompt,
            stop_token_ids=[spa_tokenizer.token_to_id("[END]")],
            index=1,  # Start sampling after start token.
        )
        # The one change: `ops.full` above makes a float prompt (Keras' default
        # dtype), and keras-hub 0.32's eager detokenizer only takes integer ids.
        generated_tokens = ops.cast(generated_tokens, "int32")
        generated_sentences = spa_tokenizer.detokenize(generated_tokens)
        return generated_sentences

    def _generate(self, encoder_input_tokens, prompt):
        """The example's `next` + GreedySampler call, for a batch of rows."""
        transformer = self.transformer

        def next(prompt, cache, index):
            logits = transformer([encoder_input_tokens, prompt])[:, index - 1, :]
            return logits, None, cache

        return keras_hub.samplers.GreedySampler()(
            next,
            prompt,
            stop_token_ids=[self.spa_tokenizer.token_to_id("[END]")],
            index=1,  # Start sampling after start token.
        )

    def _generate_compiled(self, encoder_input_tokens, prompt):
        if self._generate_fn is None:
            if keras.config.backend() == "tensorflow":
                import tensorflow as tf

                spec = tf.TensorSpec([None, MAX_SEQUENCE_LENGTH], tf.int32)
                self._generate_fn = tf.function(self._generate, input_signature=[spec, spec])
            else:
                self._generate_fn = self._generate
        return ops.convert_to_numpy(self._generate_fn(encoder_input_tokens, prompt))

    def _tokenize_english(self, sentences):
        """The example's encoder input per row: the tokens, zero-padded to 40
        (cut to 40 where the example would fail)."""
        tokens = self.eng_tokenizer(sentences)
        if hasattr(tokens, "to_list"):  # a tf.RaggedTensor on the TensorFlow path
            tokens = tokens.to_list()
        encoder_input = np.zeros((len(sentences), MAX_SEQUENCE_LENGTH), dtype="int32")
        for row, ids in enumerate(tokens):
            ids = list(ids)[:MAX_SEQUENCE_LENGTH]
            encoder_input[row, :len(ids)] = ids
        return encoder_input

    def _decode_batch(self, sentences):
        spa = self.spa_tokenizer
        start_id, pad_id = spa.token_to_id("[START]"), spa.token_to_id("[PAD]")
        end_id, unk_id = spa.token_to_id("[END]"), spa.token_to_id("[UNK]")
        encoder_input = self._tokenize_english(sentences)
        prompt = np.full((len(sentences), 40), pad_id, dtype="int32")
        prompt[:, 0] = start_id
        generated = self._generate_compiled(encoder_input, prompt).copy()
        for row in generated:
            ends = np.flatnonzero(row[1:] == end_id)
            if ends.size:  # the example's batch of one stops here: the rest stays [PAD]
                row[ends[0] + 2:] = pad_id
        generated[(generated < 0) | (generated >= spa.vocabulary_size())] = unk_id
        texts = spa.detokenize(generated)
        texts = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in _as_list(texts)]
        return [postprocess(t) for t in texts]

    def translate(self, sentences, batch_size=64):
        """Spanish translations (lowercase, as the example's) of English strings."""
        sentences = [str(s).lower() for s in sentences]
        translations = []
        for begin in range(0, len(sentences), batch_size):
            translations.extend(self._decode_batch(sentences[begin:begin + batch_size]))
        return translations


def _as_list(texts):
    if isinstance(texts, (list, tuple)):
        return list(texts)
    return [t for t in ops.convert_to_numpy(texts).tolist()]


def _lowercase(pairs):
    return [(str(eng).lower(), str(spa).lower()) for eng, spa in pairs]


def train(train_pairs, validation_pairs, budget_seconds, seed=0, verbose=1, curve_sentences=0):
    """Learn the vocabularies (not timed against the budget), then train the
    example's model until `budget_seconds` of training wall-clock time have passed.
    With `curve_sentences`, the first that many validation pairs are
    translated at each epoch end (not timed against the budget) for the
    time-to-BLEU curve (`translator.curve`)."""
    keras.utils.set_random_seed(seed)
    train_pairs = _lowercase(train_pairs)
    validation_pairs = _lowercase(validation_pairs)

    began = time.perf_counter()
    eng_samples = [text_pair[0] for text_pair in train_pairs]
    eng_vocab = train_word_piece(eng_samples, ENG_VOCAB_SIZE, RESERVED_TOKENS)
    spa_samples = [text_pair[1] for text_pair in train_pairs]
    spa_vocab = train_word_piece(spa_samples, SPA_VOCAB_SIZE, RESERVED_TOKENS)
    eng_tokenizer = keras_hub.tokenizers.WordPieceTokenizer(vocabulary=eng_vocab, lowercase=False)
    spa_tokenizer = keras_hub.tokenizers.WordPieceTokenizer(vocabulary=spa_vocab, lowercase=False)
    vocabulary_seconds = time.perf_counter() - began
    if verbose:
        print(f"vocabularies: English {len(eng_vocab)}, Spanish {len(spa_vocab)} tokens "
              f"({vocabulary_seconds:.1f} s, not counted in the budget)")

    preprocess_batch = make_preprocess_batch(eng_tokenizer, spa_tokenizer)
    train_ds = make_dataset(train_pairs, preprocess_batch)
    val_ds = make_dataset(validation_pairs, preprocess_batch) if validation_pairs else None

    transformer = build_transformer()
    if verbose:
        transformer.summary()
    transformer.compile(
        "rmsprop", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    budget = WallClockBudget(budget_seconds)
    callbacks = [budget]
    if curve_sentences and validation_pairs:
        pairs = validation_pairs[:curve_sentences]
        curve = ValidationBleuCurve(
            budget, KerasIoTranslator(
                transformer, eng_tokenizer, spa_tokenizer, vocabulary_seconds=None,
                train_seconds=None, epochs=None, steps=None, steps_per_epoch=None,
                epoch_seconds=None, history=None),
            [p[0] for p in pairs], [p[1] for p in pairs])
        callbacks.append(curve)
    history = transformer.fit(
        train_ds, epochs=MANY_EPOCHS, validation_data=val_ds, callbacks=callbacks, verbose=verbose
    )
    train_seconds = budget.elapsed()

    steps_per_epoch = math.ceil(len(train_pairs) / BATCH_SIZE)
    ends = [0.0] + budget.epoch_ends
    return KerasIoTranslator(
        transformer, eng_tokenizer, spa_tokenizer,
        vocabulary_seconds=vocabulary_seconds,
        train_seconds=train_seconds,
        epochs=budget.steps / steps_per_epoch,
        steps=budget.steps,
        steps_per_epoch=steps_per_epoch,
        epoch_seconds=[b - a for a, b in zip(ends, ends[1:])],
        history={k: [float(v) for v in vs] for k, vs in history.history.items()},
        curve=curve.curve if len(callbacks) > 1 else [],
    )


# -- command line ---------------------------------------------------------------------

def read_tsv(path):
    """(english, spanish) from the first two tab-separated columns; extra columns ignored."""
    pairs = []
    with open(path, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            columns = line.split("\t")
            if len(columns) >= 2:
                pairs.append((columns[0], columns[1]))
    return pairs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=f"Example: {EXAMPLE_URL}")
    parser.add_argument("--tsv", required=True,
                        help="tab-separated file, english<TAB>spanish[<TAB>ignored...] per line "
                             "(e.g. the example's spa-eng/spa.txt)")
    parser.add_argument("--budget-minutes", type=float, default=10.0,
                        help="training wall-clock budget (default 10)")
    parser.add_argument("--max-pairs", type=int, default=None,
                        help="use at most this many pairs (after shuffling)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=5, help="held-out sentences to translate")
    args = parser.parse_args(argv)

    pairs = read_tsv(args.tsv)
    random.Random(args.seed).shuffle(pairs)
    if args.max_pairs:
        pairs = pairs[:args.max_pairs]
    num_train = int(0.9 * len(pairs))
    train_pairs, held_out = pairs[:num_train], pairs[num_train:]
    print(f"{len(pairs)} pairs: {len(train_pairs)} training, {len(held_out)} held out")

    translator = train(train_pairs, held_out, args.budget_minutes * 60, seed=args.seed)
    print(f"trained {translator.train_seconds:.0f} s: {translator.steps} steps, "
          f"{translator.epochs:.2f} epochs")
    shown = held_out[:args.examples]
    for (eng, spa), translated in zip(shown, translator.translate([e for e, _ in shown])):
        print(f"\n{eng}\n  reference: {spa.lower()}\n  model:     {translated}")


if __name__ == "__main__":
    sys.exit(main())
