"""The names of TF's utilities gathered for `jdist.tf_compat`'s namespaces: the top-level ones (`tf.name_scope`,
`tf.custom_gradient`, the initializers, `tf.DeviceSpec`, TF's top-level assert aliases, ...) and the additions to
`tf.debugging`, `tf.nest` and `tf.dtypes`. Each name is defined in the module that says why it is as it is."""
from __future__ import annotations

from jdist.tf_compat import (
    assertions,
    custom_gradients,
    debugging,
    initializers,
    nest_ops,
    tensor_utilities,
)
from jdist.tf_compat.device_spec import DeviceSpec
from jdist.tf_compat.indexed_slices import IndexedSlices
from jdist.tf_compat.math_extra import complex as _complex
from jdist.tf_compat.name_scopes import get_current_name_scope, name_scope

TOP_LEVEL = dict(
    # TF 2.21's top-level aliases of tf.debugging's (observed: these five, not the others)
    Assert=assertions.Assert, assert_equal=debugging.assert_equal, assert_greater=debugging.assert_greater,
    assert_less=debugging.assert_less, assert_rank=debugging.assert_rank,
    name_scope=name_scope, get_current_name_scope=get_current_name_scope,
    custom_gradient=custom_gradients.custom_gradient, grad_pass_through=custom_gradients.grad_pass_through,
    no_gradient=custom_gradients.no_gradient, recompute_grad=custom_gradients.recompute_grad,
    control_dependencies=tensor_utilities.control_dependencies, get_static_value=tensor_utilities.get_static_value,
    inside_function=tensor_utilities.inside_function, is_symbolic_tensor=tensor_utilities.is_symbolic_tensor,
    tuple=tensor_utilities.tuple, shape_n=tensor_utilities.shape_n,
    DeviceSpec=DeviceSpec, IndexedSlices=IndexedSlices, **initializers.INITIALIZERS,
)
DEBUGGING = assertions.DEBUGGING
NEST = nest_ops.NEST
DTYPES = dict(complex=_complex, saturate_cast=tensor_utilities.saturate_cast)
version_names = tensor_utilities.version_names
