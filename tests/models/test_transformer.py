import importlib
import re
import warnings

import keras
import numpy as np
import pytest

from keras_attention.models import Transformer, transformer
from keras_attention.models.precision import sublayers
from tests import references
from tests.layer_test_case import assert_close, to_numpy

ENC = np.array([[5, 6, 7, 0, 0], [8, 9, 10, 11, 12], [13, 14, 0, 0, 0]], "int32")
DEC = np.array([[1, 5, 6, 7, 0], [1, 2, 3, 4, 5], [1, 9, 0, 0, 0]], "int32")
INPUTS = {"encoder_tokens": ENC, "decoder_tokens": DEC}


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        # The quick tier saves and loads the default model; these are slow.
        pytest.param({"norm_first": True, "tie_output_embeddings": False,
                      "position_encoding": "learned"}, marks=pytest.mark.slow),
        pytest.param({"share_encoder_decoder_embeddings": True, "num_key_value_heads": 2},
                     marks=pytest.mark.slow),
        # Marian's (OPUS-MT) options: keras_attention.convert.marian.
        pytest.param({"share_encoder_decoder_embeddings": True, "activation": "silu",
                      "sinusoidal_layout": "concatenated", "output_bias": True,
                      "scale_embeddings": False}, marks=pytest.mark.slow),
    ],
)
def test_keras_round_trip_reproduces_logits_exactly(overrides, tmp_path):
    model = Transformer.from_preset("tiny", **overrides)
    logits = model(INPUTS)
    assert logits.shape == (3, 5, 64)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_array_equal(to_numpy(restored(INPUTS)), to_numpy(logits))
    assert restored.get_config() == model.get_config()


def test_attention_and_activation_dropout_reach_every_block():
    model = Transformer.from_preset("tiny", dropout=0.1, attention_dropout=0.25,
                                    activation_dropout=0.2)
    blocks = model.encoder_blocks + model.decoder_blocks
    attentions = [b.self_attention for b in blocks] + [b.cross_attention
                                                       for b in model.decoder_blocks]
    assert {a.dropout for a in attentions} == {0.25}
    assert {b.feedforward_activation_dropout.rate for b in blocks} == {0.2}
    assert {b.feedforward_dropout.rate for b in blocks} == {0.1}
    restored = Transformer.from_config(model.get_config())
    assert (restored.attention_dropout, restored.activation_dropout) == (0.25, 0.2)
    # Dropout changes training passes only.
    np.testing.assert_array_equal(to_numpy(restored(INPUTS)), to_numpy(restored(INPUTS)))


def test_output_bias_defaults_and_configs_saved_before_it():
    """`output_bias=None`: a bias on the separate projection, none on the tied
    one (the models saved before the option, whose configs lack the keys
    `scale_embeddings`, `sinusoidal_layout` and `output_bias`, load as they
    were); `True` on a tied projection adds one `[V]` weight."""
    for tie, has_bias in ((True, False), (False, True)):
        model = Transformer.from_preset("tiny", tie_output_embeddings=tie)
        assert model.output_bias is has_bias
        config = model.get_config()
        old = {k: v for k, v in config.items()
               if k not in ("scale_embeddings", "sinusoidal_layout", "output_bias")}
        assert Transformer.from_config(old).get_config() == config
    plain = Transformer.from_preset("tiny")
    biased = Transformer.from_preset("tiny", output_bias=True)
    assert biased.count_params() == plain.count_params() + 64
    assert [w.path for w in biased.weights if "output_bias" in w.path] == [
        "decoder_embedding/output_bias"]
    with pytest.raises(TypeError, match="`output_bias` must be True or False; received 'yes'"):
        Transformer.from_preset("tiny", output_bias="yes")


