"""The checks of minattn.hooks: the hooks a call gives (names, layers, functions), what a hook
returns, a replacement's selection (batch, head, position), and an attention that must take
the heads' hooks."""
import numbers

import autograd.numpy as np
import numpy

from . import checks


def check_hooks(hooks, params, names):
    """hooks {(name, layer): function} -> one {name: function} a layer of params["layers"]; a
    name not in names, a layer out of range or a function that is not callable refused by name
    (params without a list of layers: None, for causal_lm to refuse)."""
    if not isinstance(hooks, dict):
        raise TypeError(f"hooks must be a dict {{(name, layer): function}}, got "
                        f"{type(hooks).__name__}")
    layers = params.get("layers") if isinstance(params, checks.DICT_TYPES) else None
    n_layers = len(layers) if isinstance(layers, checks.LIST_TYPES) else None
    per_layer = [{} for _ in range(n_layers or 0)]
    for key, function in hooks.items():
        if not (isinstance(key, tuple) and len(key) == 2):
            raise ValueError(f"hooks has key {key!r}: a key is (name, layer), as ('z', 3)")
        name, layer = key
        if name not in names:
            raise ValueError(f"hooks has key {key!r}: no activation is called {name!r} (the "
                             f"names: {', '.join(names)}); a key is (name, layer)")
        if not isinstance(layer, numbers.Integral) or isinstance(layer, bool) or \
                n_layers is not None and not 0 <= layer < n_layers:
            raise ValueError(f"hooks has key {key!r}: the layer must be an int in [0, "
                             f"{n_layers}) (the model's layers, from 0), got {layer!r}")
        if not callable(function):
            raise TypeError(f"hooks[{key!r}] must be a function(value) -> value, got "
                            f"{type(function).__name__}")
        if n_layers is not None:
            per_layer[layer][name] = function
    return per_layer if n_layers is not None else None


def check_layer_hooks(hooks, names):
    """-> hooks, one layer's {name: function}: a name not in names refused by name."""
    if not isinstance(hooks, dict) or set(hooks) - set(names) or \
            not all(map(callable, hooks.values())):
        raise ValueError(f"a block's hooks must be a dict {{name: function}} with names among "
                         f"{', '.join(names)}, got {hooks!r}"[:300])
    return hooks


def check_heads_hookable(heads, attention, takes_hooks):
    """heads: the hooks on a layer's heads (rot_q, rot_k, z, pattern), which the attention
    reads through its keyword hooks=; refused by name where it takes none (takes_hooks False:
    an attention that computes its own heads, such as MLA's)."""
    if not takes_hooks:
        name = getattr(getattr(attention, "func", attention), "__name__", repr(attention))
        raise ValueError(f"hooks on {', '.join(heads)} read self_attention's heads (an attention "
                         f"that takes hooks=); this layer's attention is {name}")


def check_replacement(name, value, new):
    """-> new, what a hook on activation `name` returned for value: refused unless it has
    value's shape and dtype (an array: to read, value itself; to replace, another)."""
    if np.shape(new) != np.shape(value) or getattr(new, "dtype", None) != value.dtype:
        got = f"{type(new).__name__}" if not hasattr(new, "dtype") else \
            f"shape {tuple(np.shape(new))} and dtype {new.dtype}"
        raise ValueError(f"the hook on {name!r} returned {got}, but {name} has shape "
                         f"{tuple(np.shape(value))} and dtype {value.dtype}: a hook returns the "
                         "activation (to read it) or a replacement of its shape and dtype")
    return new


def check_selection(value, new, where):
    """-> a bool array broadcasting to value: True at where = (batch, head, position), each
    None (the whole axis 0, -3, -2) or an int or a list of ints in range; new must broadcast
    to value's shape in its dtype."""
    shape = tuple(np.shape(value))
    if getattr(new, "dtype", None) != value.dtype or not _broadcasts(np.shape(new), shape):
        raise ValueError(f"the replacement has shape {tuple(np.shape(new))} and dtype "
                         f"{getattr(new, 'dtype', type(new).__name__)}, but the activation has "
                         f"shape {shape} and dtype {value.dtype}: it must broadcast to that "
                         "shape, in that dtype")
    selected = numpy.ones((1,) * len(shape), dtype=bool)
    for what, axis, index in zip(("batch", "head", "position"), (0, len(shape) - 3,
                                                                len(shape) - 2), where):
        if index is None:
            continue
        indices = index if isinstance(index, (list, tuple)) else [index]
        if what == "head" and len(shape) < 4:
            raise ValueError(f"head={index!r} selects a head of z or pattern ([B, H, L, d]); "
                             f"this activation has shape {shape}, no head axis")
        if not indices or any(not isinstance(i, numbers.Integral) or isinstance(i, bool) or
                              not 0 <= i < shape[axis] for i in indices):
            raise ValueError(f"{what}={index!r} is out of range: the activation of shape "
                             f"{shape} has {shape[axis]} along its {what} axis (from 0)")
        line = numpy.zeros(shape[axis], dtype=bool)
        line[list(indices)] = True
        selected = selected & line.reshape([-1 if a == axis else 1 for a in range(len(shape))])
    return selected


def _broadcasts(shape, to):
    try:
        return numpy.broadcast_shapes(shape, to) == to
    except ValueError:
        return False
