"""What the playground shows for one sentence, as one JSON-ready dict: the
translation(s), the subword tokens, each target token's probability, and
every layer's and head's attention with the numbers it was computed from.

The dict is the playground API's answer (`POST /api/translate`, documented
in the README) and what `attention_html` embeds in a self-contained page.
"""

import time
import weakref

import numpy as np
import tensorflow as tf
from keras import ops

from keras_attention.data.tokenizers import END_ID, START_ID

MAX_TEXT_LENGTH = 1000  # characters of `text` and of `target`
MAX_BEAM_SIZE = 16
KINDS = ("encoder_self", "decoder_self", "cross")
_DIGITS = 5  # significant digits of the numbers sent
# `Transformer.attention_details` traced once per model (eagerly it takes
# ~60% of a request).
_DETAILS = weakref.WeakKeyDictionary()


def _attention_details(model, encoder_tokens, decoder_tokens):
    if model not in _DETAILS:
        _DETAILS[model] = tf.function(model.attention_details, input_signature=[
            tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.int32)],
            autograph=False)
    return _DETAILS[model](encoder_tokens, decoder_tokens)


def model_info(model):
    """The architecture numbers the page labels its views with."""
    attention = model.encoder_blocks[0].self_attention
    return {
        "name": model.name,
        "num_encoder_layers": model.num_encoder_layers,
        "num_decoder_layers": model.num_decoder_layers,
        "num_heads": model.num_heads,
        "num_key_value_heads": model.num_key_value_heads or model.num_heads,
        "key_dim": attention.key_dim,
        "value_dim": attention.value_dim or attention.key_dim,
        "d_model": model.d_model,
        "max_length": model.max_length,
        # The vectors' precision: under mixed_bfloat16 the weighted sum of the
        # (bfloat16) values matches `outputs` to ~3 digits, not 5.
        "compute_dtype": model.compute_dtype,
    }


def check_request(text, beam_size=None, target=None):
    """Validates the playground's inputs; returns `(text, beam_size, target)`
    with `target` None for "translate" (absent, or blank). Raises ValueError
    or TypeError naming the value and what was expected."""
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a string; received {type(text).__name__} "
                        f"{text!r:.60}.")
    if not text.strip():
        raise ValueError("`text` is empty: type a sentence to translate.")
    if len(text) > MAX_TEXT_LENGTH:
        raise ValueError(f"`text` has {len(text)} characters; at most {MAX_TEXT_LENGTH} are "
                         "accepted.")
    if beam_size is not None and (isinstance(beam_size, bool) or not isinstance(beam_size, int)
                                  or not 1 <= beam_size <= MAX_BEAM_SIZE):
        raise ValueError(f"`beam_size` must be an integer from 1 to {MAX_BEAM_SIZE}; received "
                         f"{beam_size!r:.60}.")
    if target is not None:
        if not isinstance(target, str):
            raise TypeError(f"`target` must be a string (or absent); received "
                            f"{type(target).__name__} {target!r:.60}.")
        if len(target) > MAX_TEXT_LENGTH:
            raise ValueError(f"`target` has {len(target)} characters; at most "
                             f"{MAX_TEXT_LENGTH} are accepted.")
        target = target if target.strip() else None
    return text, beam_size, target


