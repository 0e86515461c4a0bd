"""Autograd rules that minattn owns: gradients written by hand, and a `where` that keeps dtypes.

`@gradient_by_hand(vjp)` makes a function an autograd primitive: autograd no longer traces the
operations inside it; on the way back it calls `vjp` instead, the vector-Jacobian product
written by hand beside the forward pass (walkthrough.md, "Backpropagation by hand"). The forward
then runs on plain arrays (no autograd boxes, no tape: faster, and free to use in-place `out=`
arithmetic on arrays it made itself), and the backward is one formula per argument instead of
one per NumPy call. A VJP is written with autograd.numpy, so it can be differentiated again
(second derivatives).

    def softmax_vjp(wrt, g, p, x, axis, mask):     # wrt: names of the arguments wanted
        return {"x": p * (g - np.sum(g * p, axis=axis, keepdims=True))}

The VJP gets the names of the arguments autograd wants (`wrt`), the output's gradient `g`, the
forward's output(s), and every one of the forward's arguments by name, defaults filled in (so a
VJP declares no defaults of its own, and re-reads e.g. scale=None through the same check the
forward used). It returns {name: gradient}
for the names in `wrt`; the decorator sums each gradient over the dims its argument was
broadcast along. `unless="dropout"`: when that argument is truthy, the function is left to
autograd to differentiate as written (the hand VJP has no dropout).

`@reads(x=("w",), w=("x",), b=())` on a VJP (linear's): what each argument's gradient reads,
among the forward's arguments and "out", its output. Autograd's tape keeps what the VJP will be
handed until the backward pass ends; for a VJP so marked, it keeps only what the wanted
gradients read, and hands the VJP, in place of any other array, an empty stand-in of its shape
and dtype (no memory; read its shape only). `out_if=` keeps the outputs where a rule of the
call says so (the attention core keeps its weights where they are no larger than q, k and v). So linear with a frozen weight keeps no copy of its
input alive, and no marked function keeps its output unless its VJP reads it: in a LoRA
fine-tuning step of SmolLM2 the tape held 53 MiB a layer before, 32 MiB after
(docs/benchmarks.md, "Fine-tuning with LoRA against torch + PEFT").

`@gradient_with_the_value(value_and_grads)` is for a function whose gradients cost least in the
pass that computes it: a scalar at the end of the graph (a loss), or an elementwise function,
whose Jacobian is the diagonal of its derivatives. value_and_grads(wrt, **arguments) ->
(value, {name: gradient or derivative}) computes both at once (the unembedding fused with the
cross-entropy, training/losses.py: each chunk's logits made once, used for the loss and its
gradient, never kept; float32 GELU, position_wise.py: its derivative from the value's own erfc).
Differentiated, the function records the gradients of the arguments autograd follows, and its
VJP is g times them: the tape keeps those gradients alone, none of the arguments. They are
computed on plain arrays, so they are not differentiated again: where the call is itself inside
another differentiation (a second derivative), `otherwise=`, a differentiable function computing
the same (the general form: the float32 GELU's and SwiGLU's), runs instead; without one (the
fused loss) it is refused (NotImplementedError), never returned as zero.

`@gradient_by_hand(vjp, in_place=vjp_in_place)`: vjp_in_place computes the same gradients on
plain arrays, writing them (`out=`) into arrays it makes itself: fewer fresh arrays; rms_norm's
by the same operations in the same order (equal to the last bit), layer_norm's in fewer passes
(within float32 rounding of the float64 formula: engine/plain_vjps.py, tests/test_layer_norm.py).
It is called where g and every array argument are plain arrays of one dtype; where the backward
pass is differentiated again (second derivatives) or dtypes mix, the differentiable vjp is.
`plain_form(vjp_plain)(vjp)` marks a VJP's form on NumPy itself (the same calls, without
autograd.numpy's wrappers: linear's and the attention core's, engine/plain_vjps.py), called
where g and the arguments hold no box, whatever their dtypes.

Where no argument is a box, gradient_by_hand's wrapper (and `unrecorded(wrapper)`, which the
policies around it call in its place) runs the function on NumPy itself (`on_numpy_itself`): the
same code, its module's autograd.numpy read as NumPy, so that its NumPy calls skip autograd's
wrapper, which would only look for boxes and call NumPy's function as it is (the same bits).

autograd's VJP of `np.where` builds its zeros with `np.zeros(g.shape)`: float64, and on the host.
That turns a float32 gradient into float64 (and would move a CuPy gradient to the CPU). `where`
below is the same selection, with a gradient made from g itself, so it keeps g's dtype and device.
"""
import builtins
import dis
import functools
import types
import weakref

