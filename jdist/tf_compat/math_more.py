"""The names `math_special`, `segment_extra`, `array_extra`, `control_switch`, `bitwise_ops`, `random_draws` and
`signal_ops` add to `jdist.tf_compat`, gathered by namespace for its `__init__`."""
from __future__ import annotations

from jdist.tf_compat import (
    array_extra,
    bitwise_ops,
    control_switch,
    math_special,
    random_draws,
    segment_extra,
    signal_ops,
)

TOP_LEVEL = {**math_special.TOP_LEVEL, **array_extra.TOP_LEVEL, **segment_extra.TOP_LEVEL,
             "switch_case": control_switch.switch_case, "vectorized_map": control_switch.vectorized_map}
MATH = {**math_special.MATH, **segment_extra.SEGMENTS}
SPECIAL = math_special.SPECIAL
BITWISE = bitwise_ops.BITWISE
SIGNAL = signal_ops.SIGNAL
RANDOM = random_draws.RANDOM
