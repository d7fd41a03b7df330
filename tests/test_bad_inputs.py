"""Bad inputs fail fast with a jdist error naming the problem: never a hang, a crash, a raw
JAX / flax error from deep inside a trace, or a silent return.

Each case is a call that must raise an exception (a `ValueError` / `TypeError` family error,
raised from jdist's own code) whose message matches a pattern naming the problem. One small
model, built and trained once for the whole module; every bad call fails on the host before
anything compiles.
"""
from __future__ import annotations

import json
import os
import traceback

import flax.linen as nn
import jax
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

import jdist
from jdist.cluster import TFConfigClusterResolver
from jdist.input import label_checks

N, FEATURES, CLASSES = 64, 8, 10
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, FEATURES)).astype(np.float32)
Y = (np.arange(N) % CLASSES).astype(np.int32)


class Dense(nn.Module):
    units: int = CLASSES

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.units)(x)


@pytest.fixture(scope="module")
def strategy():
    return jdist.MirroredStrategy()


@pytest.fixture(scope="module")
def trainer(strategy):
    t = jdist.Trainer(Dense(), optax.sgd(0.1), strategy=strategy)
    t.fit(X, Y, batch_size=32, epochs=1, verbose=0)
    return t


@pytest.fixture(scope="module")
def step_and_state(strategy):
    model = Dense()
    with strategy.scope():
        params = model.init(jax.random.key(0), X[:1])
        state = jdist.TrainState.create(apply_fn=model.apply, params=params, tx=optax.sgd(0.1))
    step = jdist.make_train_step(
        lambda p, b: optax.softmax_cross_entropy_with_integer_labels(model.apply(p, b["x"]), b["y"]), donate=False)
    jax.block_until_ready(step(state, {"x": X, "y": Y}))  # the first batch: the reference ranks
    return step, state


@pytest.fixture(scope="module")
def weights_dir(trainer, tmp_path_factory):
    path = tmp_path_factory.mktemp("weights") / "dense10"
    trainer.save_weights(path)
    return path


def _tf_config(monkeypatch, config):
    monkeypatch.setenv("TF_CONFIG", config if isinstance(config, str) else json.dumps(config))
    TFConfigClusterResolver().validate()