import autograd.numpy as np
import numpy
from autograd.builtins import SequenceBox
from autograd.numpy.numpy_boxes import ArrayBox
from autograd.core import VJPNode, add_outgrads
from autograd.tracer import new_box, trace_stack
from autograd.util import toposort
from autograd.extend import defvjp, defvjp_argnums, primitive, vspace
from autograd.numpy.numpy_vjps import unbroadcast_f
from autograd.tracer import box_types as _BOX_TYPES, getval, isbox  # isbox(x): type(x) in it

from .signatures import binder, call_by_name
from .trees import flatten


def gradient_by_hand(vjp, *, unless=None, in_place=None):
    """Decorator: see the module docstring."""
    in_place = getattr(vjp, "in_place", None) if in_place is None else in_place

    def decorate(f):
        names, bind = binder(f)
        reads = getattr(vjp, "reads", None)

        @primitive
        def forward(*values):  # every argument positional, so autograd sees keyword ones too
            return call_by_name(f, names, values)

        def vjp_maker(argnums, outputs, values, kwargs):
            wrt = [names[i] for i in argnums]
            if reads is not None:  # the tape keeps only what the wanted gradients read
                kept = {name for n in wrt for name in reads[n]}
                keep_out = "out" in kept or (vjp.out_if is not None and vjp.out_if(
                    outputs, **dict(zip(names, values))))
                outputs = outputs if keep_out else _stand_in(outputs)
                values = tuple(v if n in kept else _stand_in(v) for n, v in zip(names, values))

            def backward(g):
                plain = getattr(vjp, "plain", None)  # (read here: a test may take it away)
                by = in_place if in_place is not None and _plain_of_one_dtype(g, values) else \
                    plain if plain is not None and _plain(g, values) else vjp
                grads = by(wrt, g, outputs, **dict(zip(names, values)))
                return tuple(_unbroadcast(values[i], grads[n]) for i, n in zip(argnums, wrt))

            return backward

        defvjp_argnums(forward, vjp_maker)
        skip = None if unless is None else names.index(unless)
        plain_f = on_numpy_itself(f)  # f, its autograd.numpy calls made on NumPy itself

        @functools.wraps(f)
        def with_gradient_by_hand(*args, **kwargs):
            # Not differentiating (no argument is an autograd box): nothing to record, so f runs
            # as it is, without the primitive's wrapping (it costs microseconds, on every call),
            # and without autograd.numpy's wrappers around its NumPy calls (on_numpy_itself).
            # (isbox's test, type in box_types, on every argument at once: no frame per argument)
            if _BOX_TYPES.isdisjoint(map(type, args)) and \
                    (not kwargs or _BOX_TYPES.isdisjoint(map(type, kwargs.values()))):
                return plain_f(*args, **kwargs)
            values = bind(args, kwargs)
            if skip is not None and values[skip]:
                return f(*args, **kwargs)
            out = forward(*values)
            # Several outputs come back from autograd as one boxed tuple: hand back a tuple.
            return tuple(_output(out, i) for i in range(len(out))) \
                if isinstance(out, SequenceBox) else out

        _UNRECORDED[with_gradient_by_hand] = plain_f
        return with_gradient_by_hand

    return decorate


