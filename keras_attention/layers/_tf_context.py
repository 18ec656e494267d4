"""What the TensorFlow graph being traced is compiled for."""


def in_xla_context():
    """True while TensorFlow traces a function for XLA (`jit_compile=True`,
    also when an outer function is the one compiled); False in eager mode and
    in plain graphs. Only for the TensorFlow backend (it imports TensorFlow)."""
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util

    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())
