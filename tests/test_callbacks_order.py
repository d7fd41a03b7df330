"""The Trainer calls every callback hook as Keras 3's own `fit`, `evaluate` and `predict` do: same hooks, same
order, same batch numbers, logs with the same keys (begin hooks get `{}`).

KERAS_HOOKS was observed with Keras 3.15.1 (KERAS_BACKEND=jax, this project's venv): a recording callback
(every hook appends (hook, batch?, sorted logs keys)) on a `keras.Sequential([Input((3,)), Dense(2)])`
compiled with sgd, SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
steps_per_execution=k; `fit(x[10], y, batch_size=4, epochs=2, validation_data=(x[:6], y[:6]), shuffle=False)`,
then `evaluate(x[:6], y[:6], batch_size=4)` and `predict(x, batch_size=4)`. Keys: ("FIT"|"EVAL"|"PRED", k).
"""
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jdist
from jdist.callbacks import Callback

KERAS_HOOKS = {('EVAL', 1): [('on_test_begin', ()), ('on_test_batch_begin', 0, ()),
               ('on_test_batch_end', 0, ('accuracy', 'loss')), ('on_test_batch_begin', 1, ()),
               ('on_test_batch_end', 1, ('accuracy', 'loss')), ('on_test_end', ('accuracy', 'loss'))],
 ('EVAL', 2): [('on_test_begin', ()), ('on_test_batch_begin', 0, ()),
               ('on_test_batch_end', 1, ('accuracy', 'loss')), ('on_test_end', ('accuracy', 'loss'))],
 ('FIT', 1): [('on_train_begin', ()), ('on_epoch_begin', 0, ()), ('on_train_batch_begin', 0, ()),
              ('on_train_batch_end', 0, ('accuracy', 'loss')), ('on_train_batch_begin', 1, ()),
              ('on_train_batch_end', 1, ('accuracy', 'loss')), ('on_train_batch_begin', 2, ()),
              ('on_train_batch_end', 2, ('accuracy', 'loss')), ('on_test_begin', ()),
              ('on_test_batch_begin', 0, ()), ('on_test_batch_end', 0, ('accuracy', 'loss')),
              ('on_test_batch_begin', 1, ()), ('on_test_batch_end', 1, ('accuracy', 'loss')),
              ('on_test_end', ('accuracy', 'loss')),
              ('on_epoch_end', 0, ('accuracy', 'loss', 'val_accuracy', 'val_loss')), ('on_epoch_begin', 1, ()),
              ('on_train_batch_begin', 0, ()), ('on_train_batch_end', 0, ('accuracy', 'loss')),
              ('on_train_batch_begin', 1, ()), ('on_train_batch_end', 1, ('accuracy', 'loss')),
              ('on_train_batch_begin', 2, ()), ('on_train_batch_end', 2, ('accuracy', 'loss')),
              ('on_test_begin', ()), ('on_test_batch_begin', 0, ()), ('on_test_batch_end', 0, ('accuracy', 'loss')),
              ('on_test_batch_begin', 1, ()), ('on_test_batch_end', 1, ('accuracy', 'loss')),
              ('on_test_end', ('accuracy', 'loss')),
              ('on_epoch_end', 1, ('accuracy', 'loss', 'val_accuracy', 'val_loss')),
              ('on_train_end', ('accuracy', 'loss', 'val_accuracy', 'val_loss'))],
 ('FIT', 2): [('on_train_begin', ()), ('on_epoch_begin', 0, ()), ('on_train_batch_begin', 0, ()),
              ('on_train_batch_end', 1, ('accuracy', 'loss')), ('on_train_batch_begin', 2, ()),
              ('on_train_batch_end', 3, ('accuracy', 'loss')), ('on_test_begin', ()),
              ('on_test_batch_begin', 0, ()), ('on_test_batch_end', 1, ('accuracy', 'loss')),
              ('on_test_end', ('accuracy', 'loss')),
              ('on_epoch_end', 0, ('accuracy', 'loss', 'val_accuracy', 'val_loss')), ('on_epoch_begin', 1, ()),
              ('on_train_batch_begin', 0, ()), ('on_train_batch_end', 1, ('accuracy', 'loss')),
              ('on_train_batch_begin', 2, ()), ('on_train_batch_end', 3, ('accuracy', 'loss')),
              ('on_test_begin', ()), ('on_test_batch_begin', 0, ()), ('on_test_batch_end', 1, ('accuracy', 'loss')),
              ('on_test_end', ('accuracy', 'loss')),
              ('on_epoch_end', 1, ('accuracy', 'loss', 'val_accuracy', 'val_loss')),
              ('on_train_end', ('accuracy', 'loss', 'val_accuracy', 'val_loss'))],
 ('PRED', 1): [('on_predict_begin', ()), ('on_predict_batch_begin', 0, ()),
               ('on_predict_batch_end', 0, ('outputs',)), ('on_predict_batch_begin', 1, ()),
               ('on_predict_batch_end', 1, ('outputs',)), ('on_predict_batch_begin', 2, ()),
               ('on_predict_batch_end', 2, ('outputs',)), ('on_predict_end', ())],
 ('PRED', 2): [('on_predict_begin', ()), ('on_predict_batch_begin', 0, ()),
               ('on_predict_batch_end', 1, ('outputs',)), ('on_predict_batch_begin', 2, ()),
               ('on_predict_batch_end', 3, ('outputs',)), ('on_predict_end', ())]}

