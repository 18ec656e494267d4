"""What the TensorFlow graph being traced is compiled for."""


def in_xla_context():
    """True while TensorFlow traces a function for XLA (`jit_compile=True`,
    also when an outer function is the one compiled); False in eager mode and
    in plain graphs. Only for the TensorFlow backend (it imports TensorFlow).

    Asked through `tf.__internal__.get_enclosing_xla_context`, the exported
    function TensorFlow offers its own Keras for this (TensorFlow has no
    other way to tell; its `tensorflow.python` modules are not an API)."""
    import tensorflow as tf

    return tf.__internal__.get_enclosing_xla_context() is not None