# gradient_by_hand's wrappers -> the function each runs where no argument is a box (a table, not
# an attribute: functools.wraps would copy an attribute onto the wrappers around it)
_UNRECORDED = weakref.WeakKeyDictionary()


def unrecorded(wrapper):
    """The function that `wrapper`, a gradient_by_hand wrapper, calls where no argument is an
    autograd box (nothing to record): the function it wraps, on NumPy itself (on_numpy_itself);
    None for any other function."""
    return _UNRECORDED.get(wrapper)


def on_numpy_itself(f):
    """f with its module's autograd.numpy (`np`) read as NumPy itself: the same code, the same
    calls of the same NumPy functions on the same arguments, without autograd.numpy's wrapper
    around each (which looks for boxes among the arguments, then calls NumPy's; RMSNorm makes 2
    such calls, sigmoid 4, in every layer of a decode step: docs/benchmarks.md, "SmolLM2's decode
    step, round two"). For calls where no
    argument is a box only (gradient_by_hand's wrapper, and the policies that stand in for it:
    `unrecorded`): a box can then reach no NumPy call of f, and each wrapper would call NumPy's
    function as it is. f itself where that does not hold for every autograd.numpy name its code
    reads (a function of autograd's own, such as its concatenate, or a name it does not have),
    where its code reads no autograd.numpy at all, or assigns a global.

    Every other global is read from f's module as it is at the call (a function swapped in by
    minattn.swap or a test is the one called): the namespace holds the NumPy binding alone and
    passes every other name to the module's dict (its __missing__, that dict's own lookup)."""
    code, namespace = getattr(f, "__code__", None), getattr(f, "__globals__", None)
    if code is None or namespace is None or type(f) is not types.FunctionType:
        return f
    codes = _codes(code)
    read = {name for c in codes for name in c.co_names}
    bound = {name for name in read if namespace.get(name) is np}  # autograd.numpy, by its names
    if not bound or any(op in _WRITES_GLOBALS for c in codes for op in _opnames(c)) or \
            not all(_wraps_numpy(name) for name in read if hasattr(np, name)):
        return f
    plain = types.FunctionType(code, _numpy_namespace(namespace, bound), f.__name__,
                               f.__defaults__, f.__closure__)
    plain.__kwdefaults__ = f.__kwdefaults__
    plain.__qualname__, plain.__module__ = f.__qualname__, f.__module__
    return plain


_WRITES_GLOBALS = frozenset(("STORE_GLOBAL", "DELETE_GLOBAL"))


