"""`tf.saved_model.save` of `tf.function`s traced only by `get_concrete_function` (unknown dimensions or rank),
called once, or never traced, and the loaded functions' errors, under `import jdist.tf_compat as tf`.

Every expected value was observed in TF 2.21 (tensorflow-cpu 2.21.0, Keras 3.15) by saving and loading the same
modules; where jdist cannot keep what TF keeps, the test holds the save-time error that names the function.
"""
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import jdist.tf_compat as tf  # noqa: E402

_NO_MATCH = "Could not find matching concrete function to call loaded from the SavedModel"


class Traced(tf.Module):
    def __init__(self):
        super().__init__()
        self.v = tf.Variable(2.0)

    @tf.function
    def known(self, x):
        return x * self.v

    @tf.function
    def dims(self, x):
        return x * self.v

    @tf.function
    def rank(self, x):
        return x * self.v

    @tf.function
    def eager(self, x):
        return x * self.v

    @tf.function
    def never(self, x):
        return x * self.v

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def sig(self, x):
        return x * self.v


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    module = Traced()
    module.known.get_concrete_function(tf.TensorSpec([2], tf.float32))
    module.dims.get_concrete_function(tf.TensorSpec([None], tf.float32))
    module.rank.get_concrete_function(tf.TensorSpec(None, tf.float32))
    module.eager(tf.constant([1., 2.]))
    path = str(tmp_path_factory.mktemp("traced"))
    tf.saved_model.save(module, path)
    return tf.saved_model.load(path)


def test_every_tf_function_attribute_is_kept(loaded):
    # observed in TF 2.21: all six are attributes of the loaded object, the never-traced one too
    for name in ["known", "dims", "rank", "eager", "never", "sig"]:
        assert callable(getattr(loaded, name)), name
    assert list(loaded.signatures) == ["serving_default"]  # observed: the one input_signature function


def test_unknown_dimension_signature_runs_for_any_size(loaded):
    # observed in TF 2.21: dims(tf.constant([1., 2., 3.])) -> [2., 4., 6.]
    assert np.asarray(loaded.dims(tf.constant([1., 2., 3.]))).tolist() == [2., 4., 6.]
    # observed: another rank, or another dtype, is TF's ValueError naming the saved TensorSpec(shape=(None,))
    with pytest.raises(ValueError, match=_NO_MATCH):
        loaded.dims(tf.constant([[1., 2.]]))
    with pytest.raises(ValueError, match=_NO_MATCH):
        loaded.dims(tf.constant([1, 2]))


def test_unknown_rank_signature_runs_for_each_rank(loaded):
    # observed in TF 2.21: rank(3.) -> 6.0; rank(tf.ones([2, 1, 2])) -> shape (2, 1, 2) of 2.0
    assert float(loaded.rank(tf.constant(3.))) == 6.0
    out = np.asarray(loaded.rank(tf.ones([2, 1, 2])))
    assert out.shape == (2, 1, 2) and np.all(out == 2.0)
    with pytest.raises(ValueError, match=_NO_MATCH):  # observed: int32 is TF's ValueError
        loaded.rank(tf.constant([1]))
    # TF 2.21 runs rank 6 too (observed); jdist saves ranks 0-4 and says so
    with pytest.raises(ValueError, match=r"saved for ranks 0-4.*give its rank in the TensorSpec"):
        loaded.rank(tf.ones([1, 1, 1, 1, 1, 2]))


def test_known_shape_and_called_once_keep_their_shape(loaded):
    # observed in TF 2.21: known([1., 2.]) -> [2., 4.] (a list too); eager(...) of its called shape -> [6., 8.]
    assert np.asarray(loaded.known(tf.constant([1., 2.]))).tolist() == [2., 4.]
    assert np.asarray(loaded.known([1., 2.])).tolist() == [2., 4.]
    assert np.asarray(loaded.eager(tf.constant([3., 4.]))).tolist() == [6., 8.]
    for call in (lambda: loaded.known(tf.constant([1., 2., 3.])), lambda: loaded.eager(tf.constant([3., 4., 5.])),
                 lambda: loaded.known(tf.constant([1, 2]))):
        with pytest.raises(ValueError, match=_NO_MATCH):  # observed: TF's ValueError for shape (3,) and int32
            call()


def test_never_traced_function_is_kept_and_a_call_is_tf_error(loaded):
    # observed in TF 2.21: ValueError "Found zero restored functions for caller function."
    with pytest.raises(ValueError, match=r"^Found zero restored functions for caller function\..*never"):
        loaded.never(tf.constant([3., 4.]))