def test_readable_layer_names_and_weight_sharing():
    model = Transformer.from_preset("tiny", share_encoder_decoder_embeddings=True)
    names = {layer.name for layer in model.layers}
    assert {"encoder_embedding", "encoder_block_0", "encoder_block_1",
            "decoder_block_0", "decoder_block_1", "logits"} <= names
    assert model.decoder_embedding is model.encoder_embedding
    untied = Transformer.from_preset("tiny", tie_output_embeddings=False)
    # Tying removes the V x D output projection (and its bias).
    assert untied.count_params() - Transformer.from_preset("tiny").count_params() == 32 * 64 + 64
    shared = Transformer.from_preset("tiny", share_encoder_decoder_embeddings=True)
    assert Transformer.from_preset("tiny").count_params() - shared.count_params() == 64 * 32


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
def test_presets_match_the_papers():
    presets = Transformer.presets()
    assert set(presets) == {"tiny", "tutorial", "base", "big"}
    tut = presets["tutorial"]
    assert (tut["num_encoder_layers"], tut["d_model"], tut["intermediate_dim"],
            tut["num_heads"]) == (4, 128, 512, 8)
    base, big = presets["base"], presets["big"]
    assert (base["num_encoder_layers"], base["d_model"], base["intermediate_dim"],
            base["num_heads"], base["dropout"]) == (6, 512, 2048, 8, 0.1)
    assert (big["d_model"], big["intermediate_dim"], big["num_heads"],
            big["dropout"]) == (1024, 4096, 16, 0.3)
    model = Transformer.from_preset("tutorial", encoder_vocabulary_size=100,
                                    decoder_vocabulary_size=120)
    assert model.decoder_vocabulary_size == 120 and model.num_decoder_layers == 4


def test_padding_does_not_change_real_positions():
    model = Transformer.from_preset("tiny")
    short = model({"encoder_tokens": ENC[:1, :3], "decoder_tokens": DEC[:1, :4]})
    padded = model(INPUTS)
    assert_close(to_numpy(padded)[0, :4], to_numpy(short)[0],
                 msg="padding leaked into real positions")


def test_cached_steps_equal_the_full_pass():
    model = Transformer.from_preset("tiny", norm_first=True, num_key_value_heads=1)
    full = to_numpy(model(INPUTS))
    encoded, mask = model.encode(ENC)
    cache = model.initialize_cache(encoded, 5)
    for i in range(5):
        logits, cache = model.decode_step(DEC[:, i:i + 1], i, cache, mask)
        real = DEC[:, i] != 0
        assert_close(to_numpy(logits)[real], full[real, i])


def test_mixed_bfloat16_policy_is_kept_and_logits_are_float32(tmp_path):
    model = Transformer.from_preset("tiny", dtype="mixed_bfloat16")
    logits = model(INPUTS)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    assert model.encoder_blocks[0].compute_dtype == "bfloat16"
    path = str(tmp_path / "m.keras")
    model.save(path)
    assert keras.saving.load_model(path).decoder_blocks[0].compute_dtype == "bfloat16"


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
@pytest.mark.parametrize(
    "overrides,match",
    [
        ({"num_heads": 5}, "num_heads=5"),
        ({"d_model": 0}, "d_model=0"),
        ({"max_length": -1}, "max_length=-1"),
        ({"share_encoder_decoder_embeddings": True, "decoder_vocabulary_size": 10},
         "decoder_vocabulary_size=10"),
        ({"position_encoding": "rotary"}, "rotary"),
        ({"sinusoidal_layout": "halves"}, "'halves'"),
    ],
)
def test_bad_arguments(overrides, match):
    with pytest.raises(ValueError, match=match):
        Transformer.from_preset("tiny", **overrides)
    with pytest.raises(ValueError, match="huge"):
        Transformer.from_preset("huge")


