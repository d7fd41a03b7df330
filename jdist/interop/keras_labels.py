"""tf_keras's rule for rank-1 labels in compiled losses, for scripts written against TF's `tf.keras`."""
from __future__ import annotations

from typing import Any


def expand_compiled_labels() -> None:
    """tf_keras's compiled losses (`model.compile(loss=...)`) expand a rank-1 label to `(n, 1)` against rank-2
    predictions before the loss function sees it (`compile_utils.match_dtype_and_rank`), so `"mse"` with a
    `(64,)` label and a `(64, 10)` prediction averages `(y_i - p_ij) ** 2` over j (observed: TF 2.21 with
    TF_USE_LEGACY_KERAS=1; its loss classes called directly raise there, and Keras 3's compiled losses raise).
    Installed for single-output models when `jdist.tf_compat`'s `tf.keras` is first used, and on the
    parameter-server workers that run such a script's fit (`keras_ps_fit`); Keras 3 used alone is unchanged."""
    from keras.src.trainers.compile_utils import CompileLoss

    call = CompileLoss.call
    if getattr(call, "_jdist_tf_keras", False):
        return
    from keras import ops, tree

    def call_expanding(self: Any, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        if (not tree.is_nested(y_true) and not tree.is_nested(y_pred) and len(getattr(y_true, "shape", ())) == 1
                and len(getattr(y_pred, "shape", ())) == 2):
            y_true = ops.expand_dims(y_true, -1)
        return call(self, y_true, y_pred, sample_weight)

    call_expanding._jdist_tf_keras = True  # pyright: ignore[reportFunctionMemberAccess]
    CompileLoss.call = call_expanding  # pyright: ignore[reportAttributeAccessIssue]


def installed() -> bool:
    from keras.src.trainers.compile_utils import CompileLoss

    return getattr(CompileLoss.call, "_jdist_tf_keras", False)
