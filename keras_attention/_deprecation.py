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