def test_attention_scores_of_every_block():
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=20, decoder_vocabulary_size=20)
    enc = np.array([[5, 6, 7, 3, 0], [8, 3, 0, 0, 0]], "int32")  # 0 = padding
    dec = np.array([[2, 9, 10, 11], [2, 12, 0, 0]], "int32")
    scores = model.attention_scores(enc, dec)
    assert [len(scores[k]) for k in ("encoder_self", "decoder_self", "cross")] == [2, 2, 2]
    cross = to_numpy(scores["cross"][-1])  # [B, N, T, S]
    self_attention = to_numpy(scores["decoder_self"][0])  # [B, N, T, T]
    assert cross.shape == (2, 4, 4, 5) and to_numpy(scores["encoder_self"][0]).shape == (2, 4, 5, 5)
    np.testing.assert_allclose(cross[0].sum(-1), 1.0, atol=1e-5)
    assert np.all(cross[0, :, :, 4] == 0) and np.all(cross[1, :, :, 2:] == 0)  # padded keys
    np.testing.assert_allclose(cross[1, :, :2].sum(-1), 1.0, atol=1e-5)
    assert np.all(cross[1, :, 2:] == 0)  # padded queries give zero rows
    np.testing.assert_allclose(np.triu(self_attention[0], k=1), 0.0, atol=1e-7)  # causal


@pytest.mark.parametrize("norm_first", [False, True])
def test_attention_details_are_those_of_the_pass(norm_first):
    """`attention_details`: the same weights as `attention_scores`, the
    logits of the model's own call, and each block's projections recombine
    into its weights and head outputs."""
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=20,
                                    decoder_vocabulary_size=20, norm_first=norm_first)
    enc = np.array([[5, 6, 7, 3, 0], [8, 3, 0, 0, 0]], "int32")
    dec = np.array([[2, 9, 10, 11], [2, 12, 0, 0]], "int32")
    details = model.attention_details(enc, dec)
    scores = model.attention_scores(enc, dec)
    for kind in ("encoder_self", "decoder_self", "cross"):
        assert len(details[kind]) == len(scores[kind]) == 2
        for block, weights in zip(details[kind], scores[kind]):
            np.testing.assert_array_equal(to_numpy(block["weights"]), to_numpy(weights))
            logits = to_numpy(block["dot_products"]) * block["scale"]
            allowed = np.broadcast_to(to_numpy(block["mask"]).astype(bool), logits.shape)
            _, expected = references.attention(logits, np.eye(logits.shape[-1]),
                                               np.eye(logits.shape[-1]), allowed, scale=1.0)
            assert_close(block["weights"], expected)
            assert_close(block["outputs"], to_numpy(block["weights"]) @ to_numpy(block["value"]))
    assert np.all(np.triu(to_numpy(details["decoder_self"][0]["mask"])[0, 0], k=1) == 0)
    assert_close(details["logits"], model({"encoder_tokens": enc, "decoder_tokens": dec}))


def _seed_states(model):
    """The dropout layers' random-generator states (to replay the same masks)."""
    states = [v for v in model.non_trainable_variables if "seed_generator" in v.path]
    return states, [keras.ops.convert_to_numpy(v) for v in states]


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encode_and_decode_full_equal_the_functional_graph(training, norm_first):
    """`encode` + `decode_full` run the functional graph's passes: the same
    encoder outputs and logits, with dropout too (the same seeds replayed)."""
    model = Transformer.from_preset("tiny", dropout=0.3, norm_first=norm_first,
                                    tie_output_embeddings=not norm_first)
    encoder_output = (model.encoder_final_norm or model.encoder_blocks[-1]).output
    graph = keras.Model(model.inputs, [encoder_output, model.output])
    states, values = _seed_states(model)
    assert len(states) >= 2 + 3 * 2 + 4 * 2  # embedding, attention and residual dropouts
    x_graph, logits_graph = graph(INPUTS, training=training)
    for state, value in zip(states, values):
        state.assign(value)
    x, mask = model.encode(ENC, training=training)
    logits = model.decode_full(DEC, x, mask, training=training)
    assert_close(to_numpy(x), to_numpy(x_graph))
    assert_close(to_numpy(logits), to_numpy(logits_graph))
    if training:  # dropout did act: a second pass draws other masks
        again = model.decode_full(DEC, x, mask, training=True)
        assert np.abs(to_numpy(again) - to_numpy(logits)).max() > 1e-3


