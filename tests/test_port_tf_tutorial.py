"""scripts/port_tf_tutorial.py (TF's custom-training tutorial ported to jdist) gives TensorFlow's numbers.

The TF values below were observed by running the port's own tutorial section (the lines
between its `# ---` markers) with TensorFlow 2.21 (tensorflow-cpu, Keras 3.15.1) under
MirroredStrategy on 8 logical CPU devices, its `tf` bound to TensorFlow itself
(scripts/tf_reference/tutorial_tf.py), on the same data and from the same initial weights:

    python -c "from jdist.datasets import load_digits; import numpy as np; \
        np.savez('/tmp/digits.npz', *load_digits('train'), *load_digits('test'))"
    /path/to/tf-venv/bin/python scripts/tf_reference/tutorial_tf.py /tmp/digits.npz --devices 8 \
        --epochs 2 --build-optimizer --train-examples 1432 --test-examples 357 --save-weights /tmp/tf_w.npz

Data: the first 1432 training digits (batches of 512, 512 and 408: 51 per replica) and the
first 357 test digits (one batch, which TF splits 45 x 7 + 42 and jdist pads to 45 x 8 with 3
masked rows), not shuffled (`BUFFER_SIZE = 1`). Initial weights: `initial_weights()` below,
built from a numpy seed identically in both scripts.
"""
import contextlib
import io
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "jax")  # before keras is imported

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import port_tf_tutorial  # noqa: E402

# Observed from TF 2.21 / Keras 3.15.1 (command in the module docstring): the tutorial's printed
# lines, [train loss, train accuracy %, test loss, test accuracy %] for epochs 1 and 2, and its
# last line, the accuracy of the model restored from the epoch-1 checkpoint without a strategy.
TF_EPOCHS = [[2.203843116760254, 16.270950317382812, 1.96550452709198, 40.33613586425781],
             [1.8273038864135742, 56.773738861083984, 1.6084067821502686, 68.06723022460938]]
TF_RESTORED_ACCURACY = 40.33613586425781
# TF's final weights (model.get_weights(), float32): per array, sum(|w|) and its first 4 entries.
TF_FINAL_WEIGHTS = [
    (57.76794573152438, [0.11064904183149338, -0.17173492908477783, -0.3520340025424957, -0.3725123107433319]),
    (0.07722109413589351, [0.005324316211044788, 0.005441105458885431, 0.002664891304448247, 0.0007946869591251016]),
    (1196.9259605796906, [0.023470569401979446, -0.10577310621738434, -0.02621171623468399, -0.10873328894376755]),
    (0.15143289304251084, [0.0020439024083316326, 0.0013280841521918774, 0.0019028243841603398, 0.005829877685755491]),
    (3046.0254103384223, [-0.04211622476577759, -0.040047235786914825, -0.000661894038785249, 0.020808646455407143]),
    (0.10349141882034019, [0.001294381683692336, -0.00015419239934999496, -0.00432319613173604, 0.0]),
    (90.51650361984866, [-0.03254096210002899, 0.13074196875095367, -0.1607147753238678, -0.16964243352413177]),
    (0.02097125405271072, [0.0033358028158545494, -0.0035005654208362103, -0.00011609785724431276, 0.005076490342617035]),
]


def initial_weights(shapes, seed=0):
    """Glorot-uniform kernels and zero biases from a numpy seed (tutorial_tf.py makes the same arrays)."""
    rng = np.random.default_rng(seed)
    weights = []
    for shape in shapes:
        if len(shape) == 1:
            weights.append(np.zeros(shape, np.float32))
        else:
            fan_in, fan_out = int(np.prod(shape[:-1])), int(shape[-1])
            limit = np.sqrt(6.0 / (fan_in + fan_out))
            weights.append(rng.uniform(-limit, limit, shape).astype(np.float32))
    return weights


SHAPES = [(3, 3, 1, 32), (32,), (3, 3, 32, 64), (64,), (1600, 64), (64,), (64, 10), (10,)]
EPOCH_LINE = re.compile(r"Epoch (\d+), Loss: (\S+), Accuracy: (\S+), Test Loss: (\S+), Test Accuracy: (\S+)")
RESTORED_LINE = re.compile(r"Accuracy after restoring the saved model without strategy: (\S+)")


def test_ported_tutorial_equals_tensorflow(tmp_path, monkeypatch):
    """Two epochs of the port on 8 replicas print TF's numbers and end at TF's weights.

    Tolerances: losses 1e-5 relative (observed <= 2e-7: float32 sums in another order);
    accuracies are counts of examples, equal (1e-4 for the float formatting; one example
    more or less moves them by 0.07 and 0.28 points). Weights: 1e-5 absolute on entries
    and 2e-4 relative on sum(|w|) (observed <= 7e-8 and 6e-5): Adam divides each gradient
    by its running RMS, so where a gradient is near zero, reorder-level differences in it
    move that weight by up to a learning rate's fraction (the largest difference observed
    over all 122,570 weights is 3.4e-5, against a step of 1e-3).
    """
    monkeypatch.chdir(tmp_path)  # the tutorial writes ./training_checkpoints
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        model = port_tf_tutorial.main(epochs=2, buffer_size=1, initial_weights=initial_weights(SHAPES),
                                      train_examples=1432, test_examples=357)
    printed = out.getvalue()
    epochs = [[float(v) for v in m.groups()[1:]] for m in EPOCH_LINE.finditer(printed)]
    assert len(epochs) == 2, printed
    for ours, theirs in zip(epochs, TF_EPOCHS):
        np.testing.assert_allclose([ours[0], ours[2]], [theirs[0], theirs[2]], rtol=1e-5, err_msg=printed)
        np.testing.assert_allclose([ours[1], ours[3]], [theirs[1], theirs[3]], rtol=0, atol=1e-4, err_msg=printed)
    restored = float(RESTORED_LINE.search(printed).group(1))
    assert abs(restored - TF_RESTORED_ACCURACY) < 1e-4
    weights = model.get_weights()
    assert [w.shape for w in weights] == SHAPES
    for w, (abs_sum, first) in zip(weights, TF_FINAL_WEIGHTS):
        np.testing.assert_allclose(np.abs(w).astype(np.float64).sum(), abs_sum, rtol=2e-4)
        np.testing.assert_allclose(w.ravel()[:4], first, rtol=0, atol=1e-5)
    assert sorted(os.listdir(tmp_path / "training_checkpoints")) == ["checkpoint", "ckpt-1.npz"]

