"""Conversion to CTranslate2, the CPU/GPU inference engine of OpenNMT, Marian
and fairseq deployments, and translation from strings with a converted model.

`export_ctranslate2` fills CTranslate2's own model specification
(`ctranslate2.specs.TransformerSpec`) with the weights of a trained
`Transformer` and writes it with CTranslate2's converter machinery
(`ctranslate2.converters.Converter`, which validates, optionally quantizes
and saves it):

    <output_dir>/model.bin                    the weights (CTranslate2's layout)
    <output_dir>/config.json                  special tokens, layer norm epsilon, ...
    <output_dir>/source_vocabulary.json,      our tokenizers' tokens, by id
        target_vocabulary.json                (shared_vocabulary.json when equal)

How our weights map (CTranslate2's linear weights are `[out, in]`, ours
`[in, out]`; shape legend D model depth, N query heads, K key/value heads,
H depth per head, F feed-forward depth, V vocabulary, L max_length):

- token embeddings `[V, D]` as they are, with `scale_embeddings` = ours
  (×√D); the position table `[L, D]` (sinusoidal or learned, the exact
  values our layer adds) as the position encoder's `encodings`;
- self-attention: W^Q `[D, N, H]`, W^K and W^V `[D, K, H]` flattened to
  `[D, N·H]`, `[D, K·H]`, transposed and stacked into one fused
  `[(N + 2K)·H, D]` projection (head n at rows n·H..(n+1)·H, CTranslate2's
  head split); W^O `[N, H, D]` -> `[D, N·H]`; biases alike;
- cross-attention: W^Q alone, W^K and W^V fused `[2K·H, D]`, W^O;
- grouped-query attention: `num_heads_kv` = K (CTranslate2 repeats each
  key/value head for N / K consecutive query heads, as we do);
- LayerNorms: ours after the residual (post-LN, `norm_first=False`) or
  before the sublayer with a final LayerNorm per stack (pre-LN) are
  CTranslate2's `pre_norm=False` / `True`; its epsilon is set to ours
  (`config.layer_norm_epsilon`);
- feed-forward: Dense kernels transposed; ReLU, GELU (exact, erf), SiLU,
  tanh and sigmoid map to CTranslate2's activations;
- output projection: the tied target embedding `[V, D]` (with our
  `output_bias` when the model has one: Marian's `final_logits_bias`) or
  our Dense kernel transposed with its bias.

Special tokens: CTranslate2 starts decoding with `decoder_start_token` and
stops at `eos_token`; they are set to our `[START]` and `[END]`, `unk_token`
to `[UNK]`, and `add_source_eos` makes CTranslate2 append `[END]` to every
source, as our `tokenize_with_end` does (with `max_input_length=max_length`
it truncates exactly like ours too: the first max_length - 1 tokens, then
`[END]`). Two `translate_batch` options (`SEARCH_OPTIONS`) make its search
ours: `[PAD]` (id 0), an ordinary token to CTranslate2, is suppressed (our
searches never generate it), and `min_decoding_length=0` lets `[END]` come
first (CTranslate2's default of 1 forbids it at the first step, which also
changes the first step's log-probability).

What differs (documented, not hidden):

- Length penalty. Both normalize a finished hypothesis' log P(Y|X) (end
  token included) with the same |Y| (end token included), ours by the GNMT
  ((5 + |Y|) / 6)^alpha, CTranslate2 by |Y|^alpha (its default alpha is 1).
  The same alpha ranks beam hypotheses differently unless alpha = 0; greedy
  tokens never depend on it. `translate_with_ctranslate2` passes alpha to
  CTranslate2 and returns the scores converted to our definition.
- An empty source (no token before `[END]`): CTranslate2 returns an empty
  translation with score 0 without running the model, as our SavedModel
  does; our in-process `translate` decodes from `[END]` alone.
"""

import os
import weakref

import numpy as np
from keras import ops