def test_attention_scores_are_those_of_the_functional_graph():
    """Each block's attention, recomputed from the functional graph's own
    input to that block, equals `attention_scores`."""
    from keras_attention.layers import padding_mask

    model = Transformer.from_preset("tiny", norm_first=True)
    inputs_of = [model.encoder_embedding_dropout.output] + [
        b.output for b in model.encoder_blocks[:-1]]
    decoder_inputs_of = [model.decoder_embedding_dropout.output] + [
        b.output for b in model.decoder_blocks[:-1]]
    encoder_output = model.encoder_final_norm.output
    graph = keras.Model(model.inputs, [inputs_of, decoder_inputs_of, encoder_output])
    block_inputs, decoder_block_inputs, x = graph(INPUTS)
    scores = model.attention_scores(ENC, DEC)
    enc_mask, dec_mask = padding_mask(ENC), padding_mask(DEC)
    for block, inputs, expected in zip(model.encoder_blocks, block_inputs, scores["encoder_self"]):
        _, reference = block(inputs, padding_mask=enc_mask, return_attention_scores=True)
        assert_close(to_numpy(expected), to_numpy(reference))
    for i, (block, inputs) in enumerate(zip(model.decoder_blocks, decoder_block_inputs)):
        _, (self_reference, cross_reference) = block(
            inputs, x, decoder_padding_mask=dec_mask, encoder_padding_mask=enc_mask,
            return_attention_scores=True)
        assert_close(to_numpy(scores["decoder_self"][i]), to_numpy(self_reference))
        assert_close(to_numpy(scores["cross"][i]), to_numpy(cross_reference))


@pytest.mark.slow  # builds and quantizes two models
@pytest.mark.parametrize("tie_output_embeddings", [False, True])
def test_int8_quantization_covers_every_kernel_quietly(tie_output_embeddings,
                                                       no_gc_per_quantized_layer):
    """`quantize("int8")` quantizes every layer with a kernel: the attention
    and feed-forward projections, the output projection (a `Dense` subclass,
    which Keras leaves out unless it says its quantization is valid) and the
    embeddings, with no warning; the logits stay within int8's rounding of
    the float ones (per-channel abs-max: a few % of their range)."""
    import warnings

    model = Transformer.from_preset("tiny", encoder_vocabulary_size=100,
                                    decoder_vocabulary_size=120, max_length=16,
                                    num_encoder_layers=1, num_decoder_layers=1,
                                    tie_output_embeddings=tie_output_embeddings)
    inputs = {"encoder_tokens": np.array([[5, 6, 7, 3, 0], [8, 9, 3, 0, 0]], "int32"),
              "decoder_tokens": np.array([[2, 8, 9, 0], [2, 11, 0, 0]], "int32")}
    reference = to_numpy(model(inputs))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.quantize("int8")
    assert [str(w.message) for w in caught] == []
    kernels = [layer for layer in sublayers(model)
               if isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense,
                                     keras.layers.Embedding))]
    assert {layer.quantization_mode for layer in kernels} == {"int8"}
    names = {type(layer).__name__ for layer in kernels}
    assert names == ({"Dense", "EinsumDense", "Embedding"} | (
        set() if tie_output_embeddings else {"OutputProjection"}))
    # 4 projections per attention layer, 2 feed-forward layers per block, embeddings
    blocks, attention = 1 + 1, 1 + 2 * 1
    assert len(kernels) == 4 * attention + 2 * blocks + 2 + (0 if tie_output_embeddings else 1)
    logits = to_numpy(model(inputs))
    assert np.max(np.abs(logits - reference)) <= 0.05 * np.max(np.abs(reference))


