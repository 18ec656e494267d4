"""`TransformerBackbone`: our `Transformer` as a keras-hub `Backbone`.

It *is* a `keras_attention.models.Transformer` (the same functional graph,
layers, weights, cache and decoding methods, built by the same constructor)
and a `keras_hub.models.Backbone`, so `keras_hub.models.Backbone.from_preset`
loads it, `enable_lora` finds its query and value projections, and every
part of this package that takes a Transformer takes it.
"""

import keras
import keras_hub

from keras_attention.models import Transformer
from keras_attention.presets import preset_path


@keras.saving.register_keras_serializable(package="keras_attention")
class TransformerBackbone(Transformer, keras_hub.models.Backbone):
    """The encoder-decoder Transformer as a keras-hub `Backbone`.

    The constructor's arguments, inputs and outputs are
    `keras_attention.models.Transformer`'s: `{"encoder_tokens": [B, S],
    "decoder_tokens": [B, T]}` int ids (0 is padding) to float32 logits
    `[B, T, V]`; `TransformerSeq2SeqLM` is its keras-hub task.

    Example:

    >>> backbone = TransformerBackbone.from_preset("tatoeba_en_es")  # shipped, trained
    >>> backbone = TransformerBackbone.from_preset("runs/translation/preset")
    >>> backbone = TransformerBackbone.from_preset("tiny", encoder_vocabulary_size=100,
    ...                                            decoder_vocabulary_size=100)  # untrained
    >>> backbone = TransformerBackbone.from_transformer(model)  # a trained Transformer
    """

    @classmethod
    def from_preset(cls, preset, *args, **kwargs):
        """An architecture of `Transformer.presets()` (`"tiny"`, `"tutorial"`,
        `"base"`, `"big"`: untrained; `kwargs` replace its arguments), or
        keras-hub's `Backbone.from_preset`: a preset folder, a `kaggle://` or
        `hf://` handle, or the name of a translator shipped with the package
        (`keras_attention.presets`)."""
        if preset in Transformer.presets():
            return super().from_preset(preset, *args, **kwargs)
        return keras_hub.models.Backbone.from_preset.__func__(cls, preset_path(preset), *args,
                                                               **kwargs)

    def get_config(self):
        """The `Transformer`'s config, with a mixed policy saved as its
        variables' dtype: keras-hub's `from_preset` reads a saved policy's name
        with `keras.backend.standardize_dtype`, which knows `"float32"` but
        not `"mixed_bfloat16"` (`ValueError: Invalid dtype`), and then runs
        a float preset in the caller's policy (`keras.config.dtype_policy()`,
        or `from_preset(..., dtype=...)`). The weights are the same: a mixed
        policy keeps them in float32. A quantized model's `DTypePolicyMap` is
        kept, and keras-hub loads it as saved."""
        config = super().get_config()
        policy = self.dtype_policy
        if (not isinstance(policy, keras.dtype_policies.DTypePolicyMap)
                and policy.compute_dtype != policy.variable_dtype
                and config["dtype"]["class_name"] == "DTypePolicy"):
            config["dtype"] = keras.dtype_policies.serialize(
                keras.dtype_policies.DTypePolicy(policy.variable_dtype))
        return config

    @classmethod
    def from_transformer(cls, model):
        """This class with `model`'s config and a copy of its weights (`model`
        itself when it already is one)."""
        if isinstance(model, cls):
            return model
        if not isinstance(model, Transformer):
            raise TypeError("`model` must be a keras_attention Transformer; received "
                            f"{type(model).__name__}.")
        backbone = cls.from_config(model.get_config())
        backbone.set_weights(model.get_weights())
        return backbone

