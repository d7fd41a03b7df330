"""TF's DTensor across two processes (clients), each placing only its own pieces, through `jdist.launch`."""
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from dtensor_mlp import TF_MLP_STEPS

ROOT = Path(__file__).resolve().parents[1]
JOB = Path(__file__).resolve().parent / "multiworker_scripts" / "dtensor_job.py"

pytestmark = pytest.mark.multiprocess  # worker processes that must meet in time: the serial pass


def test_two_clients_pack_their_pieces_and_train_as_one_process():
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)}
    env.pop("XLA_FLAGS", None)  # the launcher gives each worker its 4 devices
    out = subprocess.run([sys.executable, "-m", "jdist.launch", "--num-workers", "2", "--devices-per-worker", "4",
                          "--timeout", "60", "--", sys.executable, str(JOB)], capture_output=True, text=True,
                         timeout=240, env=env, cwd=ROOT)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text[-4000:]
    for client, ids in ((0, "[0, 1, 2, 3]"), (1, "[4, 5, 6, 7]")):
        assert f"client {client} of 2: CPU, 4 local devices, ids {ids}" in text
    # rows 0..7 of an (8, 2) tensor split over "batch" (4) and replicated over "model" (2): each client packed its
    # own two row pairs, and the sum and the replicated value are the whole tensor's on both
    assert "client 0 sum 120.0 replicated [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0] pieces [[0.0, 2.0], [0.0, " \
           "2.0], [4.0, 6.0], [4.0, 6.0]]" in text
    assert "client 1 sum 120.0 replicated [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0] pieces [[8.0, 10.0], [8.0, " \
           "10.0], [12.0, 14.0], [12.0, 14.0]]" in text
    for client in (0, 1):
        found = re.search(rf"client {client} losses \[(.*)\] kernel \['unsharded', 'model'\]", text)
        assert found is not None, text[-4000:]
        np.testing.assert_allclose([float(v) for v in found[1].split(",")], [s[0] for s in TF_MLP_STEPS], rtol=1e-5)