def _packed_row(pairs):
    """One packed row of `pairs` `(source ids, target ids)`, by hand (as
    `keras_attention.data.pack_pairs` lays it out), and each target's slice."""
    length = max(sum(len(s) for s, _ in pairs), sum(len(t) for _, t in pairs))
    row = {key: np.zeros((1, length), "int32") for key in (
        "encoder_tokens", "decoder_tokens", "encoder_segment_ids", "decoder_segment_ids",
        "encoder_positions", "decoder_positions")}
    where, at = [], [0, 0]
    for segment, pair in enumerate(pairs, start=1):
        for i, (side, ids) in enumerate(zip(("encoder", "decoder"), pair)):
            span = slice(at[i], at[i] + len(ids))
            row[f"{side}_tokens"][0, span] = ids
            row[f"{side}_segment_ids"][0, span] = segment
            row[f"{side}_positions"][0, span] = np.arange(len(ids))
            at[i] += len(ids)
        where.append(span)  # the target's slice
    return row, where


@pytest.mark.parametrize("position_encoding", ["sinusoidal", "learned"])
def test_packed_pairs_get_their_own_logits_and_never_their_neighbours(position_encoding):
    """A packed row (block-diagonal masks, positions restarting per pair):
    each pair's logits are those it gets alone; changing one pair changes
    its own logits and no other pair's, bit for bit."""
    keras.utils.set_random_seed(3)
    model = Transformer.from_preset("tiny", encoder_vocabulary_size=20,
                                    decoder_vocabulary_size=20, dropout=0.0,
                                    position_encoding=position_encoding)
    rng = np.random.default_rng(0)
    pairs = [(rng.integers(4, 20, n), rng.integers(4, 20, m)) for n, m in ((5, 4), (3, 6), (4, 2))]
    row, where = _packed_row(pairs)
    logits = to_numpy(model(row))[0]
    for (source, target), span in zip(pairs, where):
        alone = model({"encoder_tokens": source[None], "decoder_tokens": target[None]})
        assert_close(logits[span], to_numpy(alone)[0])
    changed = list(pairs)
    changed[1] = (rng.integers(4, 20, 3), rng.integers(4, 20, 6))
    other = to_numpy(model(_packed_row(changed)[0]))[0]
    for i, span in enumerate(where):
        assert np.array_equal(other[span], logits[span]) == (i != 1), i
    partial = {k: v for k, v in row.items() if k != "decoder_positions"}
    with pytest.raises(ValueError, match="Packed rows need all of .* received only"):
        model(partial)


def test_the_graph_names_every_layer():
    """The functional graph has no anonymous operation layers (`not_equal_4`):
    the padding masks are named layers, so `summary()` reads as the model."""
    model = Transformer.from_preset("tiny", num_encoder_layers=1, num_decoder_layers=1)
    names = [layer.name for layer in model.layers]
    assert "encoder_padding_mask" in names and "decoder_padding_mask" in names
    assert not [n for n in names if n.startswith(("not_equal", "where", "cast"))], names


@pytest.mark.backend_independent  # plain Python (module attributes): the same on JAX
@pytest.mark.parametrize("name, new_place", [
    ("PACKING_KEYS", "keras_attention.models.passes"),
    ("PaddingMask", "keras_attention.models.passes"),
    ("quantizable_layer", "keras_attention.models.precision"),
    ("quantize_quietly", "keras_attention.models.precision"),
    ("quantization_of", "keras_attention.models.precision"),
    ("with_dtype_policy", "keras_attention.models.precision"),
])
def test_moved_names_still_import_from_transformer_with_a_warning(name, new_place):
    """The names that moved out of `transformer.py` keep working there for
    one release: the same objects, with a DeprecationWarning naming the new
    place; the module's own names (`PRESETS`) do not warn."""
    with pytest.warns(DeprecationWarning, match=rf"moved to {re.escape(new_place)}\.{name};"):
        old = getattr(transformer, name)
    assert old is getattr(importlib.import_module(new_place), name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert transformer.PRESETS == Transformer.presets()
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        getattr(transformer, "no_such_name")
