"""TF's SavedModel guides (`guide/saved_model`, `guide/migrate/saved_model`) under `import jdist.tf_compat as tf`.

Every expected value was observed in TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15), running the guides' cells with
their downloads replaced: MobileNet with imagenet weights by a small Keras Sequential (Conv2D, BatchNormalization,
pooling, Dense) and the Grace Hopper photo by a random 32x32 image; the TF1 cells (Session, Builder, Estimator)
are refused by jdist with errors naming the TF2 replacement.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402


class CustomModule(tf.Module):
    """guide/saved_model's module: a variable, a traced `__call__`, `mutate` with an input_signature."""

    def __init__(self):
        super().__init__()
        self.v = tf.Variable(1.)

    @tf.function
    def __call__(self, x):
        return x * self.v

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32)])
    def mutate(self, new_v):
        self.v.assign(new_v)


@pytest.fixture(scope="module")
def no_signatures(tmp_path_factory):
    module = CustomModule()
    module(tf.constant(0.))
    path = str(tmp_path_factory.mktemp("sm") / "module_no_signatures")
    tf.saved_model.save(module, path)
    return module, path


def test_guide_module_roundtrip_and_mutate(no_signatures):
    # guide cell 36; observed in TF 2.21: 3 -> 3, then mutate(2) -> 6; no signatures (cell 45)
    _, path = no_signatures
    imported = tf.saved_model.load(path)
    assert imported(tf.constant(3.)).numpy() == 3
    imported.mutate(tf.constant(2.))
    assert imported(tf.constant(3.)).numpy() == 6
    assert len(imported.signatures) == 0


def test_guide_trains_loaded_module_with_tape(no_signatures):
    # guide cell 39-40: SGD(0.05) on (10 - imported(2))**2 through tf.GradientTape.
    # observed in TF 2.21: losses 36.00 12.96 4.67 1.68 0.60 0.22 0.08 0.03 0.01 0.00, v 3.20 ... 4.98
    # (jdist before: TracerArrayConversionError in the loaded function)
    _, path = no_signatures
    imported = tf.saved_model.load(path)
    imported.mutate(tf.constant(2.))  # as after the guide's cell 36
    optimizer = tf.keras.optimizers.SGD(0.05)

    def train_step():
        with tf.GradientTape() as tape:
            loss = (10. - imported(tf.constant(2.))) ** 2
        variables = tape.watched_variables()
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    got = [(f"{float(train_step()):.2f}", f"{float(imported.v.numpy()):.2f}") for _ in range(10)]
    assert [g[0] for g in got] == ["36.00", "12.96", "4.67", "1.68", "0.60", "0.22", "0.08", "0.03", "0.01", "0.00"]
    assert [g[1] for g in got] == ["3.20", "3.92", "4.35", "4.61", "4.77", "4.86", "4.92", "4.95", "4.97", "4.98"]


def test_signature_call_positional_only_for_one_input(no_signatures, tmp_path):
    # guide cell 47 / migrate cell 27: `signatures['serving_default'](tf.constant(x))`.
    # observed in TF 2.21: a one-input signature takes its input positionally ({'output_0': 3.0});
    # with two inputs positional arguments are a TypeError "... `too many positional arguments` ..."
    module, _ = no_signatures
    call = module.__call__.get_concrete_function(tf.TensorSpec(None, tf.float32))
    tf.saved_model.save(module, str(tmp_path / "one"), signatures=call)
    sig = tf.saved_model.load(str(tmp_path / "one")).signatures["serving_default"]
    out = sig(tf.constant(3.))
    assert list(out) == ["output_0"] and float(out["output_0"]) == 3.0 * float(module.v.numpy())
    assert np.asarray(sig(x=tf.constant([1., 2.]))["output_0"]).shape == (2,)

    class Two(tf.Module):
        def __init__(self):
            self.v = tf.Variable(2.)

        @tf.function
        def two(self, a, b):
            return {"s": a + b * self.v}

    m = Two()
    spec = tf.TensorSpec([], tf.float32)
    tf.saved_model.save(m, str(tmp_path / "two"), signatures={"two": m.two.get_concrete_function(spec, spec)})
    two = tf.saved_model.load(str(tmp_path / "two")).signatures["two"]
    assert float(two(b=tf.constant(1.), a=tf.constant(2.))["s"]) == 4.0  # observed: {'s': 4.0}
    for args, kwargs in [((tf.constant(1.), tf.constant(2.)), {}), ((tf.constant(1.),), {"b": tf.constant(2.)})]:
        with pytest.raises(TypeError, match="too many positional arguments"):
            two(*args, **kwargs)


