"""The Transformer's precision: Keras' int8 (and other) quantization on the
layers that have a kernel, the quantization mode a model holds and how its
config saves it, a copy of a model under another dtype policy, and a
twin of a model under another policy that computes with the model's own
weights (`stateless_twin`, `reading`)."""

import threading
import warnings

import keras


def quantizable_layer(layer):
    """Whether Keras' `quantize` has something to do on `layer`: the layers
    with a kernel (every attention and feed-forward projection, the output
    projection, the embeddings). The others (dropout, normalization,
    position encodings, activations) have no `quantize`, and Keras warns
    about each one."""
    return isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense,
                              keras.layers.Embedding))


def sublayers(model, include_self=False):
    """Every layer inside `model`, nested ones too, in Keras' order: the walk
    `keras.Model.quantize` makes. The one use in the package of Keras' own
    `Layer._flatten_layers`: Keras has no public recursive walk (`layers`
    lists a functional model's top level), and this is the order in which
    `quantize` gives layers their policies."""
    return list(model._flatten_layers(include_self=include_self))


def quantize_quietly(model, mode=None, config=None, filters=None, **kwargs):
    """`keras.Model.quantize` of `model` on `quantizable_layer`s (unless
    `filters` says otherwise), without the warning Keras' quantizer raises
    in its own NumPy conversion (`__array__ ... copy keyword`).

    Refused while LoRA is enabled on any layer: Keras quantizes the frozen
    kernel and drops the low-rank factors' contribution, so the tuned model
    would translate as if never tuned (measured: garbage)."""
    with_lora = [layer.path for layer in sublayers(model, include_self=True)
                 if getattr(layer, "lora_enabled", False)]
    if with_lora:
        raise ValueError(
            f"Cannot quantize a model with LoRA enabled (on {len(with_lora)} layers, e.g. "
            f"{with_lora[0]!r}): quantizing would drop the LoRA update. Merge it first: save "
            "the model (`Translator.save_to_preset`, or keras-hub's `save_to_preset`, which "
            "write the merged weights), load it again, then quantize.")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"__array__ implementation doesn't accept")
        return keras.Model.quantize(model, mode, config=config,
                                    filters=quantizable_layer if filters is None else filters,
                                    **kwargs)


def quantization_of(model):
    """`None` for a float model, else the quantization mode of its quantized
    layers (`"int8"`, ...): what Keras' `quantize` made of it."""
    modes = {layer.quantization_mode for layer in sublayers(model)}
    modes.discard(None)
    return min(modes) if modes else None


def with_dtype_policy(model, dtype_policy):
    """A copy of the Transformer `model` under another dtype policy, with the
    same weights (e.g. a model trained with mixed_bfloat16 served in float32
    on CPUs without bfloat16 instructions). A quantized model keeps the
    policy it was quantized under (its int8 layers' policies name it):
    asking for another is refused."""
    policy = keras.dtype_policies.get(dtype_policy)
    mode = quantization_of(model)
    if mode is not None and policy.name != model.dtype_policy.name:
        raise ValueError(
            f"The model is quantized ({mode}) under {model.dtype_policy.name}; it cannot be "
            f"moved to {policy.name}. Load the float model under {policy.name!r}, then "
            "quantize it.")
    config = model.get_config()
    if mode is None:  # a quantized model's config keeps its map of layer policies
        config["dtype"] = policy
    clone = model.__class__.from_config(config)
    clone.set_weights(model.get_weights())
    return clone


def saved_dtype_policy(model):
    """The dtype policy `model.get_config` saves: the model's, or once
    `quantize` has given some layers their own (`int8_from_float32`, ...), a
    `DTypePolicyMap` of those layers' policies over the model's, so that
    `from_config` builds the quantized layers the weights belong to (as
    keras-hub's `Backbone.get_config` does)."""
    policy = model.dtype_policy
    if isinstance(policy, keras.dtype_policies.DTypePolicyMap):
        return policy
    quantized = {layer.path: layer.dtype_policy for layer in sublayers(model)
                 if layer.quantization_mode is not None}
    if not quantized:
        return policy
    policy_map = keras.dtype_policies.DTypePolicyMap(default_policy=policy)
    for path, layer_policy in quantized.items():
        policy_map[path] = layer_policy
    return policy_map


