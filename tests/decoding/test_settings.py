"""`DecodingSettings`: each decoding setting's one default and one
validation; `length_penalty`: the one length penalty, in its two forms."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attention.decoding import DEFAULTS, DecodingSettings, gnmt_length_penalty, length_penalty


@pytest.mark.backend_independent
def test_defaults_and_types():
    assert DEFAULTS == DecodingSettings()
    assert DEFAULTS.to_dict() == {"beam_size": 4, "length_penalty": 0.6,
                                  "max_output_length": None, "early_stopping": False,
                                  "length_penalty_form": "gnmt"}
    settings = DecodingSettings(np.int64(8), 1, np.int32(20), True, "power")
    assert settings.to_dict() == {"beam_size": 8, "length_penalty": 1.0,
                                  "max_output_length": 20, "early_stopping": True,
                                  "length_penalty_form": "power"}
    assert settings.search_options() == {"beam_size": 8, "length_penalty": 1.0,
                                         "early_stopping": True, "length_penalty_form": "power"}
    assert type(settings.beam_size) is int and type(settings.length_penalty) is float
    assert settings.output_length(64) == 20 and settings.output_length(16) == 16
    assert DEFAULTS.output_length(64) == 64
    with pytest.raises(AttributeError):
        settings.beam_size = 2  # frozen: `replace` gives another


@pytest.mark.backend_independent
@pytest.mark.parametrize("values, match", [
    ({"beam_size": 0}, "`beam_size` must be a positive integer; received beam_size=0"),
    ({"beam_size": True}, "`beam_size` must be a positive integer"),
    ({"beam_size": 2.0}, "`beam_size` must be a positive integer"),
    ({"length_penalty": -0.1}, "`length_penalty` must be a finite number >= 0"),
    ({"length_penalty": float("nan")}, "`length_penalty` must be a finite number >= 0"),
    ({"max_output_length": 0}, "`max_output_length` must be a positive integer"),
    ({"early_stopping": "sometimes"}, '`early_stopping` must be "never", True or False'),
    ({"early_stopping": None}, '`early_stopping` must be "never", True or False'),
    ({"length_penalty_form": "GNMT"}, r"`length_penalty_form` must be one of \['gnmt', "
                                      r"'power'\]; received 'GNMT'"),
])
def test_each_setting_has_one_validation(values, match):
    with pytest.raises(ValueError, match=match):
        DecodingSettings(**values)
    with pytest.raises(ValueError, match=match):
        DEFAULTS.replace(**values)
    # The same check, naming command-line flags.
    name = next(iter(values))
    with pytest.raises(ValueError, match=f"--{name.replace('_', '-')} must be"):
        DecodingSettings.check(values, lambda n: "--" + n.replace("_", "-"))


@pytest.mark.backend_independent
def test_replace_and_from_dict_name_what_is_unknown():
    assert DEFAULTS.replace() is DEFAULTS
    assert DEFAULTS.replace(beam_size=2, max_output_length=None).beam_size == 2
    with pytest.raises(TypeError, match=r"Unknown decoding setting\(s\) \['beams'\]; expected "
                                        r"some of \['beam_size'"):
        DEFAULTS.replace(beams=2)
    assert DecodingSettings.from_dict({"beam_size": 2}) == DecodingSettings(beam_size=2)
    with pytest.raises(ValueError, match=r"x.json has unknown decoding settings \['top_k'\]"):
        DecodingSettings.from_dict({"top_k": 5}, "x.json")
    with pytest.raises(ValueError, match="x.json must be a JSON object"):
        DecodingSettings.from_dict([4], "x.json")


def test_the_length_penalty_is_the_gnmt_formula_for_numbers_and_tensors():
    lengths = np.arange(1, 65)
    for alpha in (0.0, 0.6, 1.0, 2.0):
        expected = ((5.0 + lengths) / 6.0) ** alpha  # Wu et al. (2016), eq. 14
        np.testing.assert_allclose(gnmt_length_penalty(lengths, alpha), expected, rtol=1e-12)
        assert gnmt_length_penalty(7, alpha) == pytest.approx(((5.0 + 7) / 6.0) ** alpha)
        on_tensors = gnmt_length_penalty(ops.convert_to_tensor(lengths, "int32"), alpha)
        assert keras.backend.standardize_dtype(on_tensors.dtype) == "float32"
        np.testing.assert_allclose(ops.convert_to_numpy(on_tensors), expected, rtol=1e-6)


def test_the_power_form_is_marians_formula_for_numbers_and_tensors():
    """lp(Y) = |Y|^alpha: Marian's, fairseq's, Hugging Face's and
    CTranslate2's (`sum_logprobs / len ** length_penalty`)."""
    lengths = np.arange(1, 65)
    for alpha in (0.0, 0.6, 1.0, 2.0):
        expected = lengths.astype(np.float64) ** alpha
        np.testing.assert_allclose(length_penalty(lengths, alpha, "power"), expected,
                                   rtol=1e-12)
        np.testing.assert_allclose(length_penalty(lengths, alpha), gnmt_length_penalty(
            lengths, alpha), rtol=1e-12)  # GNMT's is the default form
        on_tensors = length_penalty(ops.convert_to_tensor(lengths, "int32"), alpha, "power")
        assert keras.backend.standardize_dtype(on_tensors.dtype) == "float32"
        np.testing.assert_allclose(ops.convert_to_numpy(on_tensors), expected, rtol=1e-6)
    with pytest.raises(ValueError, match="`length_penalty_form` must be one of"):
        length_penalty(3, 1.0, "linear")