def test_wrong_dtype_errors_match_tf(loaded):
    # observed in TF 2.21: a loaded input_signature function given an int32 tensor is a TypeError
    with pytest.raises(TypeError, match="Binding inputs to tf.function failed"):
        loaded.sig(tf.constant([1, 2]))
    serving = loaded.signatures["serving_default"]
    # observed: the signature given an int32 / float64 tensor is InvalidArgumentError "cannot compute
    # __inference_signature_wrapper_124 as input #0(zero-based) was expected to be a float tensor but is a int32
    # tensor"
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"input #0\(zero-based\) was expected to be a float "
                                                            r"tensor but is a int32 tensor"):
        serving(x=tf.constant([1, 2]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="but is a double tensor"):
        serving(tf.constant([1., 2.], tf.float64))
    # observed: a numpy int array is converted: {'output_0': [2., 4.]}
    assert np.asarray(serving(x=np.array([1, 2]))["output_0"]).tolist() == [2., 4.]


class MaskedTensor(tf.experimental.ExtensionType):
    values: tf.Tensor
    mask: tf.Tensor

    def with_default(self, default):
        return tf.where(self.mask, self.values, default)


class Wrapper(tf.Module):
    """TF's extension type guide, cell 64."""

    def __init__(self, variable_value):
        super().__init__()
        self.v = tf.Variable(variable_value)

    @tf.function
    def var_weighted_mean(self, x: MaskedTensor):
        x = MaskedTensor(x.values * self.v, x.mask)
        return tf.reduce_sum(x.with_default(0.)) / tf.reduce_sum(tf.cast(x.mask, tf.float32))

    @tf.function()
    def var_weighted_mean_wrapper(self, x_values, x_mask):
        return self.var_weighted_mean(MaskedTensor(x_values, x_mask))


def test_extension_type_guide_wrapper_traced_with_unknown_rank(tmp_path):
    module = Wrapper([3., 2., 8., 5.])
    module.var_weighted_mean_wrapper.get_concrete_function(tf.TensorSpec(None, tf.float32),
                                                           tf.TensorSpec(None, tf.bool))
    tf.saved_model.save(module, str(tmp_path))
    imported = tf.saved_model.load(str(tmp_path))
    x = MaskedTensor([1., 2., 3., 4.], [False, True, False, True])
    # observed in TF 2.21: 12.0 (before, jdist dropped the function: AttributeError after load)
    assert float(imported.var_weighted_mean_wrapper(x.values, x.mask)) == 12.0
    # TF 2.21 also restores var_weighted_mean (traced inside the wrapper; observed 12.0); jdist keeps the
    # attribute, and a call names why it has no saved signature
    with pytest.raises(ValueError, match="a call only inside another tf.function is not saved"):
        imported.var_weighted_mean(x)


def test_extension_type_spec_given_to_get_concrete_function_is_refused_at_save(tmp_path):
    class CustomModule(tf.Module):  # TF's extension type guide, cell 63 (TF 2.21 saves it, observed)
        def __init__(self):
            super().__init__()
            self.v = tf.Variable(100.0)

        @tf.function
        def grow(self, x: MaskedTensor):
            return MaskedTensor(x.values * self.v, x.mask)

    module = CustomModule()
    module.grow.get_concrete_function(MaskedTensor.Spec(values=tf.TensorSpec(None, tf.float32),
                                                        mask=tf.TensorSpec(None, tf.bool)))
    with pytest.raises(NotImplementedError, match=r"CustomModule\.grow takes MaskedTensor"):
        tf.saved_model.save(module, str(tmp_path))  # before: saved without grow, silently


def test_ragged_spec_given_to_get_concrete_function_is_refused_naming_the_function(tmp_path):
    class Ragged(tf.Module):
        @tf.function
        def scale(self, x):
            return x * 2.

    module = Ragged()
    module.scale.get_concrete_function(tf.RaggedTensorSpec([None, None], tf.float32))
    # TF 2.21 saves it (observed: scale(tf.ragged.constant([[1., 2.], [3.]])) -> <tf.RaggedTensor [[2.0, 4.0],
    # [6.0]]>); jdist's saved programs take dense arrays, and says so naming the function
    with pytest.raises(ValueError, match=r"tf.saved_model.save: scale was traced with .*RaggedTensor.*flat_values"):
        tf.saved_model.save(module, str(tmp_path))


def test_body_that_needs_known_sizes_is_refused_at_save_naming_the_fix(tmp_path):
    class Size(tf.Module):
        @tf.function
        def n(self, y):
            return tf.cast(tf.size(y), tf.float32)

    module = Size()
    module.n.get_concrete_function(tf.TensorSpec([None], tf.int32))
    # TF 2.21 saves it (observed: n(tf.constant([1, 2, 3])) -> 3.0); jdist's symbolic trace cannot, and says how
    with pytest.raises(ValueError, match=r"Size\.n could not be saved for its signature \(TensorSpec\(shape=\(None,\)"
                                         r".*give the sizes in get_concrete_function"):
        tf.saved_model.save(module, str(tmp_path))


def test_string_spec_given_to_get_concrete_function_is_refused_at_save(tmp_path):
    class Text(tf.Module):
        @tf.function
        def up(self, s):
            return tf.strings.upper(s)

    module = Text()
    module.up.get_concrete_function(tf.TensorSpec([], tf.string))
    # TF 2.21 saves it (observed: up(tf.constant("ab")) -> b'AB'); before, jdist dropped it silently
    with pytest.raises(ValueError, match=r"Text\.up could not be saved.*take no string tensors"):
        tf.saved_model.save(module, str(tmp_path))


def test_ragged_input_signature_is_refused_naming_the_function(tmp_path):
    class RowSums(tf.Module):
        def __init__(self):
            super().__init__()
            self.v = tf.Variable(2.0)

        @tf.function(input_signature=[tf.RaggedTensorSpec([None, None], tf.float32)])
        def rsum(self, x):
            return tf.reduce_sum(x, axis=1) * self.v

    # TF 2.21 saves it (observed: rsum(tf.ragged.constant([[1., 2.], [3.], []])) -> [6., 6., 0.]); jdist's ragged
    # tensors are host values a compiled program cannot take, so the save names the function and the way out
    with pytest.raises(ValueError, match=r"RowSums\.rsum: a signature takes RaggedTensorSpec.*to_tensor\(\)"):
        tf.saved_model.save(RowSums(), str(tmp_path))