def _codes(code):
    # code and the code objects nested in it (its lambdas, comprehensions, inner functions),
    # which run with the globals of the function that makes them
    nested = [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return [code] + [inner for c in nested for inner in _codes(c)]


def _opnames(code):
    return {instruction.opname for instruction in dis.get_instructions(code)}


def _wraps_numpy(name):
    # autograd.numpy's `name` is NumPy's own object (a constant, a dtype), or autograd's
    # primitive wrapping NumPy's function of that name (f_wrapped.fun: its f_raw)
    ours, theirs = getattr(np, name), getattr(numpy, name, _MISSING)
    return ours is theirs or getattr(ours, "fun", _MISSING) is theirs


_MISSING = object()
_NAMESPACES = {}  # (id of a module's dict, the autograd.numpy names) -> its NumPy namespace


def _numpy_namespace(namespace, bound):
    key = (id(namespace), frozenset(bound))
    if key not in _NAMESPACES:
        # a dict of its own names, every other name read from the module's dict by a C call
        # (a dict subclass's __missing__: LOAD_GLOBAL's lookup on a namespace that is not a
        # plain dict; a name the module lacks raises KeyError, and the builtins are searched)
        reads_module = type("NumpyNamespace", (dict,),
                            {"__missing__": staticmethod(namespace.__getitem__)})
        _NAMESPACES[key] = reads_module(
            {name: numpy for name in bound}, __builtins__=namespace.get("__builtins__", builtins))
    return _NAMESPACES[key]


def _unbroadcast(value, grad):
    # grad summed over the dims along which value was broadcast (autograd's unbroadcast), or
    # grad itself where both are NumPy arrays of one shape and no complex grad meets a real
    # value: autograd's looks up the value's shape, ndim, dtype and complexity through its
    # wrappers first, about 8 µs a gradient (a small GPT's step takes ~140). Two NumPy arrays of
    # other shapes (a LayerNorm's gamma and beta, summed over the tokens) are summed as
    # autograd's unbroadcast sums them, the same calls in the same order (the same bits), on
    # NumPy itself: ~12 wrapped calls fewer a gradient.
    if type(value) is numpy.ndarray and type(grad) is numpy.ndarray and \
            (grad.dtype.kind != "c" or value.dtype.kind == "c"):
        if value.shape == grad.shape:
            return grad
        return _numpy_unbroadcast(grad, value.shape)
    return unbroadcast_f(value, lambda _: grad)(None)


def _numpy_unbroadcast(x, shape):
    # autograd.numpy.numpy_vjps.unbroadcast for a real NumPy x and a target of `shape`: the
    # leading dims summed one at a time, then every dim of 1 summed with keepdims
    while x.ndim > len(shape):
        x = numpy.sum(x, axis=0)
    for axis, size in enumerate(shape):
        if size == 1:
            x = numpy.sum(x, axis=axis, keepdims=True)
    return x


def _plain(g, values):
    # Whether g (or each part of a tuple g) and the arguments hold no autograd box: this
    # backward pass is not differentiated again.
    parts = g if type(g) is tuple else (g,)
    return not any(map(isbox, parts)) and not any(map(isbox, values))


def plain_form(plain_vjp, *, in_place=False):
    """Decorator for a differentiable VJP: plain_vjp computes the same gradients by the same
    NumPy operations in the same order (the same bits), calling NumPy itself, not
    autograd.numpy's wrappers (which look for boxes among each call's arguments, some µs a
    call). gradient_by_hand calls it where g and the arguments hold no box (the backward pass
    is not differentiated again); in_place=True: only where they are also of one dtype, as
    `gradient_by_hand(..., in_place=)` (for a form that writes into arrays it made)."""
    def mark(vjp):
        if in_place:
            vjp.in_place = plain_vjp
        else:
            vjp.plain = plain_vjp
        return vjp

    return mark


def _plain_of_one_dtype(g, values):
    # Whether g and the arguments are plain arrays (this backward pass is not differentiated
    # again) of one dtype (so writing a result into an array of the VJP's own changes no dtype).
    arrays = [v for v in (g, *values) if hasattr(v, "dtype") or isbox(v)]
    return not any(map(isbox, arrays)) and len({a.dtype for a in arrays}) == 1


def gradient_with_the_value(value_and_grads, otherwise=None):
    """Decorator: see the module docstring. otherwise: a differentiable function computing the
    same (the general form), run instead where the call is itself being differentiated again."""
    def decorate(f):
        names, bind = binder(f)

        @primitive
        def forward(wanted, *values):  # wanted: {"wrt": names}, filled with the "grads"
            value, wanted["grads"] = value_and_grads(wanted["wrt"], **dict(zip(names, values)))
            return value

        def vjp_maker(argnums, value, args, kwargs):
            grads, shapes = args[0]["grads"], [_stand_in(a) for a in args]  # nothing else kept

            def backward(g):
                if isbox(g):
                    _no_second_derivative(f)
                return tuple(unbroadcast_f(shapes[i], lambda _, n=names[i - 1]: g * grads[n])(None)
                             for i in argnums)

            return backward

        defvjp_argnums(forward, vjp_maker)

        @functools.wraps(f)
        def with_the_gradient(*args, **kwargs):
            # Not differentiating: f as it is, without binding the arguments (as
            # gradient_by_hand: it costs microseconds, on every call of a decode step)
            if _BOX_TYPES.isdisjoint(map(type, args)) and \
                    (not kwargs or _BOX_TYPES.isdisjoint(map(type, kwargs.values()))):
                return f(*args, **kwargs)
            values = bind(args, kwargs)
            wrt = [name for name, value in zip(names, values) if isbox(value)]
            boxes = [value for value in values if isbox(value)]
            if any(isbox(box._value) for box in boxes) or len({b._trace for b in boxes}) > 1:
                # differentiated inside another differentiation: the general form, if any
                if otherwise is None:
                    _no_second_derivative(f)
                return otherwise(*args, **kwargs)
            return forward({"wrt": wrt}, *values) if wrt else f(*args, **kwargs)

        return with_the_gradient

    return decorate


def value_and_grad_by_leaf(f):
    """value_and_grad(f) for f(tree, *args), differentiated with respect to every leaf of the
    nested dict/list tree -> (value, the gradient: a tree of the same structure). Each leaf is
    a start of the backward pass of its own, not an item taken from one boxed tree: autograd's
    VJP of taking an item makes a zero copy of the whole container and adds into it, at every
    level of nesting (a quarter of a small GPT's training step went to it and to the
    parameters' 90 takes: benchmarks/bench_char_gpt.py --profile). A leaf that f does not use
    gets zeros, as autograd's own value_and_grad gives."""
    @functools.wraps(f)
    def value_and_grad(tree, *args, **kwargs):
        leaves, rebuild = flatten(tree)
        roots = [VJPNode.new_root() for _ in leaves]
        with trace_stack.new_trace() as trace:
            end = f(rebuild([new_box(x, trace, root) for x, root in zip(leaves, roots)]),
                    *args, **kwargs)
            if not (isbox(end) and end._trace == trace):  # f does not depend on the tree
                return end, rebuild([vspace(x).zeros() for x in leaves])
            value, end_node = end._value, end._node
        grads, outgrads = {}, {end_node: (vspace(value).ones(), False)}
        starts = set(map(id, roots))
        for node in toposort(end_node):  # autograd.core.backward_pass, keeping every root's
            g = outgrads.pop(node)[0]
            for parent, ingrad in zip(node.parents, node.vjp(g)):
                outgrads[parent] = add_outgrads(outgrads.get(parent), ingrad)
            if id(node) in starts:
                grads[id(node)] = g
        return value, rebuild([grads[id(root)] if id(root) in grads else vspace(x).zeros()
                               for x, root in zip(leaves, roots)])

    return value_and_grad


def _no_second_derivative(f):
    raise NotImplementedError(f"{f.__name__} computes its gradient with its value, on plain "
                              "arrays: no second derivative")


def reads(*, out_if=None, **names):
    """Decorator for a VJP: name=(what that argument's gradient reads, ...); see the module
    docstring. out_if(outputs, **arguments) -> whether the tape keeps the outputs as well, for
    a VJP that reads them where they were kept (kept(outputs[i])) and recomputes them where not."""
    def mark(vjp):
        vjp.reads, vjp.out_if = names, out_if
        return vjp

    return mark


def kept(x):
    """Whether x, handed to a VJP marked with @reads, is the array itself, not a stand-in."""
    x = getval(x)  # (a box of an outer differentiation holds the array itself)
    # A stand-in's strides are all 0; an array without strides counts as not kept (recomputed).
    return getattr(x, "ndim", 0) == 0 or x.size <= 1 or any(getattr(x, "strides", (0,)))


def _from_the_array(name, general):
    # a box's attribute `name`: its NumPy array's own, else general(the value) (autograd's read)
    def read(box):
        value = box._value
        return getattr(value, name) if type(value) is numpy.ndarray else general(value)

    return property(read)


# An autograd box's shape, ndim, size and dtype: autograd reads each through autograd.numpy's
# wrapper (np.shape(box._value), which first looks for boxes among its arguments), ~1 µs a read;
# a training step of the baby GPT reads ~400 of them per 6 rows (its checks, its reshapes). For
# a box of a NumPy array, the array's own attribute: the same value (np.result_type of an array
# is its dtype); for anything else (a box of a box, a scalar), autograd's own read. Set on
# autograd's ArrayBox when minattn is imported: process-wide, as autograd's own rules are.
ArrayBox.shape = _from_the_array("shape", np.shape)
ArrayBox.ndim = _from_the_array("ndim", np.ndim)
ArrayBox.size = _from_the_array("size", np.size)
ArrayBox.dtype = _from_the_array("dtype", np.result_type)


@primitive
def _output(outputs, i):
    # outputs[i] of a primitive's tuple of outputs. autograd's own indexing keeps the whole
    # tuple for its VJP (the attention core's weights with its output); this keeps its shapes.
    return outputs[i]


def _output_vjp(ans, outputs, i):
    # The tuple's gradient: g at i, a stand-in of zeros at every other place (the tape keeps no
    # output). autograd's own (container_untake) made an array of zeros for each output and added
    # g into a copy: in a small GPT's step, the attention weights' [B, H, L, L] zeros and a pass
    # over them per layer, though nothing reads the weights. A VJP tells such zeros by
    # no_gradient() (NumPy's; a CuPy output's stand-in is added as the zeros it is).
    zeros = _stand_in(tuple(outputs))
    return lambda g: zeros[:i] + (g,) + zeros[i + 1:]


defvjp(_output, _output_vjp)


def _stand_in(x):
    # An array's shape and dtype without its memory: a zero-strided view of one zero; a tuple of
    # outputs, each. Anything else (None, a number) as it is. A NumPy array's is read-only and
    # made once per shape and dtype (made anew, it cost a training step about 60 calls of ~8 µs).
    if isinstance(x, tuple):
        return tuple(map(_stand_in, x))
    if getattr(x, "ndim", 0) == 0:
        return x
    if type(x) is numpy.ndarray:
        return _numpy_stand_in(x.shape, x.dtype)
    return np.broadcast_to(np.zeros_like(x, shape=()), np.shape(x))


def no_gradient(g):
    """Whether g, a part of the gradient of a primitive's tuple of outputs, is the stand-in of
    zeros that stands for an output nothing read (so a VJP may skip adding it): the very object,
    not any zero-strided array (the gradient of a sum is one too)."""
    return type(g) is numpy.ndarray and g.ndim > 0 and g is _numpy_stand_in(g.shape, g.dtype)


def plus_gradient(x, g):
    """x + g, g a part of the gradient of a primitive's tuple of outputs; x itself where g is
    the stand-in of an output nothing read (no_gradient): no pass over its zeros."""
    return x if no_gradient(g) else x + g


@functools.lru_cache(maxsize=256)
def _numpy_stand_in(shape, dtype):
    return numpy.broadcast_to(numpy.zeros((), dtype), shape)  # read-only


def constant(x):
    """x as a value autograd treats as a constant (its gradient is not followed): for a shift
    whose gradient is zero anyway, such as log-softmax's row max, and whose VJP would build host
    arrays (autograd's max)."""
    return getval(x)


@primitive
def where(condition, x, y):
    # bool [...], [...], [...] -> [...] (broadcasting): x where condition holds, else y.
    return np.where(condition, x, y)


defvjp(
    where,
    None,  # the condition is not differentiable
    lambda ans, condition, x, y: unbroadcast_f(x, lambda g: where(condition, g, np.zeros_like(g))),
    lambda ans, condition, x, y: unbroadcast_f(y, lambda g: where(condition, np.zeros_like(g), g)),
)
