"""JAX-only helpers (imported only on the JAX backend)."""

import jax
import keras


def jit_reading(fn, variables):
    """`fn` as one `jax.jit` program per input shape that reads `variables`
    (Keras variables) as arguments, not as constants: a jitted closure
    compiles their values in and keeps computing with them after the
    variables change (a training run's validation, `load_weights`)."""
    variables = list(variables)

    @jax.jit
    def program(values, *args):
        with keras.StatelessScope(state_mapping=list(zip(variables, values))):
            return fn(*args)

    return lambda *args: program([v.value for v in variables], *args)