def quantized_from_config(cls, config):
    """`cls.from_config` of a quantized model's `config` (its `dtype` a
    `DTypePolicyMap`, `saved_dtype_policy`): built in the map's default
    policy, then the mapped layers quantized as `quantize` did, so the
    variables are those of the saved weights. (Handing the map down to the
    layers instead trips Keras 3.15's int8 `Embedding`, which reads its mode
    from the map's default and saves no scale.)"""
    policy_map = config["dtype"]
    modes = {policy.quantization_mode for policy in policy_map.values()}
    if len(modes) > 1:
        raise ValueError(f"A model quantized in several modes ({sorted(modes)}) is not "
                         "supported; quantize every layer in one mode.")
    model = cls(**{**config, "dtype": policy_map.default_policy})
    if modes:
        paths = set(policy_map)
        model.quantize(modes.pop(), filters=lambda layer: layer.path in paths)
    return model


def mixed_policy(model):
    """Whether `model` computes in a 16-bit float type over float32
    variables (`mixed_bfloat16`, `mixed_float16`), unquantized: the policies
    whose float32 twin (`stateless_twin`) reads the very same weights."""
    return (isinstance(model.dtype_policy, keras.dtype_policies.DTypePolicy)
            and not isinstance(model.dtype_policy, keras.dtype_policies.DTypePolicyMap)
            and model.compute_dtype in ("bfloat16", "float16")
            and model.variable_dtype == "float32" and quantization_of(model) is None)


def stateless_twin(model, dtype_policy="float32"):
    """A model of `model`'s class and config under `dtype_policy` whose
    variables hold no values (neither memory nor an initialization): it
    computes only inside `reading(twin, model, fn)`, which maps them onto
    `model`'s current values. None where its variables do not match
    `model`'s one for one (paths, shapes, dtypes): e.g. LoRA enabled on `model`.

    Keras creates a variable without its value inside a `StatelessScope`
    and lists it for initialization when the outermost scope closes; the
    twin is built in a thread of its own, in a scope that initializes
    nothing, so that list goes with the thread and no later scope fills the
    twin with random weights."""
    config = {**model.get_config(), "dtype": keras.dtype_policies.get(dtype_policy)}
    built = {}

    def build():
        try:
            with keras.StatelessScope(initialize_variables=False):
                built["twin"] = model.__class__.from_config(config)
        except Exception as error:  # noqa: BLE001 - raised in the caller's thread
            built["error"] = error

    thread = threading.Thread(target=build, name="keras_attention-stateless-twin")
    thread.start()
    thread.join()
    if "error" in built:
        raise built["error"]
    twin = built["twin"]
    # (Paths of the weights; a dropout's seed state is named by a counter.)
    mine, theirs = twin.variables, model.variables
    if ([w.path for w in twin.weights] != [w.path for w in model.weights]
            or len(mine) != len(theirs) or any(
                (tuple(a.shape), a.dtype) != (tuple(b.shape), b.dtype)
                for a, b in zip(mine, theirs))):
        return None
    return twin


def reading(twin, model, fn):
    """`fn` (a function of `twin`, `stateless_twin(model)`) run with the
    twin's variables mapped onto `model`'s values, read at each call: inside
    a traced function (a tf.function graph, an XLA or `jax.jit` program) the
    reads are the program's own, so it follows `model`'s weights after
    `fit` or `load_weights` and holds no copy of them."""
    pairs = list(zip(twin.variables, model.variables))

    def run(*args, **kwargs):
        with keras.StatelessScope(state_mapping=pairs):
            return fn(*args, **kwargs)

    return run
