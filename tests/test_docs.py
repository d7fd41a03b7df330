"""Every ```python block of README.md and docs/*.md runs as written.

Each page runs in its own process on 8 simulated CPU devices, its blocks top to bottom in
one namespace (as a reader runs the page), after a preamble that defines only the inputs
the page's text assumes (a model, its parameters, a loss, a few batches of the bundled
digits; the data and the CNN's parameters are made once by the test and handed to every page);
the preamble never defines anything a block demonstrates. The pages' processes share one JAX
compilation cache, so a program one page compiled is not compiled again by the next. A block right after a
`<!-- no-run: reason -->` comment is skipped; NO_RUN lists every such block, so a new one
fails this test until it is reviewed.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
# (page, first line of the block) marked <!-- no-run: ... -->: TensorFlow code shown for comparison.
NO_RUN: set[tuple[str, int]] = {("docs/porting.md", 14)}

_COMMON = """
import jax, jax.numpy as jnp, numpy as np, optax
from jax.sharding import PartitionSpec as P
import jdist
from jdist.datasets import load_digits
from jdist.models import CNN, classification_loss

# x, y, x_test, y_test: load_digits("train")[:256] / ("test")[:64] (small data: few, short steps) and params:
# CNN().init(jax.random.key(0), x[:1]), made once by the test for every page (the init alone costs seconds).
x, y, x_test, y_test, params = __inputs__
x_batch, y_batch = x[:64], y[:64]                                      # one global batch
model = CNN()
def loss_fn(params, batch):                                            # per-example losses
    return classification_loss(model.apply(params, batch["image"]), batch["label"])
batch = {"image": x_batch, "label": y_batch}
"""

# What each page's text says it starts from, beyond _COMMON.
_PAGE_SETUP = {
    "docs/checkpointing.md": """
strategy = jdist.MirroredStrategy()
with strategy.scope():
    state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))
    train_step = jdist.make_train_step(loss_fn)
state_like = state
rules = [("conv1/kernel", P(None, None, None, "model"))]
images = np.concatenate([x] * 4)                                       # 16 batches of 64 per epoch
dist_ds = strategy.experimental_distribute_dataset(
    jdist.ArrayDataset({"image": images, "label": np.concatenate([y] * 4)}, 64))
it = iter(dist_ds)
start, steps, epoch = 0, 3, 0
EPOCHS, STEPS_PER_EPOCH, STEPS = 2, 2, 2
trainer = jdist.Trainer(CNN(), optax.adam(1e-3), strategy=strategy)
""",
    "docs/input.md": """
strategy = jdist.MirroredStrategy()
dataset = jdist.ArrayDataset((x, y), 64)
def replica_step(params, batch):
    images, labels = batch
    return jdist.compute_average_loss(classification_loss(model.apply(params, images), labels),
                                      global_batch_size=64)
""",
    "docs/layouts.md": """
from jdist.models import MEGATRON_RULES, TransformerConfig, TransformerLM, lm_loss
model = TransformerLM(TransformerConfig(num_layers=1, max_len=32))
tokens = jnp.asarray(np.random.default_rng(0).integers(0, 256, (16, 33)), jnp.int32)
params = model.init(jax.random.key(0), tokens[:1, :-1])
def loss_fn(params, batch):
    return lm_loss(model.apply(params, batch[:, :-1]), batch[:, 1:])
""",
    "docs/multi_worker.md": """
def loss_fn(params, batch):                                            # this page's batches: {"x", "y"}
    return classification_loss(model.apply(params, batch["x"]), batch["y"])
global_batches = [(x, y)]
log = print
""",
    "docs/parameter_server.md": """
steps = 4
def my_endless_batches():
    while True:
        yield {"image": x_batch, "label": y_batch}
""",
    "docs/trainer.md": """
strategy = jdist.MirroredStrategy()
batches = [strategy.distribute_batch((x[i:i + 64], y[i:i + 64])) for i in range(0, len(x), 64)]
""",
    "docs/tuning.md": """
strategy = jdist.MirroredStrategy()
global_batch = batch
with strategy.scope():
    state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))
batches = [strategy.distribute_batch({"image": x[i:i + 64], "label": y[i:i + 64]}) for i in range(0, 256, 64)]
""",
}

_RUNNER = r"""
import json, os, sys, traceback
page, preamble, blocks, inputs = json.loads(sys.stdin.read())
import jax.numpy as jnp, numpy as np
from flax import traverse_util
with np.load(inputs) as saved:
    arrays = {key: saved[key] for key in saved.files}
params = traverse_util.unflatten_dict({tuple(k.split("/")[1:]): jnp.asarray(v)
                                       for k, v in arrays.items() if k.startswith("params/")})
namespace = {"__name__": "__main__", "__inputs__": (*(arrays[k] for k in ("x", "y", "x_test", "y_test")), params)}
exec(compile(preamble, page + " [preamble]", "exec"), namespace)
for line, code in blocks:
    try:
        exec(compile(code, f"{page}:{line}", "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print(f"BLOCK FAILED: {page}, the block at line {line}")
        sys.exit(1)
    print(f"ran {page}:{line}", flush=True)
"""

_NO_RUN = re.compile(r"<!--\s*no-run:.*-->")


def python_blocks(page: str) -> tuple[list[tuple[int, str]], list[int]]:
    """(line, code) of each ```python block of `page`, and the lines of those marked no-run."""
    lines = (ROOT / page).read_text().splitlines()
    blocks, skipped, i = [], [], 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            start, body = i + 1, []
            i += 1
            while lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            before = next((text for text in reversed(lines[:start - 1]) if text.strip()), "")
            if _NO_RUN.search(before):
                skipped.append(start + 1)
            else:
                blocks.append((start + 1, "\n".join(body)))
        i += 1
    return blocks, skipped


def test_no_run_blocks_are_the_reviewed_ones():
    marked = {(page, line) for page in PAGES for line in python_blocks(page)[1]}
    assert marked == NO_RUN


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> str:
    """The preamble's data and CNN parameters, made once here: the same values in every page."""
    import jax
    import numpy as np
    from flax import traverse_util

    from jdist.datasets import load_digits
    from jdist.models import CNN

    (x, y), (x_test, y_test) = load_digits("train"), load_digits("test")
    x, y, x_test, y_test = x[:256], y[:256], x_test[:64], y_test[:64]
    params = CNN().init(jax.random.key(0), x[:1])
    path = tmp_path_factory.mktemp("docs_inputs") / "inputs.npz"
    np.savez(path, x=x, y=y, x_test=x_test, y_test=y_test,
             **{"params/" + k: np.asarray(v) for k, v in traverse_util.flatten_dict(params, sep="/").items()})
    return str(path)


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory) -> str:
    """One JAX compilation cache for the pages' processes: a program another page already compiled
    (the same CNN step under the same strategy, say) is read back instead of compiled again."""
    return str(tmp_path_factory.mktemp("docs_jax_cache"))


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)[0]])
def test_page_code_blocks_run(page, tmp_path, inputs, compile_cache):
    blocks, _ = python_blocks(page)
    preamble = textwrap.dedent(_COMMON) + textwrap.dedent(_PAGE_SETUP.get(page, ""))
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu",
           "KERAS_BACKEND": "jax", "MPLBACKEND": "Agg", "JAX_COMPILATION_CACHE_DIR": compile_cache,
           "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.5"}
    result = subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps([page, preamble, blocks, inputs]),
                            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    assert result.stdout.count(f"ran {page}:") == len(blocks)