W2 = {"worker": ["h0:2222", "h1:2222"]}
TF_CONFIG_CASES = [
    ("{bad json", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ({"cluster": W2, "task": "worker"}, "'task' must be an object"),
    ({"cluster": W2, "task": {"type": "worker", "index": "x"}}, "task index must be an integer"),
    ({"cluster": W2, "task": {"type": "boss", "index": 0}}, "task_type"),
    ({"cluster": W2, "task": {"type": "worker", "index": 5}}, "index 5|5"),
    ({"cluster": W2, "task": {"type": "worker", "index": -1}}, "non-negative"),
    ({"cluster": {"worker": "h0:2222"}, "task": {"type": "worker", "index": 0}}, "must list its task addresses"),
    ({"cluster": {"worker": [1234]}, "task": {"type": "worker", "index": 0}}, "not a string"),
    ({"cluster": {"worker": ["h0"]}, "task": {"type": "worker", "index": 0}}, "port|host:port"),
    ({"cluster": {}, "task": {"type": "worker", "index": 0}}, "cluster spec is empty"),
    ({"cluster": W2}, "names no task"),
    ({"cluster": W2, "task": {"type": "chief", "index": 0}}, "chief"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("config,pattern", TF_CONFIG_CASES, ids=[f"tf_config{i}" for i in range(len(TF_CONFIG_CASES))])
def test_bad_tf_config(monkeypatch, config, pattern):
    _raises_jdist_error(lambda: _tf_config(monkeypatch, config), pattern)


def _fresh_step():
    """A step that has seen no batch yet (no reference ranks): the model itself must name the mismatch."""
    model = Dense()
    return jdist.make_eval_step(
        lambda p, b: optax.softmax_cross_entropy_with_integer_labels(model.apply(p, b["x"]), b["y"]))


def _dataset_next(strategy, element):
    return next(iter(strategy.experimental_distribute_dataset([element])))


BATCH_CASES = {
    # Trainer.evaluate / fit / predict on arrays and iterables
    "empty arrays": (lambda t, s, st: t.evaluate(X[:0], Y[:0], verbose=0), r"x has shape \(0, 8\): 0 examples"),
    "string x": (lambda t, s, st: t.evaluate(X.astype(str), Y, verbose=0), r"x has dtype <U.*strings"),
    "object x": (lambda t, s, st: t.evaluate(X.astype(object), Y, verbose=0), r"x has dtype object"),
    "bytes x": (lambda t, s, st: t.predict(X.astype(bytes), verbose=0), r"x has dtype \|S.*bytes"),
    "None leaf": (lambda t, s, st: t.evaluate({"a": X, "b": None}, Y, verbose=0), r"x\['b'\] is None"),
    "string leaf in dict": (lambda t, s, st: t.predict({"a": X, "b": X.astype(str)}, verbose=0),
                            r"x\['b'\] has dtype"),
    "wrong rank": (lambda t, s, st: t.evaluate(X[:, :, None], Y, verbose=0),
                   r"x has shape \(32, 8, 1\) \(rank 3\).*\(32, 8\) \(rank 2\)"),
    "wrong rank predict": (lambda t, s, st: t.predict(X[:, 0], verbose=0), r"x has shape \(32,\) \(rank 1\)"),
    "wrong feature size": (lambda t, s, st: t.evaluate(X[:, :5], Y, verbose=0),
                           r"model cannot take this batch: x has shapes \(32, 5\)"),
    "empty batch in iterable": (lambda t, s, st: t.evaluate([(X[:32], Y[:32]), (X[:0], Y[:0])], verbose=0),
                                r"empty batch|0 examples"),
    "4-tuple batch": (lambda t, s, st: t.evaluate([(X, Y, Y, Y)], verbose=0), r"\(x, y, sample_weight\)"),
    "x/y lengths differ": (lambda t, s, st: t.evaluate(X, Y[:32], verbose=0), r"x has 64 examples but y has 32"),
    "string labels": (lambda t, s, st: t.evaluate(X, Y.astype(str), verbose=0), r"y has dtype <U"),
    "None labels in iterable": (lambda t, s, st: t.evaluate([(X[:32], None)], verbose=0), r"without targets"),
    # make_train_step steps
    "step: string leaf": (lambda t, s, st: st[0](st[1], {"x": X, "y": Y.astype(str)}), r"batch\['y'\] has dtype"),
    "step: None leaf": (lambda t, s, st: st[0](st[1], {"x": X, "y": None}), r"batch\['y'\] is None"),
    "step: empty batch": (lambda t, s, st: st[0](st[1], {"x": X[:0], "y": Y[:0]}), r"batch\['x'\].*0 examples"),
    "step: wrong rank": (lambda t, s, st: st[0](st[1], {"x": X[:, :, None], "y": Y}),
                         r"batch\['x'\] has shape \(64, 8, 1\) \(rank 3\)"),
    "step: scalar leaf": (lambda t, s, st: st[0](st[1], {"x": X, "y": np.int32(3)}), r"batch\['y'\] is a scalar"),
    "step: wrong rank, first batch": (lambda t, s, st: _fresh_step()(st[1], {"x": X[:, :, None], "y": Y}),
                                      r"model cannot take this batch: batch has shapes.*\(64, 8, 1\)"),
    "step: wrong feature size": (lambda t, s, st: _fresh_step()(st[1], {"x": X[:, :5], "y": Y}),
                                 r"model cannot take this batch: batch has shapes.*\(64, 5\)"),
    "step: distributed string labels": (lambda t, s, st: st[0](st[1], s.distribute_batch({"x": X, "y": Y.astype(str)})),
                                        r"batch\['y'\] has dtype <U"),
    # strategy.distribute_batch: the Trainer's rules and messages
    "distribute_batch: string labels": (lambda t, s, st: s.distribute_batch((X, Y.astype(str))),
                                        r"batch\[1\] has dtype <U.*strings"),
    "distribute_batch: object x": (lambda t, s, st: s.distribute_batch({"x": X.astype(object), "y": Y}),
                                   r"batch\['x'\] has dtype object"),
    "distribute_batch: None leaf": (lambda t, s, st: s.distribute_batch({"x": X, "y": None}), r"batch\['y'\] is None"),
    "distribute_batch: empty": (lambda t, s, st: s.distribute_batch(X[:0]), r"0 examples"),
    "distribute_batch: scalar": (lambda t, s, st: s.distribute_batch((X, np.float32(1))), r"batch\[1\] is a scalar"),
    # strategy.run: arrays JAX cannot take, and a model that cannot take the batch
    "run: string argument": (lambda t, s, st: s.run(lambda p, b: b, args=(st[1].params, Y.astype(str))),
                             r"args\[1\] has dtype <U"),
    "run: wrong rank": (lambda t, s, st: s.run(lambda p, x: Dense().apply(p, x),
                                               args=(st[1].params, s.distribute_batch(X[:, :, None]))),
                        r"model cannot take this batch: the input has shapes.*\(64, 8, 1\)"),
    # distributed datasets
    "dataset: None leaf": (lambda t, s, st: _dataset_next(s, {"x": X, "y": None}), r"element\['y'\] is None"),
    "dataset: object leaf": (lambda t, s, st: _dataset_next(s, (X.astype(object), Y)), r"element\[0\] has dtype object"),
    "dataset: bytes leaf": (lambda t, s, st: _dataset_next(s, {"x": X, "y": Y.astype(bytes)}),
                            r"element\['y'\] has dtype \|S"),
    "dataset: string leaf": (lambda t, s, st: _dataset_next(s, (X, Y.astype(str))), r"element\[1\] has dtype <U"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(BATCH_CASES))
def test_bad_batch(trainer, strategy, step_and_state, name):
    call, pattern = BATCH_CASES[name]
    _raises_jdist_error(lambda: call(trainer, strategy, step_and_state), pattern)


LABEL_CASES = {
    # Keras 3.15 also raises for one-hot labels with sparse_categorical_crossentropy (observed): "Argument
    # `output` must have rank (ndim) `target.ndim - 1`. Received: target.shape=(32, 10), output.shape=(32, 10)"
    "one-hot": (np.eye(CLASSES, dtype=np.float32)[Y], r"one-hot.*integer labels.*categorical_crossentropy"),
    # Keras 3.15 / TF 2.21 (observed, at the step): "Received a label value of 19 which is outside the valid
    # range of [0, 10)."
    "label + 10": (Y + 10, r"label value of 10 at row 0 of the batch.*valid range of \[0, 10\)"),
    "negative": (Y - 3, r"label value of -3 at row 0 of the batch.*\[0, 10\)"),
    "non-integer": (Y + 0.5, r"non-integer label 0.5 at row 0"),
    "two columns": (np.stack([Y, Y], 1), r"expects labels of shape \(32,\).*found \(32, 2\)"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(LABEL_CASES))
def test_bad_labels(trainer, name):
    labels, pattern = LABEL_CASES[name]
    _raises_jdist_error(lambda: trainer.evaluate(X, labels, verbose=0), pattern)


@pytest.mark.timeout(60)
def test_bad_labels_in_fit_name_the_step(trainer):
    before = jax.tree.map(np.asarray, trainer.state.params)
    bad = [(X[:32], Y[:32]), (X[32:], np.where(np.arange(32) == 5, 12, Y[32:]))]
    _raises_jdist_error(lambda: trainer.fit(bad, epochs=1, verbose=0),
                        r"batch 1 of this pass, training step \d+\): received a label value of 12 at row 5")
    # The bad batch never reached a step: only the first batch trained.
    assert not np.allclose(jax.tree.leaves(before)[0], np.asarray(jax.tree.leaves(trainer.state.params)[0]))


TABLE_CASES = {  # the label checks of losses given by name, on (batch 4, 3 outputs)
    "categorical: integer labels": ("categorical_crossentropy", np.arange(4), (4, 3),
                                    r"integer class ids.*sparse_categorical_crossentropy"),
    "categorical: negative": ("categorical_crossentropy", -np.ones((4, 3)), (4, 3), r"probabilities, found -1"),
    "binary: out of [0, 1]": ("binary_crossentropy", np.full((4, 1), 2.0), (4, 1), r"targets in \[0, 1\], found 2"),
    "binary: shape": ("binary_crossentropy", np.zeros((4, 3)), (4, 1), r"shaped like the model's output \(4, 1\)"),
    "mse: broadcasting shape": ("mse", np.zeros((4, 3)), (4, 1), r"would broadcast"),
    "sparse: (n, 1) out of range": ("sparse_categorical_crossentropy", np.full((4, 1), 3), (4, 3),
                                    r"label value of 3 at index \(0, 0\)"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(TABLE_CASES))
def test_label_check_table(name):
    loss, labels, output_shape, pattern = TABLE_CASES[name]
    check = label_checks.label_check_for(loss)
    _raises_jdist_error(lambda: check(labels, output_shape, "labels y"), pattern)


MESH = {"data": 2, "model": 4}
LAYOUT_CASES = {
    "rule matching nothing": ([("no_such_layer/kernel", P(None, "model"))],
                              r"match no parameter: \('no_such_layer/kernel'.*nearest.*'params/Dense_0/kernel'"),
    "missing mesh axis": ([("kernel", P(None, "tensor"))], r"mesh axis 'tensor'"),
    "spec longer than rank": ([("bias", P(None, "model"))], r"'params/Dense_0/bias' with shape \(10,\).*rank 1"),
    "not divisible": ([("kernel", P(None, "model")), ("bias", P("data"))], r"not divisible|divisible"),
    "two rules match": ([("kernel", P(None, "model")), ("Dense_0/kernel", P())], r"matches 2 rules"),
    "bare string spec": ([("kernel", "model")], r"bare string 'model'"),
    "bad regex": ([("kernel(", P())], r"not a valid regular expression"),
    "layout is a string": ("kernel", r"layout must be"),
    "duplicate patterns": ([("kernel", P()), ("kernel", P())], r"Duplicate rule patterns"),
    "rule not a pair": ([("kernel",)], r"\(regex, spec\) pair"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(LAYOUT_CASES))
def test_bad_layout(name):
    rules, pattern = LAYOUT_CASES[name]

    def build():
        strategy = jdist.Strategy(mesh_shape=MESH, layout=rules)
        model = Dense()
        with strategy.scope():
            params = model.init(jax.random.key(0), X[:1])
            jdist.TrainState.create(apply_fn=model.apply, params=params, tx=optax.sgd(0.1))

    _raises_jdist_error(build, pattern)


DEVICE_CASES = {
    "duplicates": (lambda: jdist.MirroredStrategy(devices=["cpu:0", "cpu:0"]), r"No duplicates"),
    "empty list": (lambda: jdist.MirroredStrategy(devices=[]), r"at least one device"),
    "no such backend": (lambda: jdist.MirroredStrategy(devices=["tpu:0"]), r"no TPU backend"),
    "index too large": (lambda: jdist.MirroredStrategy(devices=["cpu:99"]), r"only 8 CPU device"),
    "unparsable": (lambda: jdist.MirroredStrategy(devices=["???"]), r"Cannot parse device"),
    "not a device": (lambda: jdist.MirroredStrategy(devices=[3.5]), r"jax.Device or a string"),
    "mesh too large": (lambda: jdist.Strategy(mesh_shape={"data": 3, "model": 4}), r"12|mesh"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(DEVICE_CASES))
def test_bad_devices(name):
    call, pattern = DEVICE_CASES[name]
    _raises_jdist_error(call, pattern)


FIT_CASES = {
    "batch_size float": (dict(batch_size=32.0), r"batch_size must be an integer.*got 32.0.*batch_size=32"),
    "batch_size zero": (dict(batch_size=0), r"batch_size must be an integer >= 1, got 0"),
    "batch_size negative": (dict(batch_size=-4), r"batch_size must be an integer >= 1, got -4"),
    "batch_size string": (dict(batch_size="32"), r"batch_size must be an integer"),
    "batch_size bool": (dict(batch_size=True), r"batch_size must be an integer"),
    "epochs negative": (dict(epochs=-1), r"epochs must be an integer >= 0, got -1"),
    "epochs float": (dict(epochs=2.5), r"epochs must be an integer"),
    "steps_per_epoch zero": (dict(steps_per_epoch=0), r"steps_per_epoch must be an integer >= 1"),
    "initial_epoch past epochs": (dict(initial_epoch=3, epochs=1), r"initial_epoch=3 is past epochs=1"),
    "validation_split too large": (dict(validation_split=1.5), r"validation_split must be in \[0, 1\)"),
    "validation_split string": (dict(validation_split="0.1"), r"validation_split must be a float"),
    "validation_freq zero": (dict(validation_freq=0), r"validation_freq"),
    "validation_steps zero": (dict(validation_steps=0), r"validation_steps must be an integer >= 1"),
    "class and sample weights": (dict(class_weight={0: 1.0}, sample_weight=np.ones(N)), r"class_weight.*sample_weight"),
    "too many steps": (dict(steps_per_epoch=99, batch_size=32), r"steps=99 but the arrays hold only 2 batches"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(FIT_CASES))
def test_bad_fit_arguments(trainer, name):
    kwargs, pattern = FIT_CASES[name]
    _raises_jdist_error(lambda: trainer.fit(X, Y, verbose=0, **kwargs), pattern)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("call,pattern", [
    (lambda t: t.evaluate(X, Y, steps=0, verbose=0), r"evaluate\(\): steps must be an integer >= 1"),
    (lambda t: t.predict(X, batch_size=2.0, verbose=0), r"predict\(\): batch_size must be an integer"),
    (lambda t: jdist.Trainer(Dense(), optax.sgd(0.1), steps_per_execution=0), r"steps_per_execution"),
    (lambda t: jdist.Trainer(Dense(), optax.sgd(0.1), loss="no_such_loss"), r"Unknown loss 'no_such_loss'"),
], ids=["evaluate steps", "predict batch_size", "steps_per_execution", "unknown loss"])
def test_bad_other_arguments(trainer, call, pattern):
    _raises_jdist_error(lambda: call(trainer), pattern)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", ["another model", "no checkpoint"])
def test_bad_checkpoints(strategy, weights_dir, tmp_path, case):
    other = jdist.Trainer(Dense(units=12), optax.sgd(0.1), strategy=strategy,
                          params=Dense(units=12).init(jax.random.key(1), X[:1]))
    if case == "another model":
        _raises_jdist_error(lambda: other.load_weights(weights_dir), r"kernel|bias|shape")
    else:
        _raises_jdist_error(lambda: other.load_weights(tmp_path / "nothing"), r"No checkpoint found")


@pytest.mark.timeout(60)
def test_check_numerics_names_leaf_and_step(trainer, step_and_state, strategy):
    x = X.copy()
    x[37, 2] = np.nan
    jdist.enable_check_numerics()
    try:
        _raises_jdist_error(lambda: trainer.evaluate(x, Y, batch_size=32, verbose=0),
                            r"x holds nan at index \(5, 2\) \(row 5 of batch 1 of this pass\)")
        step, state = step_and_state
        _raises_jdist_error(lambda: step(state, strategy.distribute_batch({"x": x, "y": Y})),
                            r"batch\['x'\] holds nan at index \(37, 2\).*state.step 0")
    finally:
        jdist.disable_check_numerics()


def _raises_jdist_error(call, pattern):
    """`call()` raises a ValueError / TypeError (jdist's error families) from jdist's own code,
    whose message matches `pattern`."""
    try:
        result = call()
    except (ValueError, TypeError, FileNotFoundError) as error:
        frames = traceback.extract_tb(error.__traceback__)
        origin = frames[-1].filename
        assert f"{os.sep}jdist{os.sep}" in origin, f"raised outside jdist, at {origin}: {error!r}"
        import re
        assert re.search(pattern, str(error), re.S), f"{pattern!r} not in: {error}"
        return
    pytest.fail(f"returned {result!r} instead of raising")


@pytest.mark.timeout(60)
def test_strings_may_stay_on_the_host(strategy):
    """TF keeps string features on the host with experimental_fetch_to_device=False; so does jdist."""
    options = jdist.InputOptions(experimental_fetch_to_device=False)
    names = np.array([f"n{i}" for i in range(16)])
    batch = next(iter(strategy.experimental_distribute_dataset([(X[:16], names)], options)))
    assert list(batch.value[1]) == list(names)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("loss,labels,pattern", [
    ("categorical_crossentropy", Y, r"one-hot labels of shape \(32, 10\).*sparse_categorical_crossentropy"),
    ("binary_crossentropy", np.full((N, CLASSES), 2.0, np.float32), r"targets in \[0, 1\], found 2"),
    (jdist.losses.SparseCategoricalCrossentropy(from_logits=True), Y + 1, r"label value of 10 at row 9"),
], ids=["categorical", "binary", "sparse object"])
def test_losses_by_name_check_their_labels(strategy, loss, labels, pattern):
    trainer = jdist.Trainer(Dense(), optax.sgd(0.1), loss=loss, strategy=strategy)
    _raises_jdist_error(lambda: trainer.fit(X, labels, batch_size=32, shuffle=False, verbose=0), pattern)


# ------------------------------------------------ one rule set for every entry point that takes a batch
_BAD_BATCHES = {
    "string labels": {"x": X, "y": Y.astype(str)},
    "object x": {"x": X.astype(object), "y": Y},
    "bytes labels": {"x": X, "y": Y.astype(bytes)},
    "None labels": {"x": X, "y": None},
    "scalar labels": {"x": X, "y": np.int32(3)},
    "empty": {"x": X[:0], "y": Y[:0]},
    "sizes differ": {"x": X, "y": Y[:8]},
}
_NON_NUMERIC = {"string labels", "object x", "bytes labels"}


def _entry_points(strategy, step_and_state, trainer):
    step, state = step_and_state
    return {
        "distribute_batch": lambda b: strategy.distribute_batch(b),
        "train step": lambda b: step(state, b),
        "eval step": lambda b: _fresh_step()(state, b),
        "run on a distributed batch": lambda b: strategy.run(lambda p, b: b, args=(state.params,
                                                                                  strategy.distribute_batch(b))),
        "run on host arrays": lambda b: strategy.run(lambda p, b: b, args=(state.params, b)),
        "distributed dataset": lambda b: _dataset_next(strategy, b),
        "Trainer.evaluate": lambda b: trainer.evaluate([(b["x"], b["y"])], verbose=0),
    }


@pytest.mark.timeout(120)
@pytest.mark.parametrize("bad", list(_BAD_BATCHES))
def test_every_entry_point_names_a_bad_batch(trainer, strategy, step_and_state, bad):
    """No raw JAX / flax / numpy error and no silent result, wherever the batch goes in. `run` broadcasts host
    arrays (they are not batches), so there only dtypes JAX cannot hold are the input's fault."""
    for name, call in _entry_points(strategy, step_and_state, trainer).items():
        if name == "run on host arrays" and bad not in _NON_NUMERIC:
            continue
        try:
            _raises_jdist_error(lambda: call(_BAD_BATCHES[bad]), r".")
        except AssertionError as error:
            raise AssertionError(f"{name}: {error}") from None
