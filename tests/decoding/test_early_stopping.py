"""`beam_search(early_stopping=...)` against a reference beam search written
in plain Python, over a model whose next-token log-probabilities come from a
table (per sentence, position and last token): every hypothesis' score is
known exactly, so the searches must agree token for token."""

import numpy as np
import pytest
from keras import ops

from keras_attention.decoding import beam_search, greedy_search, search
from tests.layer_test_case import to_numpy

START, END = 1, 2
V = 8  # id 0 is padding, 1 start, 2 end, 3-7 symbols
MAX_LENGTH = 6
MODES = ["never", True, False]


class TableModel:
    """What the searches call of a `Transformer`, with log P(next token |
    sentence, position, last token) read from `table` `[B, L, V, V]`."""

    max_length = MAX_LENGTH
    decoder_vocabulary_size = V

    def __init__(self, table):
        self.table = ops.convert_to_tensor(table, "float32")

    def encode(self, encoder_tokens):  # the source ids stand for their sentence
        sentence = ops.cast(ops.convert_to_tensor(encoder_tokens)[:, :1, None], "float32")
        return sentence, ops.ones(ops.shape(encoder_tokens), "bool")  # [B, 1, 1], [B, S]

    def initialize_cache(self, encoder_outputs, max_length):
        rows = ops.shape(encoder_outputs)[0]
        self_cache = (ops.zeros((rows, max_length, 1, 1)),) * 2
        return ((self_cache, encoder_outputs),)  # one block; its "cross cache" names the sentence

    def decode_step(self, tokens, index, cache, encoder_padding_mask):
        sentence = ops.cast(cache[0][1][:, 0, 0], "int32")  # [B*K]
        per_row = ops.take(ops.take(self.table, index, axis=1), sentence, axis=0)  # [B*K, V, V]
        logits = ops.take_along_axis(per_row, tokens[:, :, None], axis=1)[:, 0]  # [B*K, V]
        return logits, cache


def random_table(rng, sentences, sharpness=2.0):
    """Log-probabilities with the end token likely enough that hypotheses
    finish at different steps; padding is never a candidate."""
    logits = rng.normal(size=(sentences, MAX_LENGTH, V, V)) * sharpness
    logits[..., END] += rng.uniform(-1.0, 2.0, size=(sentences, MAX_LENGTH, V))
    logits[..., 0] = -np.inf
    return logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)


def lp(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


def reference_beam_search(table, k, alpha, early_stopping):
    """One sentence: `(tokens [L], score)`, the textbook algorithm with
    lists: 2K candidates a step; the K best that do not end stay alive; those
    that end finish (with `early_stopping` True or False, only when ranked
    among the best K, as fairseq, CTranslate2 and Hugging Face do)."""
    alive = [((START,), 0.0)]
    finished = []  # (score, tokens)
    for i in range(MAX_LENGTH):
        candidates = sorted(
            ((log_prob + table[i, seq[-1], token], seq + (token,))
             for seq, log_prob in alive for token in range(1, V)),
            key=lambda c: -c[0])[: 2 * k]
        for rank, (log_prob, seq) in enumerate(candidates):
            if seq[-1] == END and (early_stopping == "never" or rank < k):
                finished.append((log_prob / lp(i + 1, alpha), seq))
        alive = [(seq, log_prob) for log_prob, seq in candidates if seq[-1] != END][:k]
        finished = sorted(finished, key=lambda f: -f[0])[:k]
        if len(finished) == k:
            if early_stopping is True:
                break
            best = alive[0][1] / lp(MAX_LENGTH if early_stopping == "never" else i + 1, alpha)
            if finished[-1][0] >= best:
                break
    if finished:
        score, seq = finished[0]
    else:
        seq, log_prob = alive[0]
        score = log_prob / lp(MAX_LENGTH, alpha)
    tokens = np.zeros(MAX_LENGTH, "int32")
    tokens[: len(seq) - 1] = seq[1:]
    return tokens, score


@pytest.mark.parametrize("early_stopping", MODES)
@pytest.mark.parametrize("beam_size,alpha", [(2, 0.6), (3, 0.0), (3, 1.0)])
def test_beam_search_equals_the_reference_algorithm(early_stopping, beam_size, alpha):
    """32 sentences decoded together, each as the reference decodes it
    alone: a sentence that stops keeps its result while the others go on."""
    table = random_table(np.random.default_rng(beam_size * 10 + int(alpha * 10)), 32)
    model = TableModel(table)
    sentences = np.arange(32, dtype="int32")[:, None]
    tokens, scores = beam_search(model, sentences, MAX_LENGTH, START, END, beam_size=beam_size,
                                 length_penalty=alpha, early_stopping=early_stopping)
    tokens, scores = to_numpy(tokens), to_numpy(scores)
    for row in range(32):
        expected_tokens, expected_score = reference_beam_search(table[row], beam_size, alpha,
                                                                early_stopping)
        np.testing.assert_array_equal(tokens[row], expected_tokens, err_msg=f"sentence {row}")
        np.testing.assert_allclose(scores[row], expected_score, rtol=1e-5, atol=1e-5)


def test_the_modes_differ_on_these_tables():
    """The tables above are not too easy: early stopping changes some
    results, so the comparison with the reference tells the modes apart."""
    table = random_table(np.random.default_rng(31), 64)
    results = {str(mode): [reference_beam_search(t, 3, 1.0, mode)[0].tolist() for t in table]
               for mode in MODES}
    assert results["True"] != results["never"]
    assert results["False"] != results["never"]


@pytest.mark.parametrize("early_stopping", [True, False])
@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_a_beam_of_one_is_greedy_search(early_stopping, alpha):
    """An end token finishes a hypothesis only among the best K candidates,
    so with K = 1 the search follows the greedy path and stops with it."""
    table = random_table(np.random.default_rng(5), 16)
    model = TableModel(table)
    sentences = np.arange(16, dtype="int32")[:, None]
    g_tokens, g_scores = greedy_search(model, sentences, MAX_LENGTH, START, END,
                                       length_penalty=alpha)
    b_tokens, b_scores = beam_search(model, sentences, MAX_LENGTH, START, END, beam_size=1,
                                     length_penalty=alpha, early_stopping=early_stopping)
    np.testing.assert_array_equal(to_numpy(b_tokens), to_numpy(g_tokens))
    np.testing.assert_allclose(to_numpy(b_scores), to_numpy(g_scores), rtol=1e-5, atol=1e-5)


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
@pytest.mark.parametrize("value", ["always", 1, 0, None, np.bool_(True)])
def test_bad_early_stopping(value):
    model = TableModel(random_table(np.random.default_rng(0), 1))
    for fn in (beam_search, search):
        with pytest.raises(ValueError, match=f"early_stopping={value!r}"):
            fn(model, [[0]], MAX_LENGTH, START, END, beam_size=2, early_stopping=value)
