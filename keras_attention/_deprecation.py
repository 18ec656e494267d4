"""Names that moved to another module keep working from their old place for
a release, with a `DeprecationWarning` naming the new one."""

import warnings


def moved_names(old_module, moved):
    """A module `__getattr__` for `old_module` (its `__name__`) that gives each
    name of `moved` (`{name: new module}`) from its new module, warning
    once per access; any other name is an AttributeError, as usual."""

    def __getattr__(name):  # noqa: N807  (a module's __getattr__)
        module = moved.get(name)
        if module is None:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        short = old_module.rsplit(".", 1)[-1]
        warnings.warn(f"{old_module}.{name} moved to {module.__name__}.{name}; import it from "
                      f"there ({short} keeps it for one release only).", DeprecationWarning,
                      stacklevel=2)
        return getattr(module, name)

    return __getattr__


# What `translate` took by position before its decoding settings became
# keyword overrides (as `search`'s): still accepted, with a DeprecationWarning.
_TRANSLATE_POSITIONAL = ("beam_size", "length_penalty", "batch_size", "verbose")


def translate_positional(args, overrides, batch_size, verbose):
    """`(overrides, batch_size, verbose)` of `translate(texts, *args, ...)`
    as `translate(texts, beam_size, length_penalty, batch_size, verbose)`
    read them (None: the translator's setting)."""
    if len(args) > len(_TRANSLATE_POSITIONAL):
        raise TypeError(f"Translator.translate takes `texts` and keyword arguments; received "
                        f"{1 + len(args)} positional arguments.")
    given = dict(zip(_TRANSLATE_POSITIONAL, args))
    warnings.warn(f"Passing {', '.join(given)} to Translator.translate by position is "
                  "deprecated; pass them by keyword: translate(texts, "
                  f"{', '.join(f'{name}=...' for name in given)}).", DeprecationWarning,
                  stacklevel=3)
    overrides = dict(overrides)
    for name in _TRANSLATE_POSITIONAL[:2]:
        if given.get(name) is not None:
            if name in overrides:
                raise TypeError(f"Translator.translate got two values for `{name}`.")
            overrides[name] = given[name]
    return overrides, given.get("batch_size", batch_size), given.get("verbose", verbose)