from keras_attention._constants import END_ID, PAD_ID, RESERVED_TOKENS, START_ID, UNK_ID
from keras_attention._io import Layout, atomic_directory, check_replaceable
from keras_attention._validation import as_sentences, check_positive_int
from keras_attention.decoding import length_penalty
from keras_attention.export.saved_model import _check_translator

# CTranslate2's weight types (`ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES`,
# which `export_ctranslate2` checks against at run time); CPUs compute in
# float32, int8 (int8_float32) and int16.
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16",
                 "float16", "bfloat16", "float32")


# `translate_batch` options that make CTranslate2's search ours: our searches
# never generate [PAD] (its logit is masked before the softmax, which
# CTranslate2's suppressed tokens are too), and may end with [END] at the
# first step (CTranslate2's default `min_decoding_length=1` forbids it).
SEARCH_OPTIONS = {"suppress_sequences": [[RESERVED_TOKENS[PAD_ID]]], "min_decoding_length": 0}


def _import_ctranslate2():
    try:  # (binds `ctranslate2`, the package)
        import ctranslate2.converters
        import ctranslate2.specs  # noqa: F401
    except ImportError:
        raise ImportError("Converting to CTranslate2 needs the ctranslate2 package: "
                          "pip install 'ctranslate2>=4.5' (or the `benchmarks` extra).") from None
    return ctranslate2


def _numpy(variable):
    """A weight as a float32 NumPy array (mixed-precision models keep float32 weights)."""
    return np.asarray(ops.convert_to_numpy(variable), dtype=np.float32)


def _activation(model):
    """CTranslate2's `Activation` for the model's feed-forward activation."""
    import keras
    from ctranslate2.specs import common_spec

    supported = {
        keras.activations.relu: common_spec.Activation.RELU,
        keras.activations.gelu: common_spec.Activation.GELU,  # exact (erf), Keras' default
        keras.activations.silu: common_spec.Activation.SWISH,
        keras.activations.tanh: common_spec.Activation.Tanh,
        keras.activations.sigmoid: common_spec.Activation.Sigmoid,
    }
    blocks = list(model.encoder_blocks) + list(model.decoder_blocks)
    functions = {block.feedforward_intermediate_dense.activation for block in blocks}
    function = functions.pop() if len(functions) == 1 else None
    if function not in supported:
        raise ValueError(
            f"CTranslate2 cannot represent the feed-forward activation={model.activation!r}; "
            "it supports relu, gelu (exact), silu/swish, tanh and sigmoid.")
    return supported[function]


