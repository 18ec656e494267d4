"""keras-hub classes for the Transformer translator (keras-hub's model
layout: backbone, task, preprocessor, tokenizer, sampler).

`import keras_attention` imports this package on the TensorFlow backend
when keras-hub is installed, so that keras-hub's own `from_preset` finds
these classes: `keras_hub.models.Seq2SeqLM.from_preset(dir)`,
`keras_hub.models.Backbone.from_preset(dir)` and
`keras_hub.tokenizers.Tokenizer.from_preset(dir)` load a preset that the
recipe or `Translator.save_to_preset` wrote.
"""

from keras_attention.hub.search_sampler import SearchSampler
from keras_attention.hub.transformer_backbone import TransformerBackbone
from keras_attention.hub.transformer_seq_2_seq_lm import TransformerSeq2SeqLM
from keras_attention.hub.transformer_seq_2_seq_lm_preprocessor import (
    TransformerSeq2SeqLMPreprocessor,
)
from keras_attention.hub.transformer_tokenizer import TransformerTokenizer

__all__ = ["SearchSampler", "TransformerBackbone", "TransformerSeq2SeqLM",
           "TransformerSeq2SeqLMPreprocessor", "TransformerTokenizer"]
