"""The port's tutorial section (scripts/port_tf_tutorial.py) run by TensorFlow itself.

Reference numbers for tests/test_port_tf_tutorial.py. Run only in a TensorFlow venv (never
imported by the tests; TensorFlow is not a jdist dependency):

    python -c "from jdist.datasets import load_digits; import numpy as np; \
        np.savez('/tmp/digits.npz', *load_digits('train'), *load_digits('test'))"      # jdist's venv
    /path/to/tf-venv/bin/python scripts/tf_reference/tutorial_tf.py /tmp/digits.npz --devices 8 \
        --epochs 2 --build-optimizer --train-examples 1432 --test-examples 357

The lines between the port's `# --- the tutorial` markers are read from
scripts/port_tf_tutorial.py and executed unchanged, with `tf` bound to TensorFlow itself where
the port binds it to `jdist.tf_compat` (so `tf.keras` is Keras 3 on the TensorFlow backend): the
same lines run under both frameworks. The port's test hooks get: `buffer_size` (default 1: TF's
shuffle with a one-element buffer keeps the order), `epochs`, and `initial_weights`, the
arrays `initial_weights()` below makes from a numpy seed (the test makes the same ones).
The data are the digits from the npz file, not Fashion-MNIST.

Every port line runs under TF 2.21 unchanged.
`optimizer.build(model.trainable_variables)` is one of the port's lines, so `--build-optimizer`
is always in effect (the flag is accepted so that recorded commands run as written). Without
that line TF 2.21 fails the first step under MirroredStrategy with 2 or more logical devices
("You must feed a value for placeholder tensor 'cond/else/_1/cond/Placeholder'", raised from
Adam's slot variables, which the first `apply_gradients` creates inside the `tf.function`);
with one device it runs. Observed with tensorflow-cpu 2.21.0 and Keras 3.15.1.
"""
import argparse
import os
import tempfile
import textwrap
from pathlib import Path

import numpy as np

PORT = Path(__file__).resolve().parents[1] / "port_tf_tutorial.py"
START, END = "# --- the tutorial", "# --- end of the tutorial"

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("data")
parser.add_argument("--devices", type=int, default=8)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--train-examples", type=int, default=None)
parser.add_argument("--test-examples", type=int, default=None)
parser.add_argument("--buffer-size", type=int, default=1)
parser.add_argument("--checkpoint-dir", default=None,
                    help="directory to run in (the tutorial writes ./training_checkpoints); default: a new temporary one")
parser.add_argument("--build-optimizer", action="store_true",
                    help="always in effect: the port's section builds the optimizer (see above)")
parser.add_argument("--save-weights", default=None, help="write the final weights to this .npz")
args = parser.parse_args()

os.environ["KERAS_BACKEND"] = "tensorflow"  # tf.keras is Keras 3 on TensorFlow
import tensorflow as tf  # noqa: E402

cpu, = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * args.devices)

def initial_weights(shapes, seed=0):
    """Glorot-uniform kernels and zero biases from a numpy seed (the test makes the same arrays)."""
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


def tutorial_section() -> str:
    """The port's lines between its markers, dedented out of `main()`, at their line numbers in the port.

    The line numbers matter: `tf.function` (autograph) reads a function's source from the file
    its code object names, at its first line.
    """
    text = PORT.read_text()
    start = text.index("\n", text.index(START)) + 1
    return "\n" * text.count("\n", 0, start) + textwrap.dedent(text[start:text.index(END)])


data = np.load(args.data)
train_images, train_labels = data["arr_0"][:args.train_examples], data["arr_1"][:args.train_examples]
test_images, test_labels = data["arr_2"][:args.test_examples], data["arr_3"][:args.test_examples]
SHAPES = [(3, 3, 1, 32), (32,), (3, 3, 32, 64), (64,), (1600, 64), (64,), (64, 10), (10,)]

namespace = {"tf": tf, "os": os,
             "train_images": train_images, "train_labels": train_labels,
             "test_images": test_images, "test_labels": test_labels,
             "buffer_size": args.buffer_size, "epochs": args.epochs, "initial_weights": initial_weights(SHAPES)}
os.chdir(args.checkpoint_dir or tempfile.mkdtemp(prefix="tutorial_tf_"))
exec(compile(tutorial_section(), str(PORT), "exec"), namespace)

if args.save_weights:
    np.savez(args.save_weights, *namespace["model"].get_weights())