_HOOKS = [name for name in vars(Callback) if name.startswith("on_")]


class Recorder(Callback):
    def __init__(self):
        super().__init__()
        self.seen = []


def _recording(name):
    def hook(self, *args):
        *batch, logs = args
        self.seen.append((name, *batch, None if logs is None else tuple(sorted(logs))))
    return hook


for _name in _HOOKS:
    setattr(Recorder, _name, _recording(_name))


def test_every_documented_hook_is_recorded():
    assert len(_HOOKS) == 14  # train, epoch, train/test/predict batch begin+end, test/predict begin+end


@pytest.mark.parametrize("k", [1, 2])
def test_hooks_follow_keras_fit_evaluate_and_predict(k):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32)
    trainer = jdist.Trainer(lambda p, x: x @ p["w"] + p["b"], optax.sgd(0.1), metrics=["accuracy"],
                            params={"w": jnp.zeros((3, 2)), "b": jnp.zeros(2)}, steps_per_execution=k,
                            strategy=jdist.MirroredStrategy())
    recorder = Recorder()
    trainer.fit(x, y, batch_size=4, epochs=2, validation_data=(x[:6], y[:6]), callbacks=[recorder], verbose=0,
                shuffle=False)
    assert recorder.seen == KERAS_HOOKS["FIT", k]
    recorder = Recorder()
    trainer.evaluate(x[:6], y[:6], batch_size=4, callbacks=[recorder], verbose=0)
    assert recorder.seen == KERAS_HOOKS["EVAL", k]
    recorder = Recorder()
    predictions = trainer.predict(x, batch_size=4, callbacks=[recorder], verbose=0)
    assert recorder.seen == KERAS_HOOKS["PRED", k]
    assert predictions.shape == (10, 2)


def test_predict_batch_end_logs_hold_the_real_outputs_of_the_execution():
    outputs = []

    class Outputs(Callback):
        def on_predict_batch_end(self, batch, logs=None):
            outputs.append(np.asarray(logs["outputs"]))

    x = np.arange(30.0, dtype=np.float32).reshape(10, 3)
    trainer = jdist.Trainer(lambda p, x: x @ p["w"], optax.sgd(0.1), params={"w": jnp.ones((3, 1))},
                            strategy=jdist.MirroredStrategy())
    predictions = trainer.predict(x, batch_size=4, callbacks=[Outputs()], verbose=0)
    assert [o.shape[0] for o in outputs] == [4, 4, 2]  # the short last batch: its 2 real rows only
    np.testing.assert_array_equal(np.concatenate(outputs), predictions)
