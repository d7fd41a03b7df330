"""A result checked against TF 2.21's observed summary of one: `[shape, dtype name, leading values, sum]` per
output (None for an output TF returned as None), as the tf.nn / tf.image tests record TF's outputs."""
import numpy as np


def check_summary(out, want):
    """`out` (one array or a tuple of them) matches the observed summaries `want`."""
    outs = list(out) if isinstance(out, tuple) else [out]
    assert len(outs) == len(want)
    for got, expected in zip(outs, want):
        if expected is None:
            assert got is None
            continue
        shape, dtype, head, total = expected
        values = np.asarray(got)
        assert list(values.shape) == shape and values.dtype.name == dtype
        flat = values.reshape(-1).astype(np.float64)
        np.testing.assert_allclose(flat[:len(head)], head, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(flat.sum(), total, rtol=1e-4, atol=1e-4)