def _check_model(model, source_tokenizer, target_tokenizer):
    from keras_attention.models import Transformer
    from keras_attention.models.precision import quantization_of

    if not isinstance(model, Transformer):
        raise TypeError("`model` must be a keras_attention.models.Transformer; received "
                        f"{type(model).__name__}.")
    mode = quantization_of(model)
    if mode is not None:  # its kernels are int8 values beside scales, not weights
        raise ValueError(
            f"The model is quantized ({mode}); CTranslate2's converter takes float weights. "
            "Convert the float translator (before `quantize`) with quantization=\"int8\": "
            "CTranslate2 quantizes the weights itself.")
    for side, tokenizer, size in (("source", source_tokenizer, model.encoder_vocabulary_size),
                                  ("target", target_tokenizer, model.decoder_vocabulary_size)):
        vocabulary = list(getattr(tokenizer, "vocabulary", None) or ())
        if len(vocabulary) != size:
            raise ValueError(
                f"The {side} tokenizer has {len(vocabulary)} tokens but the model's "
                f"{'encoder' if side == 'source' else 'decoder'} vocabulary has {size}: "
                "they do not belong together.")
        if tuple(vocabulary[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
            raise ValueError(
                f"The {side} vocabulary must start with the reserved tokens "
                f"{list(RESERVED_TOKENS)} (CTranslate2 finds [START], [END] and [UNK] by "
                f"name); received {vocabulary[: len(RESERVED_TOKENS)]}.")


def _set_linear(spec, kernel, bias):
    """Our `[in, out]` kernel (already flattened to 2-D) -> CTranslate2's `[out, in]`."""
    spec.weight = np.ascontiguousarray(kernel.T)
    if bias is not None:
        spec.bias = bias


def _bias(dense):
    return None if dense.bias is None else _numpy(dense.bias).reshape(-1)


def _projection_kernel(dense):
    """W^Q, W^K or W^V `[D, heads, H]` as `[in, out]` = `[D, heads·H]`."""
    kernel = _numpy(dense.kernel)
    return kernel.reshape(kernel.shape[0], -1)


def _fuse(spec, denses):
    """Projections of the same input as one CTranslate2 linear: our kernels
    side by side on the output axis, transposed to `[sum of outs, in]`."""
    kernels = [_projection_kernel(d) for d in denses]  # each [D, out_i]
    biases = [_bias(d) for d in denses]
    spec.weight = np.ascontiguousarray(np.concatenate(kernels, axis=1).T)
    if any(b is not None for b in biases):
        spec.bias = np.concatenate([
            b if b is not None else np.zeros(k.shape[1], np.float32)
            for b, k in zip(biases, kernels)])


def _set_layer_norm(spec, norm):
    spec.gamma = _numpy(norm.gamma)
    spec.beta = _numpy(norm.beta)


def _set_attention(spec, attention, norm, self_attention):
    if self_attention:  # linear[0]: Q, K, V fused; linear[1]: output
        _fuse(spec.linear[0], [attention.query_dense, attention.key_dense, attention.value_dense])
    else:  # linear[0]: Q; linear[1]: K, V fused (over the encoder outputs); linear[2]: output
        _fuse(spec.linear[0], [attention.query_dense])
        _fuse(spec.linear[1], [attention.key_dense, attention.value_dense])
    output = attention.output_dense  # W^O [N, H, D]
    _set_linear(spec.linear[-1], _numpy(output.kernel).reshape(-1, output.kernel.shape[-1]),
                _bias(output))  # [N·H, D] -> [D, N·H]
    _set_layer_norm(spec.layer_norm, norm)


def _set_feedforward(spec, block):
    _set_layer_norm(spec.layer_norm, block.feedforward_norm)
    for linear, dense in ((spec.linear_0, block.feedforward_intermediate_dense),
                          (spec.linear_1, block.feedforward_output_dense)):
        _set_linear(linear, _numpy(dense.kernel), _bias(dense))


def _position_table(embedding):
    """The `[L, D]` positions our embedding layer adds (its exact values)."""
    if embedding.position_encoding == "learned":
        return _numpy(embedding.position_embeddings)
    from keras_attention.layers.position import sinusoidal_position_encoding

    return _numpy(sinusoidal_position_encoding(
        embedding.sequence_length, embedding.embedding_dim, 0, embedding.max_wavelength,
        embedding.sinusoidal_layout))


def _set_embeddings(spec, embedding):
    weight = _numpy(embedding.token_embedding.embeddings)  # [V, D]
    if isinstance(spec.embeddings, list):
        spec.embeddings[0].weight = weight
    else:
        spec.embeddings.weight = weight
    spec.scale_embeddings = bool(embedding.scale_embeddings)  # True: ×√D, as ours
    spec.position_encodings.encodings = _position_table(embedding)  # [L, D]
    return weight


def build_spec(model, source_tokenizer, target_tokenizer):
    """CTranslate2's `TransformerSpec` of `model`, filled with its weights,
    its vocabularies and its special tokens (not yet validated or saved)."""
    _import_ctranslate2()
    from ctranslate2.specs import transformer_spec

    _check_model(model, source_tokenizer, target_tokenizer)
    activation = _activation(model)
    kv_heads = model.num_key_value_heads
    num_heads_kv = None if kv_heads in (None, model.num_heads) else kv_heads
    common = dict(pre_norm=bool(model.norm_first), activation=activation,
                  num_heads_kv=num_heads_kv)
    spec = transformer_spec.TransformerSpec(
        transformer_spec.TransformerEncoderSpec(model.num_encoder_layers, model.num_heads,
                                                **common),
        transformer_spec.TransformerDecoderSpec(model.num_decoder_layers, model.num_heads,
                                                **common),
    )

    # === Encoder ===
    encoder = spec.encoder
    _set_embeddings(encoder, model.encoder_embedding)
    for layer, block in zip(encoder.layer, model.encoder_blocks):
        _set_attention(layer.self_attention, block.self_attention, block.self_attention_norm,
                       self_attention=True)
        _set_feedforward(layer.ffn, block)
    if model.norm_first:
        _set_layer_norm(encoder.layer_norm, model.encoder_final_norm)

    # === Decoder ===
    decoder = spec.decoder
    target_embeddings = _set_embeddings(decoder, model.decoder_embedding)
    for layer, block in zip(decoder.layer, model.decoder_blocks):
        _set_attention(layer.self_attention, block.self_attention, block.self_attention_norm,
                       self_attention=True)
        _set_attention(layer.attention, block.cross_attention, block.cross_attention_norm,
                       self_attention=False)
        _set_feedforward(layer.ffn, block)
    if model.norm_first:
        _set_layer_norm(decoder.layer_norm, model.decoder_final_norm)
    if model.output_projection is None:  # tied: logits = y·Eᵀ (+ b: Marian's bias)
        decoder.projection.weight = target_embeddings  # [V, D]
        if model.decoder_embedding.output_bias:
            decoder.projection.bias = _numpy(model.decoder_embedding.output_bias_weight)
    else:
        _set_linear(decoder.projection, _numpy(model.output_projection.kernel),
                    _bias(model.output_projection))

    # === Vocabularies and special tokens ===
    spec.register_source_vocabulary(list(source_tokenizer.vocabulary))
    spec.register_target_vocabulary(list(target_tokenizer.vocabulary))
    config = spec.config
    config.unk_token = RESERVED_TOKENS[UNK_ID]
    config.bos_token = RESERVED_TOKENS[START_ID]
    config.eos_token = RESERVED_TOKENS[END_ID]
    config.decoder_start_token = RESERVED_TOKENS[START_ID]
    config.add_source_bos = False
    config.add_source_eos = True  # the encoder reads "tokens [END]", as tokenize_with_end gives
    config.layer_norm_epsilon = float(model.layer_norm_epsilon)
    return spec


# What `overwrite=True` may replace: a converted model (CTranslate2's files).
CTRANSLATE2_LAYOUT = Layout("CTranslate2 model", required=("model.bin", "config.json"), allowed=(
    "shared_vocabulary.json", "shared_vocabulary.txt", "source_vocabulary.json",
    "source_vocabulary.txt", "target_vocabulary.json", "target_vocabulary.txt",
    "vocabulary.json", "vocabulary.txt"))


def export_ctranslate2(translator, output_dir, quantization=None, overwrite=False):
    """Converts a translator's trained `Transformer` and tokenizers into a
    CTranslate2 model directory (`Translator.export_ctranslate2`).

    The weights are mapped into CTranslate2's `TransformerSpec` (see the
    module docstring) and saved by CTranslate2's `Converter`, which
    validates the spec and quantizes the weights. The directory appears
    complete or not at all.

    Args:
        translator: a `keras_attention.Translator`: its model, and its
            tokenizers, whose tokens (by id) become CTranslate2's
            vocabularies. (CTranslate2 takes the decoding settings when it
            translates: `translate_with_ctranslate2`.)
        output_dir: the CTranslate2 model directory to write.
        quantization: None (the weights' float32) or a CTranslate2 weight
            type, e.g. `"int8"` (`QUANTIZATIONS`).
        overwrite: replace an existing `output_dir` that is a converted model
            (`CTRANSLATE2_LAYOUT`); a run directory or any other folder is
            never replaced.

    Returns:
        `output_dir`.

    Raises:
        ValueError: an option CTranslate2 cannot represent (named in the
            message), tokenizers that do not match the model, or an
            unknown `quantization`.
        FileExistsError: `output_dir` exists and `overwrite` is False, or it
            is not a converted model.

    Example:

    >>> export_ctranslate2(translator, "ct2_model", quantization="int8")
    >>> converted = ctranslate2.Translator("ct2_model", compute_type="int8")
    >>> translate_with_ctranslate2(converted, translator, ["The red book."])
    """
    ctranslate2 = _import_ctranslate2()
    from ctranslate2.converters import Converter
    from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES

    if quantization is not None and quantization not in ACCEPTED_MODEL_TYPES:
        raise ValueError(f"Unknown quantization={quantization!r}; CTranslate2 "
                         f"{ctranslate2.__version__} accepts {list(ACCEPTED_MODEL_TYPES)}.")
    output_dir = os.fspath(output_dir)
    # Before building the spec, which takes a while.
    check_replaceable(output_dir, overwrite, CTRANSLATE2_LAYOUT)
    _check_translator(translator)
    spec = build_spec(translator.model, translator.source_tokenizer,
                      translator.target_tokenizer)  # errors before any file

    class _SpecConverter(Converter):
        """CTranslate2's converter for an already filled spec."""

        def _load(self):
            return spec

    with atomic_directory(output_dir, ".ctranslate2-", overwrite, CTRANSLATE2_LAYOUT) as tmp:
        _SpecConverter().convert(tmp, quantization=quantization, force=True)
    return output_dir


def source_tokens(source_tokenizer, sentences, max_length):
    """What a converted model reads: per sentence, the token strings of our
    tokenizer's ids, cut to the first `max_length - 1` (the model appends
    `[END]`), as `tokenize_with_end` gives them to our encoder: its ids
    without the `[END]` (none for a blank sentence)."""
    import tensorflow as tf

    from keras_attention.data.tokenizers import tokenize_with_end

    vocabulary = source_tokenizer.vocabulary
    ids = tokenize_with_end(source_tokenizer, tf.constant(list(sentences), tf.string),
                            max_length)
    return [[vocabulary[i] for i in row[:-1]] for row in ids.to_list()]


# The converted models whose target vocabulary was found to be a tokenizer's.
_MATCHING_VOCABULARY = weakref.WeakKeyDictionary()


def _check_vocabulary(ct2_translator, target_tokenizer, max_length):
    """Raises ValueError unless the converted model knows every token of
    `target_tokenizer` (a model converted from another translator, whose
    tokens mean other things). Its vocabulary is not readable from a
    `ctranslate2.Translator`: `score_batch` is given our tokens, in chunks
    that fit its positions, and gives back each one it knows as it is
    (about 1 ms; once per model and tokenizer)."""
    checked = _MATCHING_VOCABULARY.setdefault(ct2_translator, weakref.WeakSet())
    if target_tokenizer in checked:
        return
    vocabulary = list(target_tokenizer.vocabulary)
    size = max(1, max_length - 2)  # [START] + chunk + [END] within max_length positions
    chunks = [vocabulary[i : i + size] for i in range(0, len(vocabulary), size)]
    results = ct2_translator.score_batch([[RESERVED_TOKENS[END_ID]]] * len(chunks), chunks,
                                         max_input_length=max_length)
    unknown = [token for chunk, result in zip(chunks, results)
               for token, known in zip(chunk, result.tokens) if token != known]
    if unknown:
        raise ValueError(
            f"The CTranslate2 model's vocabulary does not match the translator's: it lacks "
            f"{len(unknown)} of the translator's {len(vocabulary)} target tokens (e.g. "
            f"{unknown[0]!r}); it was converted from another translator. Pass the Translator "
            "it was converted from.")
    checked.add(target_tokenizer)


def translate_with_ctranslate2(ct2_translator, translator, sentences, batch_size=32):
    """Translates `sentences` (a list of str) with a converted model, with
    `translator`'s tokenizers and decoding settings.

    Tokenizes with the translator's source tokenizer (ids -> tokens, cut to
    their first `max_length - 1` tokens; the converted model appends
    `[END]`), runs `ct2_translator.translate_batch` (which sorts the
    sentences by length and batches `batch_size` of them) and detokenizes
    with its target tokenizer.

    Args:
        ct2_translator: a `ctranslate2.Translator` of a directory written by
            `export_ctranslate2`.
        translator: the `keras_attention.Translator` it was converted from
            (or one with other settings: `translator.with_settings(beam_size=1)`):
            its `beam_size`, `length_penalty` alpha and `max_output_length`
            (`[END]` included; default and at most the model's `max_length`)
            go to CTranslate2, which ranks finished hypotheses by
            log P(Y|X) / |Y|^alpha: our `length_penalty_form="power"` (a
            converted OPUS-MT model's); with the default GNMT form
            ((5 + |Y|) / 6)^alpha the ranking is the same only for
            alpha = 0. Its `early_stopping` is not
            CTranslate2's to choose: CTranslate2 stops as `True` does.
        sentences: a list of str (as `Translator.translate`: one string is
            refused, not read character by character; see `as_sentences`).
        batch_size: sentences per CTranslate2 batch.

    Returns:
        `(translations, scores)`: lists of str and float in the input order;
        the scores in our definition, log P(Y|X) / lp(Y) with the
        translator's `length_penalty_form` (|Y| counts `[END]`), converted
        from CTranslate2's. An empty source
        gives "" and 0.0 (as the SavedModel).
    """
    import tensorflow as tf

    _check_translator(translator)
    check_positive_int("batch_size", batch_size)
    sentences = as_sentences(sentences, "sentences")  # the check of every door
    if not sentences:
        return [], []
    settings, max_length = translator.settings, translator.model.max_length
    source_tokenizer, target_tokenizer = translator.source_tokenizer, translator.target_tokenizer
    alpha = settings.length_penalty
    _check_vocabulary(ct2_translator, target_tokenizer, max_length)
    results = ct2_translator.translate_batch(
        source_tokens(source_tokenizer, sentences, max_length), max_batch_size=batch_size,
        beam_size=settings.beam_size, length_penalty=alpha, max_input_length=max_length,
        max_decoding_length=settings.output_length(max_length), return_scores=True,
        return_end_token=True, **SEARCH_OPTIONS)
    target_ids = {token: i for i, token in enumerate(target_tokenizer.vocabulary)}
    rows, scores = [], []
    for result in results:
        hypothesis = result.hypotheses[0]
        unknown = next((t for t in hypothesis if t not in target_ids), None)
        if unknown is not None:
            raise ValueError(
                f"The CTranslate2 model generated the token {unknown!r}, which the translator's "
                f"target vocabulary ({len(target_ids)} tokens) does not have: the model's "
                "vocabulary does not match the translator's (it was converted from another "
                "translator). Pass the Translator it was converted from.")
        rows.append([target_ids[t] for t in hypothesis])
        length = len(hypothesis)  # |Y|, [END] included when generated
        if length == 0:  # an empty source, not run through the model
            scores.append(0.0)
            continue
        log_prob = result.scores[0] * length ** alpha
        scores.append(float(log_prob / length_penalty(length, alpha,
                                                      settings.length_penalty_form)))
    texts = target_tokenizer.detokenize(tf.ragged.constant(rows, dtype=tf.int32, ragged_rank=1))
    return [t.decode("utf-8") for t in texts.numpy()], scores
