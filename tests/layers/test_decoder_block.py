import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.layers import DecoderBlock, TokenAndPositionEmbedding
from tests import references
from tests.layer_test_case import assert_close, run_layer_test, to_numpy


def _data(rng, b=3, t=6, s=8, d=16):
    x = rng.normal(size=(b, t, d)).astype("float32")
    enc = rng.normal(size=(b, s, d)).astype("float32")
    dec_mask = np.ones((b, t), bool)
    dec_mask[1, 4:] = False
    enc_mask = np.ones((b, s), bool)
    enc_mask[0, 3:] = False
    enc_mask[2, 6:] = False
    return x, enc, dec_mask, enc_mask


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("num_key_value_heads", [None, 2])
def test_matches_numpy_reference(norm_first, num_key_value_heads):
    rng = np.random.default_rng(0)
    x, enc, dec_mask, enc_mask = _data(rng)
    block = DecoderBlock(4, 32, num_key_value_heads=num_key_value_heads, norm_first=norm_first)
    out = block(x, enc, decoder_padding_mask=dec_mask, encoder_padding_mask=enc_mask)
    assert_close(out, references.decoder_block(block, x, enc, dec_mask, enc_mask))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("num_key_value_heads", [None, 1])
def test_cached_decoding_equals_full_pass(norm_first, num_key_value_heads):
    rng = np.random.default_rng(1)
    x, enc, _, enc_mask = _data(rng)
    block = DecoderBlock(4, 32, num_key_value_heads=num_key_value_heads, norm_first=norm_first)
    full = block(x, enc, encoder_padding_mask=enc_mask)
    self_cache = block.initialize_self_attention_cache(3, 10)  # L > T
    cross_cache = block.compute_cross_attention_cache(enc)
    steps = []
    for i in range(x.shape[1]):
        out, (self_cache, same) = block.call_with_cache(
            x[:, i:i + 1], self_cache, i, cross_attention_cache=cross_cache,
            encoder_padding_mask=enc_mask,
        )
        assert same is cross_cache  # the precomputed one, passed through
        steps.append(to_numpy(out))
    assert_close(np.concatenate(steps, 1), full)
    assert self_cache[0].shape[1] == 10


def test_cached_call_computes_cross_cache_when_missing():
    rng = np.random.default_rng(2)
    x, enc, _, _ = _data(rng)
    block = DecoderBlock(4, 32)
    full = block(x, enc)
    cache = block.initialize_self_attention_cache(3, 6)
    out, (cache, cross) = block.call_with_cache(x[:, :1], cache, 0, encoder_sequence=enc)
    assert_close(out, to_numpy(full)[:, :1])
    assert_close(cross[0], block.compute_cross_attention_cache(enc)[0])


def test_implicit_keras_masks_equal_explicit_masks():
    dec_ids = np.array([[2, 3, 4, 0, 0], [5, 6, 7, 8, 9]])
    enc_ids = np.array([[1, 2, 3, 4, 0, 0, 0], [4, 5, 0, 0, 0, 0, 0]])
    dec_in, enc_in = keras.Input((5,), dtype="int32"), keras.Input((7,), dtype="int32")
    dec_emb = TokenAndPositionEmbedding(10, 8, 16, mask_zero=True)
    enc_emb = TokenAndPositionEmbedding(10, 8, 16, mask_zero=True)
    block = DecoderBlock(4, 32)
    model = keras.Model([dec_in, enc_in], block(dec_emb(dec_in), enc_emb(enc_in)))
    implicit = to_numpy(model([dec_ids, enc_ids]))
    explicit = to_numpy(block(
        ops.convert_to_tensor(to_numpy(dec_emb(dec_ids))),
        ops.convert_to_tensor(to_numpy(enc_emb(enc_ids))),
        decoder_padding_mask=dec_ids != 0,
        encoder_padding_mask=enc_ids != 0,
    ))
    np.testing.assert_allclose(implicit, explicit, rtol=1e-5, atol=1e-5)
    # Without the masks the outputs differ: the masks were really used.
    unmasked = to_numpy(block(
        ops.convert_to_tensor(to_numpy(dec_emb(dec_ids))),
        ops.convert_to_tensor(to_numpy(enc_emb(enc_ids)))))
    assert not np.allclose(unmasked[0, :3], explicit[0, :3], atol=1e-4)