def analyze(translator, text, beam_size=None, target=None):
    """Translates `text` with `translator` (beam search with the n-best list)
    or, given a `target` sentence, scores that target ("my own translation"),
    and returns everything the playground draws as a JSON-ready dict (the
    API's answer; its fields are documented in the README).

    The attention numbers are the model's own, from
    `Transformer.attention_details` on the teacher-forced pair (the source
    and the best translation, or the given target): per attention kind, layer
    and head the weights, the q·k dot products, the mask, and the query, key,
    value and output vectors.
    """
    start = time.perf_counter()
    text, beam_size, target = check_request(text, beam_size, target)
    from keras_attention.translation import (  # the translator's own graphs
        _compiled_search,
        _detokenize_fn,
        _search_batch,
        _tokenize_fn,
    )

    model = translator.model
    beam_size = translator.beam_size if beam_size is None else beam_size
    alpha = translator.length_penalty
    limit = model.max_length
    source_ids = _tokenize_fn(translator.source_tokenizer, limit)(tf.constant([text]))
    source_ids = source_ids.to_list()[0]
    encoder_tokens = np.asarray([source_ids], np.int32)
    if target is None:
        max_length = min(translator.max_output_length or limit, limit)
        search = _compiled_search(model, beam_size, alpha, max_length, beam_size,
                                  translator.jit_compile, translator.early_stopping)
        # Padded as `Translator.translate([text])` pads it (bucket length, one
        # row): the same compiled shapes, so the same numbers and n-best list
        # (an unpadded source differs in the last bits, enough to swap near
        # ties), and a bounded number of traces however long each request.
        tokens, scores = search(_search_batch([source_ids], limit, translator.jit_compile,
                                              batch_size=1))  # [1, n, L], [1, n]
        hypotheses = [[int(t) for t in row if t != 0] for row in tokens.numpy()[0]]
        texts = [t.decode("utf-8") for t in  # the n rows in one call (padding dropped)
                 _detokenize_fn(translator.target_tokenizer)(tokens[0]).numpy()]
        translations = [{"text": t, "score": _round(s)}
                        for t, s in zip(texts, scores.numpy()[0].tolist())]
        output_ids = hypotheses[0]
        if not output_ids or output_ids[-1] != END_ID:  # hit the length limit
            output_ids = output_ids[: limit - 1] + [END_ID]
    else:
        output_ids = _tokenize_fn(translator.target_tokenizer, limit)(
            tf.constant([target])).to_list()[0]
        translations = None  # scored below, from the same pass
    input_ids = [START_ID] + output_ids[:-1]
    details = _attention_details(model, encoder_tokens, np.asarray([input_ids], np.int32))

    logits = _numpy(details["logits"])[0]  # [T, V]
    log_probs = logits - _logsumexp(logits)
    token_log_probs = log_probs[np.arange(len(output_ids)), output_ids]  # [T]
    if translations is None:
        lp = ((5.0 + len(output_ids)) / 6.0) ** alpha
        translations = [{"text": target, "score": _round(token_log_probs.sum() / lp)}]

    source_tokens = _tokens(translator.source_tokenizer, source_ids)
    target_tokens = _tokens(translator.target_tokenizer, output_ids)
    input_tokens = _tokens(translator.target_tokenizer, input_ids)
    token_lists = {"encoder_self": (source_tokens, source_tokens),
                   "decoder_self": (input_tokens, input_tokens),
                   "cross": (input_tokens, source_tokens)}
    attention = {kind: _attention(details[kind], *token_lists[kind]) for kind in KINDS}
    return {
        "source": text,
        "mode": "translate" if target is None else "forced",
        "beam_size": beam_size,
        "length_penalty": alpha,
        "translations": translations,
        "source_tokens": source_tokens,
        "target_tokens": target_tokens,
        "target_input_tokens": input_tokens,
        "token_probabilities": _round(np.exp(token_log_probs)),
        "model": model_info(model),
        "scale": _round(details["encoder_self"][0]["scale"]),
        "attention": attention,
        "milliseconds": round((time.perf_counter() - start) * 1000, 1),
    }


def _attention(blocks, query_tokens, key_tokens):
    """One attention kind: its blocks' details as nested lists, batch 0."""
    def stacked(name):
        return np.stack([_numpy(block[name])[0] for block in blocks])  # [L, N, ...]

    mask = blocks[0]["mask"]
    shape = (len(query_tokens), len(key_tokens))
    mask = (np.ones(shape, bool) if mask is None
            else np.broadcast_to(_numpy(mask).astype(bool)[0, 0], shape))
    return {
        "query_tokens": query_tokens,
        "key_tokens": key_tokens,
        "weights": _round(stacked("weights")),
        "dot_products": _round(stacked("dot_products")),
        "mask": mask.tolist(),
        "queries": _round(stacked("query")),
        "keys": _round(stacked("key")),
        "values": _round(stacked("value")),
        "outputs": _round(stacked("outputs")),
    }


def _numpy(x):
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32")))


def _logsumexp(x):
    peak = x.max(axis=-1, keepdims=True)
    return peak + np.log(np.exp(x - peak).sum(axis=-1, keepdims=True))


def _round(x):
    """`x` (a number or an array) to `_DIGITS` significant digits, as JSON-ready
    floats or nested lists."""
    a = np.asarray(x, np.float64)
    magnitude = np.floor(np.log10(np.abs(a), out=np.zeros_like(a), where=a != 0))
    factor = 10.0 ** (_DIGITS - 1 - magnitude)
    rounded = np.round(a * factor) / factor
    rounded = np.where(np.isfinite(a), rounded, 0.0)  # JSON has no inf/nan
    return rounded.tolist() if rounded.ndim else float(rounded)


def _tokens(tokenizer, ids):
    return [t.decode("utf-8", "replace") for t in tokenizer.id_to_token(tf.constant(ids)).numpy()]


__all__ = ["MAX_BEAM_SIZE", "MAX_TEXT_LENGTH", "analyze", "check_request", "model_info"]
