"""`tf.experimental.numpy` (`tnp`): TF's NumPy API, a bounded set of names bound to numpy and jax.numpy.

TF 2.21's `tnp` (observed, site/en/guide/tf_numpy.ipynb) computes on tensors with NumPy's names and dtypes:
`tnp.asarray(1)` is int64, `tnp.ones([2])` and `tnp.asarray(1.)` float64, `tnp.sum(np.ones([2, 3]))` a tensor,
and `tnp.ndarray` is `tf.Tensor`. Eagerly, jdist computes these on the host with numpy (a host tensor keeps
float64 and int64); a JAX array or a value being traced (`tf.function`, a gradient tape) goes to jax.numpy,
whose dtypes follow JAX's (32-bit unless `jax_enable_x64`).

A TF script's tensors have no numpy methods (`t.sum()`, `t.tolist()`, `t.T` are TF's AttributeError, observed in
TF 2.21) until the switch below adds TF's subset (jdist.tfdata.tensor_methods, installed when this loads).
`tnp.experimental_enable_numpy_behavior()` also switches the tensors' operators to NumPy's type promotion
(`int32 + float32` is float64, as TF prints) and, with `prefer_float32=True`, reads Python floats as float32
(`tnp.asarray(1.)`, `tnp.add(1., 2.)`, `tnp.linspace(0, 1, 3)`). Names outside `NAMES` raise an error naming
docs/tf_mapping.md.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jdist.tf_compat.host_tensors import as_tensors
from jdist.tf_compat.namespace import Namespace
from jdist.tf_compat.predicates import Tensor
from jdist.tf_compat.unsupported import not_provided
from jdist.tfdata import tensor_methods, tensor_numpy, weak_promotion
from jdist.tfdata.structure import HostTensor

_FUNCTIONS = """
abs absolute add all allclose amax amin any append arange arccos arccosh arcsin arcsinh arctan arctan2 arctanh
argmax argmin argsort around array array_equal asarray atleast_1d atleast_2d atleast_3d average broadcast_to
cbrt ceil clip concatenate conj copy cos cosh count_nonzero cross cumprod cumsum deg2rad diag diag_indices
diagonal diff divide dot dstack einsum equal exp exp2 expand_dims expm1 eye fabs flip fliplr flipud float_power
floor floor_divide fmod full full_like gcd greater greater_equal heaviside hstack hypot identity imag inner
isclose iscomplex isfinite isinf isnan isreal kron lcm less less_equal linspace log log10 log1p log2 logaddexp
logaddexp2 logical_and logical_not logical_or logical_xor logspace matmul max maximum mean meshgrid min minimum
mod moveaxis multiply nanmean nansum ndim negative nonzero not_equal ones ones_like outer pad polyval power prod
ptp rad2deg ravel real reciprocal remainder repeat reshape result_type roll rot90 round select shape sign
signbit sin sinc sinh size sort split sqrt square squeeze stack std subtract sum swapaxes take take_along_axis
tan tanh tensordot tile trace transpose tri tril triu true_divide var vdot vsplit vstack where zeros zeros_like
""".split()

_DTYPES = ("bool_", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
           "uint32", "uint64", "complex64", "complex128", "object_")


def _traced(args: Any) -> bool:
    """A JAX array or tracer among the arguments: jax.numpy computes it."""
    return any(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(args))


def _python_floats(value: Any) -> bool:
    if isinstance(value, float):
        return True
    return isinstance(value, (list, tuple)) and bool(value) and all(_python_floats(v) for v in value)


def _weak(value: Any) -> Any:
    """A Python float (or list of them) as float32 where `prefer_float32` is on (TF's `tnp.asarray(1.)`)."""
    if tensor_numpy.NUMPY_BEHAVIOR["prefer_float32"] and _python_floats(value):
        return np.asarray(value, np.float32)
    return value


def _plain(value: Any) -> Any:
    return value.view(np.ndarray) if isinstance(value, np.ndarray) else value


def _weak_mode() -> bool:
    return tensor_numpy.NUMPY_BEHAVIOR.get("mode") in weak_promotion.MODES


def _weak_array(value: Any) -> Any:
    """`tnp.array(1)` under dtype_conversion_mode "all"/"safe": TF's weak int32 (float32 for a float; observed,
    TF 2.21 `<tf.Tensor: shape=(), dtype=int32, numpy=1, weak=True>`)."""
    array = np.asarray(value)
    narrow = {"i": np.int32, "f": np.float32}.get(array.dtype.kind)
    return weak_promotion.weak(array.astype(narrow) if narrow else array)


def _bind(name: str) -> Callable[..., Any]:
    host, device = getattr(np, name), getattr(jnp, name)

    @functools.wraps(host)
    def function(*args: Any, **kwargs: Any) -> Any:
        if _traced((args, kwargs)):
            return device(*args, **kwargs)
        if name == "linspace" and tensor_numpy.NUMPY_BEHAVIOR["prefer_float32"]:
            kwargs.setdefault("dtype", np.float32)
        if (name in ("array", "asarray") and len(args) == 1 and "dtype" not in kwargs and _weak_mode()
                and weak_promotion.python_value(args[0])):
            return _weak_array(args[0])
        args = tuple(_plain(_weak(a)) for a in args)
        kwargs = {k: _plain(v) for k, v in kwargs.items()}
        return as_tensors(host(*args, **kwargs))

    function.__module__ = __name__
    function.__qualname__ = function.__name__ = name
    return function


def experimental_enable_numpy_behavior(prefer_float32: bool = False, dtype_conversion_mode: str = "legacy") -> None:
    """TF's switch: NumPy's type promotion for tensors' operators (`tf.constant([1, 2]) + tf.constant([1.,
    2.])` is float64, observed in TF 2.21), and Python floats as float32 where `prefer_float32`."""
    if dtype_conversion_mode not in ("legacy", "all", "safe"):
        raise ValueError(f"dtype_conversion_mode must be one of 'legacy', 'all', 'safe'; got {dtype_conversion_mode!r}")
    tensor_numpy.LATTICE_OPERATOR[:] = [weak_promotion.operator]
    tensor_numpy.NUMPY_BEHAVIOR.update(on=True, prefer_float32=bool(prefer_float32), mode=dtype_conversion_mode)


# TF's rule for a script's numpy methods on tensors, on from the start as in TF (library code keeps numpy's).
tensor_methods.install(HostTensor)


def _random_namespace() -> Namespace:
    def host(draw: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(draw)
        def function(*args: Any, **kwargs: Any) -> Any:
            return as_tensors(np.asarray(draw(*args, **kwargs)))
        return function

    def seed(s: int) -> None:
        """`tnp.random.seed`: seeds the draws below (numpy's generator on the host)."""
        np.random.seed(s)

    return Namespace("tf.experimental.numpy.random", seed=seed, randn=host(np.random.randn),
                     rand=host(np.random.rand), randint=host(np.random.randint),
                     standard_normal=host(np.random.standard_normal), uniform=host(np.random.uniform),
                     poisson=host(np.random.poisson))


class _NumpyNamespace(Namespace):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise not_provided(f"{self._tf_path}.{name}")  # not tf.experimental's message (that names dtensor)


def namespace() -> Namespace:
    """The `tf.experimental.numpy` namespace."""
    names: dict[str, Any] = {name: _bind(name) for name in _FUNCTIONS}
    names.update({name: getattr(np, name) for name in _DTYPES})  # TF's are numpy's types (`tnp.float32`)
    names.update(ndarray=Tensor, newaxis=None, pi=np.pi, e=np.e, inf=np.inf, nan=np.nan, iinfo=np.iinfo,
                 finfo=np.finfo, dtype=np.dtype, issubdtype=np.issubdtype, random=_random_namespace(),
                 experimental_enable_numpy_behavior=experimental_enable_numpy_behavior)
    return _NumpyNamespace("tf.experimental.numpy", **names)
