"""A fingerprint of the compiled train step (MLP, MirroredStrategy, 8 CPU devices) and of what it trains, to show
that a refactor left both unchanged.

    python scripts/step_fingerprint.py                        # prints the two hashes
    PYTHONPATH=/path/to/other/checkout python scripts/step_fingerprint.py   # the same for another checkout

The HLO hash leaves out source locations (file names, lines, stack frames), which move with any edit; the
parameters hash is of their bytes after 3 Adam steps from the same initial values on the same batch.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


def hlo_without_locations(text: str) -> str:
    """Compiled HLO text less its metadata and source-location tables."""
    text = re.sub(r"(, )?metadata=\{[^}]*\}", "", text)
    lines = [line for line in text.splitlines()
             if not re.match(r"^\d+ (\"|\{)", line)
             and not line.startswith(("FileNames", "FunctionNames", "FileLocations", "StackFrames"))]
    return "\n".join(re.sub(r", stack_frame_id=\d+", "", line) for line in lines)


def fingerprint(steps: int = 3) -> tuple[str, str]:
    """(HLO hash, trained-parameters hash)."""
    import jax
    import numpy as np
    import optax

    import jdist
    from jdist.models import MLP, classification_loss

    strategy = jdist.MirroredStrategy()
    model = MLP()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 784)).astype(np.float32)
    y = rng.integers(0, 10, 64).astype(np.int32)
    with strategy.scope():
        params = model.init(jax.random.key(0), x[:1])["params"]
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=optax.adam(1e-3))
    step = jdist.make_train_step(lambda p, b: classification_loss(model.apply({"params": p}, b[0]), b[1]),
                                 strategy, donate=False)
    batch = strategy.distribute_batch((x, y))
    hlo = hlo_without_locations(step.lower(state, batch).compile().as_text())
    for _ in range(steps):
        state, _ = step(state, batch)
    leaves = jax.tree.leaves(jax.device_get(state.params))
    trained = hashlib.sha256(b"".join(np.asarray(leaf).tobytes() for leaf in leaves)).hexdigest()[:16]
    return hashlib.sha256(hlo.encode()).hexdigest()[:16], trained


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    hlo, trained = fingerprint(args.steps)
    print(f"compiled step (HLO less source locations): {hlo}\ntrained parameters after {args.steps} steps: {trained}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
