"""Keeps numpy's global random state as it was before jdist was imported.

Importing jax draws from numpy's global generator (jax._src.clusters.k8s_cluster draws `np.random.rand(5)` when
imported), while importing TF 2.21 does not (observed: after `np.random.seed(0); import tensorflow`, the next
`np.random.randint(0, 5, 200)[0]` is 2, as with no import at all). A TF script that seeds numpy before
`import jdist.tf_compat as tf` then draws the same numbers as under TF. Imported first by `jdist/__init__.py`.
"""
import numpy as np

_STATE = np.random.get_state()
import jax  # noqa: E402,F401  (the import that draws)

np.random.set_state(_STATE)