def test_decoder_mask_propagates():
    ids = np.array([[2, 3, 0], [4, 0, 0]])
    inp = keras.Input((3,), dtype="int32")
    x = TokenAndPositionEmbedding(10, 8, 16, mask_zero=True)(inp)
    y = DecoderBlock(4, 32)(x, x)
    pooled = keras.layers.GlobalAveragePooling1D()(y)
    model = keras.Model(inp, [y, pooled])
    out, avg = (to_numpy(t) for t in model(ids))
    np.testing.assert_allclose(avg[1], out[1, 0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("policy,dtype",
                         [("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")])
def test_mixed_precision_mostly_padding(policy, dtype):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 16, 32)).astype("float32")
    enc = rng.normal(size=(4, 12, 32)).astype("float32")
    dec_mask = np.zeros((4, 16), bool)
    dec_mask[0] = True
    dec_mask[1:, :2] = True
    enc_mask = np.zeros((4, 12), bool)
    enc_mask[:, :1] = True
    ref = DecoderBlock(4, 64)
    mixed = DecoderBlock(4, 64, dtype=policy)
    ref(x, enc)
    mixed(x, enc)
    for s, d in zip(ref.weights, mixed.weights):
        d.assign(s)
    kwargs = dict(decoder_padding_mask=dec_mask, encoder_padding_mask=enc_mask)
    expected = to_numpy(ref(x, enc, **kwargs))
    out = mixed(x, enc, **kwargs)
    assert keras.backend.standardize_dtype(out.dtype) == dtype
    out = to_numpy(out)
    assert np.all(np.isfinite(out))
    assert_close(out[dec_mask], expected[dec_mask], dtype)


@pytest.mark.backend_independent  # plain Python (checks, configs): the same on JAX
def test_bad_arguments():
    with pytest.raises(ValueError, match="num_heads=0"):
        DecoderBlock(0, 32)
    with pytest.raises(ValueError, match="intermediate_dim=-1"):
        DecoderBlock(4, -1)
    x = np.zeros((2, 3, 10), "float32")
    with pytest.raises(ValueError, match=r"num_heads`=4.*D=10"):
        DecoderBlock(4, 8)(x, x)
    block = DecoderBlock(2, 8)
    block(x, x)  # built
    with pytest.raises(ValueError, match="received neither"):
        block.call_with_cache(x, block.initialize_self_attention_cache(2, 4), 0)


def test_layer_harness(tmp_path):
    rng = np.random.default_rng(4)
    x, enc, _, _ = _data(rng)
    run_layer_test(
        DecoderBlock,
        {"num_heads": 4, "intermediate_dim": 32, "dropout": 0.1, "norm_first": True,
         "num_key_value_heads": 2, "activation": "gelu", "seed": 5},
        {"decoder_sequence": x, "encoder_sequence": enc},
        expected_output_shape=x.shape,
        tmp_path=tmp_path,
    )


def test_attention_masks_reach_self_and_cross_attention():
    """`decoder_attention_mask` / `encoder_attention_mask` (keras-hub's
    names; packed rows' `segment_mask`): as key masks they give the padding
    masks' result (the NumPy reference), and a mask on one query changes
    that query's row only."""
    rng = np.random.default_rng(3)
    x, enc, dec_mask, enc_mask = _data(rng)
    block = DecoderBlock(4, 32)
    plain = to_numpy(block(x, enc))  # builds the weights
    reference = references.decoder_block(block, x, enc, dec_mask, enc_mask)
    t, s = x.shape[1], enc.shape[1]
    out = block(x, enc, decoder_padding_mask=dec_mask,
                decoder_attention_mask=np.repeat(dec_mask[:, None, :], t, 1),
                encoder_attention_mask=np.repeat(enc_mask[:, None, :], t, 1))
    assert_close(out, reference)
    blocked = np.ones((x.shape[0], t, t), bool)
    blocked[:, 2, 0] = False  # query 2 may not read key 0
    changed = to_numpy(block(x, enc, decoder_attention_mask=blocked))
    cross = np.ones((x.shape[0], t, s), bool)
    cross[:, 4, :3] = False
    crossed = to_numpy(block(x, enc, encoder_attention_mask=cross))
    for rows, row in ((changed, 2), (crossed, 4)):
        others = [i for i in range(t) if i != row]
        np.testing.assert_array_equal(rows[:, others], plain[:, others])
        assert not np.allclose(rows[:, row], plain[:, row])