def test_loaded_function_converts_python_numbers_as_tf(tmp_path):
    # migrate cell 29: `loaded(5)` of a function traced with TensorSpec([], float32).
    # observed in TF 2.21: f(5) -> 10.0, f(5.) -> 10.0, f(True) -> 2.0 (float32 program); g(5) -> 15 (int32);
    # g(5.) and f(np.float64(5.)) -> ValueError "Could not find matching concrete function ..."
    class M(tf.Module):
        def __init__(self):
            self.v = tf.Variable(2.)
            self.k = tf.Variable(3, dtype=tf.int32)

        @tf.function
        def f(self, x):
            return x * self.v

        @tf.function
        def g(self, n):
            return n * self.k

    m = M()
    m.f(tf.constant(1.))
    m.g(tf.constant(1))
    tf.saved_model.save(m, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    for value, expected in [(5, 10.0), (5., 10.0), (True, 2.0)]:
        out = loaded.f(value)
        assert float(out) == expected and out.dtype == tf.float32
    assert int(loaded.g(5)) == 15 and loaded.g(5).dtype == tf.int32
    for call in (lambda: loaded.g(5.), lambda: loaded.f(np.float64(5.))):
        with pytest.raises(ValueError, match="Could not find matching concrete function"):
            call()


def test_migrate_tf2_save_signature_dict(tmp_path):
    # migrate cell 18, 27, 29; observed in TF 2.21: 'output' 7.0 for input 5., loaded(5) -> 7.0
    def add_two(input):
        return input + 2

    class MyModel(tf.Module):
        @tf.function
        def __call__(self, input):
            return add_two(input)

    model = MyModel()

    @tf.function
    def serving_default(input):
        return {'output': model(input)}

    signature_function = serving_default.get_concrete_function(tf.TensorSpec(shape=[], dtype=tf.float32))
    tf.saved_model.save(model, str(tmp_path), signatures={
        tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: signature_function})
    loaded = tf.saved_model.load(str(tmp_path))
    out = loaded.signatures[tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY](tf.constant(5.))['output']
    assert float(out) == 7.0
    assert float(loaded(5)) == 7.0 and float(loaded(5.)) == 7.0 and float(loaded(tf.constant(5.))) == 7.0


@pytest.mark.parametrize("form", ["dict_function", "concrete", "two"])
def test_keras_model_with_signatures(tmp_path, form):
    # migrate cell 21 with a batched input_signature (the guide's rank-0 one fails in TF 2.21 too).
    # observed in TF 2.21, Keras 3.15: signatures= takes the tf.function itself or its concrete function;
    # input {'input': (None, 3) float32}, output {'output': (None, 2)}, [[1, 2, 3]] -> [[6, 6]] (ones kernel);
    # the loaded object is not callable (TypeError). jdist before: ValueError "takes no other signatures".
    inp = tf.keras.Input((3,))
    model = tf.keras.Model(inputs=inp, outputs=tf.keras.layers.Dense(2, kernel_initializer="ones")(inp))

    @tf.function(input_signature=[tf.TensorSpec(shape=[None, 3], dtype=tf.float32)])
    def serving_default(input):
        return {'output': model(input)}

    signatures = {"dict_function": {"serving_default": serving_default},
                  "concrete": serving_default.get_concrete_function(),
                  "two": {"serving_default": serving_default, "other": serving_default.get_concrete_function()}}[form]
    tf.saved_model.save(model, str(tmp_path), signatures=signatures)
    loaded = tf.saved_model.load(str(tmp_path))
    assert list(loaded.signatures) == (["serving_default", "other"] if form == "two" else ["serving_default"])
    sig = loaded.signatures["serving_default"]
    (args, specs), outputs = sig.structured_input_signature, sig.structured_outputs
    assert args == () and list(specs) == ["input"] and tuple(specs["input"].shape) == (None, 3)
    assert list(outputs) == ["output"] and tuple(outputs["output"].shape) == (None, 2)
    np.testing.assert_array_equal(np.asarray(sig(tf.constant([[1., 2., 3.]]))["output"]), [[6., 6.]])
    with pytest.raises(TypeError):
        loaded(tf.constant([[1., 2., 3.]]))


def test_signature_that_is_not_a_tf_function_is_refused(tmp_path):
    # observed in TF 2.21: ValueError "Expected a TensorFlow function for which to generate a signature, but got
    # <function <lambda> ...>. Only `tf.functions` with an input signature or concrete functions can be used ..."
    inp = tf.keras.Input((3,))
    model = tf.keras.Model(inputs=inp, outputs=inp + 2)
    with pytest.raises(ValueError, match="Expected a TensorFlow function for which to generate a signature"):
        tf.saved_model.save(model, str(tmp_path / "k"), signatures={"serving_default": lambda x: x})
    with pytest.raises(ValueError, match="Expected a TensorFlow function for which to generate a signature"):
        tf.saved_model.save(CustomModule(), str(tmp_path / "m"), signatures=lambda x: x)


def test_keras_sequential_guide_cells(tmp_path):
    # guide cells 13-21 with the small model; observed in TF 2.21, Keras 3.15: signatures ['serving_default'],
    # structured_outputs {'output_0': TensorSpec((None, 10), float32, 'output_0')}, input 'inputs'
    # (None, 32, 32, 3); the signature's output equals the model's; Sequential has no `output_names`.
    x = np.random.default_rng(0).random((1, 32, 32, 3)).astype("float32")
    model = tf.keras.Sequential([tf.keras.Input((32, 32, 3)), tf.keras.layers.Conv2D(4, 3),
                                 tf.keras.layers.BatchNormalization(), tf.keras.layers.GlobalAveragePooling2D(),
                                 tf.keras.layers.Dense(10, activation="softmax")])
    before = np.asarray(model(x))
    tf.saved_model.save(model, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    assert list(loaded.signatures.keys()) == ["serving_default"]
    infer = loaded.signatures["serving_default"]
    out_spec = infer.structured_outputs["output_0"]
    assert list(infer.structured_outputs) == ["output_0"] and tuple(out_spec.shape) == (None, 10)
    assert list(infer.structured_input_signature[1]) == ["inputs"]
    np.testing.assert_allclose(np.asarray(infer(tf.constant(x))["output_0"]), before, atol=1e-6)
    assert not hasattr(model, "output_names")
    # guide cells 42-43: observed in TF 2.21 with tf_keras (TF's Keras 3 loaded object has no trainable_variables):
    # 6 trainable variables conv2d/kernel:0, conv2d/bias:0, batch_normalization/gamma:0, batch_normalization/beta:0,
    # dense/kernel:0, dense/bias:0; non-trainable batch_normalization/moving_mean:0, .../moving_variance:0
    # (layer names are unique per process, `dense_3` after three Dense layers, in tf_keras as in Keras 3)
    conv, norm, _, dense = (layer.name for layer in model.layers)
    assert [v.name for v in loaded.trainable_variables] == [
        f"{conv}/kernel:0", f"{conv}/bias:0", f"{norm}/gamma:0", f"{norm}/beta:0", f"{dense}/kernel:0",
        f"{dense}/bias:0"]
    ids = {id(v) for v in loaded.trainable_variables}
    assert [v.name for v in loaded.variables if id(v) not in ids] == [f"{norm}/moving_mean:0",
                                                                      f"{norm}/moving_variance:0"]
    assert all(v.trainable for v in loaded.trainable_variables)
    np.testing.assert_array_equal(loaded.trainable_variables[0].numpy(), np.asarray(model.trainable_variables[0]))


def test_ragged_input_signature_is_refused_clearly(tmp_path):
    # observed in TF 2.21: a tf.function with input_signature=[tf.RaggedTensorSpec([None, None], tf.float32)]
    # saves, and the loaded function takes a RaggedTensor ([[1, 2], [3], []] -> reduce_sum * 2 = [6, 6, 0]).
    # jdist's ragged tensors are host values that a compiled program cannot take; jdist before saved the spec as a
    # dense [None, None] TensorSpec (a ragged call then failed at load); now the save says what to pass instead.
    class M(tf.Module):
        def __init__(self):
            self.v = tf.Variable(2.)

        @tf.function(input_signature=[tf.RaggedTensorSpec(shape=[None, None], dtype=tf.float32)])
        def rsum(self, x):
            return tf.reduce_sum(x, axis=1) * self.v

    m = M()
    np.testing.assert_array_equal(np.asarray(m.rsum(tf.ragged.constant([[1., 2.], [3.], []]))), [6., 6., 0.])
    with pytest.raises(ValueError, match=r"RaggedTensorSpec.*to_tensor\(\)"):
        tf.saved_model.save(m, str(tmp_path))


def test_migrate_tf1_cells_name_the_tf2_way():
    # migrate cells 8, 14, 37: TF1 graphs/sessions and Estimator are refused, naming what to use instead
    with pytest.raises(AttributeError, match="tf.function"):
        tf.Graph()
    with pytest.raises(AttributeError, match="Keras"):
        getattr(tf.estimator, "Estimator")  # noqa: B009
    with pytest.raises(AttributeError, match="TF2"):
        getattr(tf.compat.v1, "wrap_function")  # noqa: B009


def test_keras_model_export_serves_like_tfs(tmp_path, capsys):
    # the migrate guide's Keras cells in Keras 3's form: model.export(path), then tf.saved_model.load(path).
    # observed in TF 2.21, Keras 3.15: signatures ['serve', 'serving_default'], input keyed by the Input's name
    # ('keras_tensor' for a functional model's, 'args_0' for a subclassed model's), {'output_0': (None, 2)};
    # loaded.serve(x) is the output tensor ([[6, 6]] for ones kernels); export prints "Saved artifact at ...";
    # input_signature=[TensorSpec(name='feat')] keys the input 'feat'. jdist before: ImportError (needs TF).
    inp = tf.keras.Input((3,), name="keras_tensor")
    model = tf.keras.Model(inputs=inp, outputs=tf.keras.layers.Dense(2, kernel_initializer="ones")(inp))
    model.export(str(tmp_path / "functional"))
    printed = capsys.readouterr().out
    assert printed.startswith(f"Saved artifact at '{tmp_path / 'functional'}'. The following endpoints are available:")
    assert "* Endpoint 'serve'" in printed and "name='keras_tensor'" in printed
    loaded = tf.saved_model.load(str(tmp_path / "functional"))
    assert list(loaded.signatures) == ["serve", "serving_default"]
    for key in ("serve", "serving_default"):
        sig = loaded.signatures[key]
        assert list(sig.structured_input_signature[1]) == ["keras_tensor"]
        assert tuple(sig.structured_input_signature[1]["keras_tensor"].shape) == (None, 3)
        assert list(sig.structured_outputs) == ["output_0"]
        np.testing.assert_array_equal(np.asarray(sig(tf.constant([[1., 2., 3.]]))["output_0"]), [[6., 6.]])
    np.testing.assert_array_equal(np.asarray(loaded.serve(tf.constant([[1., 2., 3.]]))), [[6., 6.]])

    class Sub(tf.keras.Model):
        def __init__(self):
            super().__init__()
            self.d = tf.keras.layers.Dense(2, kernel_initializer="ones")

        def call(self, x):
            return self.d(x)

    sub = Sub()
    sub(np.ones((1, 5), "float32"))
    sub.export(str(tmp_path / "sub"), verbose=False)
    assert capsys.readouterr().out == ""
    sig = tf.saved_model.load(str(tmp_path / "sub")).signatures["serving_default"]
    assert list(sig.structured_input_signature[1]) == ["args_0"]
    model.export(str(tmp_path / "named"), verbose=False,
                 input_signature=[tf.TensorSpec((None, 3), tf.float32, name="feat")])
    sig = tf.saved_model.load(str(tmp_path / "named")).signatures["serve"]
    assert list(sig.structured_input_signature[1]) == ["feat"]
    np.testing.assert_array_equal(np.asarray(sig(feat=tf.constant([[1., 1., 1.]]))["output_0"]), [[3., 3.]])


def test_custom_keras_model_keeps_its_tf_function_methods(tmp_path):
    # observed in TF 2.21, Keras 3.15: tf.saved_model.save of a subclassed Keras model with a
    # @tf.function(input_signature=[TensorSpec([None, 3])]) method `serve` returning {'y': self(x) * 2}:
    # signatures ['serving_default'] (the model's call, {'output_0': [[3, 3]]} for ones kernels) and
    # loaded.serve(x) -> {'y': [[6, 6]]}. jdist before: AttributeError ('Loaded' object has no attribute 'serve').
    class Model(tf.keras.Model):
        def __init__(self):
            super().__init__()
            self.d = tf.keras.layers.Dense(2, kernel_initializer="ones")

        def call(self, x):
            return self.d(x)

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def serve(self, x):
            return {"y": self(x) * 2.}

    m = Model()
    m(np.ones((1, 3), "float32"))
    tf.saved_model.save(m, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    x = tf.constant([[1., 1., 1.]])
    assert list(loaded.signatures) == ["serving_default"]
    np.testing.assert_array_equal(np.asarray(loaded.signatures["serving_default"](x)["output_0"]), [[3., 3.]])
    out = loaded.serve(x)
    assert list(out) == ["y"]
    np.testing.assert_array_equal(np.asarray(out["y"]), [[6., 6.]])


def test_loaded_function_takes_a_list_as_one_tensor(tmp_path):
    # observed in TF 2.21: f traced on shapes () and (2,): f([5., 6.]) -> [10, 12] (the (2,) program), f([5.])
    # matches no program (ValueError); h with input_signature [TensorSpec([None])]: h([1., 2., 3.]) -> [2, 4, 6],
    # h([1, 2]) -> [2., 4.]. jdist before: the list was flattened into leaves (f([5.]) ran the () program).
    class M(tf.Module):
        def __init__(self):
            self.v = tf.Variable(2.)

        @tf.function
        def f(self, x):
            return x * self.v

        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def h(self, x):
            return x * self.v

    m = M()
    m.f(tf.constant(1.))
    m.f(tf.constant([1., 2.]))
    tf.saved_model.save(m, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    np.testing.assert_array_equal(np.asarray(loaded.f([5., 6.])), [10., 12.])
    with pytest.raises(ValueError, match="Could not find matching concrete function"):
        loaded.f([5.])
    np.testing.assert_array_equal(np.asarray(loaded.h([1., 2., 3.])), [2., 4., 6.])
    out = loaded.h([1, 2])
    assert out.dtype == tf.float32
    np.testing.assert_array_equal(np.asarray(out), [2., 4.])


def test_migrate_keras_model_save_with_signatures(tmp_path):
    # migrate cells 21, 27, 31 in tf_keras's form (TF 2.21, TF_USE_LEGACY_KERAS=1, observed; TF's Keras 3 refuses
    # `save_format`): model.save('keras-model', save_format='tf', signatures={'serving_default': f}) with a
    # [None, 3] input_signature: signatures ['serving_default'], output 'output' [[7, 3, 4]] for [[5, 1, 2]];
    # tf.keras.models.load_model(path).predict_on_batch([[1, 3, 4]]) -> [[3, 5, 6]].
    # jdist before: ValueError "tf.saved_model.save(signatures=...): ... takes no other signatures".
    inp = tf.keras.Input((3,))
    model = tf.keras.Model(inputs=inp, outputs=inp + 2)

    @tf.function(input_signature=[tf.TensorSpec(shape=[None, 3], dtype=tf.float32)])
    def serving_default(input):
        return {'output': model(input)}

    path = str(tmp_path / "keras-model")
    model.save(path, save_format='tf', signatures={tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY: serving_default})
    loaded = tf.saved_model.load(path)
    assert list(loaded.signatures) == ["serving_default"]
    out = loaded.signatures["serving_default"](tf.constant([[5., 1., 2.]]))["output"]
    np.testing.assert_array_equal(np.asarray(out), [[7., 3., 4.]])
    np.testing.assert_array_equal(np.asarray(tf.keras.models.load_model(path).predict_on_batch(
        tf.constant([[1, 3, 4]]))), [[3., 5., 6.]])


def test_signature_the_model_cannot_take_fails_the_save_cleanly(tmp_path):
    # the migrate guide's own cell 21: a rank-0 input_signature for a model of input (None, 3). Observed in
    # TF 2.21, Keras 3.15 (tf.saved_model.save with those signatures): ValueError from the model's call
    # ("Exception encountered when calling ..."). jdist raises the same and leaves no half-written signatures.
    inp = tf.keras.Input((3,))
    model = tf.keras.Model(inputs=inp, outputs=inp + 2)

    @tf.function(input_signature=[tf.TensorSpec(shape=[], dtype=tf.float32)])
    def serving_default(input):
        return {'output': model(input)}

    path = str(tmp_path / "keras-model")
    with pytest.raises(ValueError, match="Exception encountered when calling"):
        model.save(path, save_format='tf', signatures={'serving_default': serving_default})
    assert not os.path.exists(os.path.join(path, "methods"))
    with pytest.raises(ValueError, match="Exception encountered when calling"):
        tf.saved_model.save(model, str(tmp_path / "sm"), signatures={'serving_default': serving_default})
