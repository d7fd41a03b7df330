"""TF's migration guides on checkpoints and model mapping (guide/migrate/migrating_checkpoints, model_mapping),
their TF2 cells run through `jdist.tf_compat` against what TF 2.21 (Keras 3.15; tf_keras where named) printed for
the same script: the guide's `print_checkpoint` (keys, shapes, dtype names, values), dict keys escaped in
checkpoint keys (`var_list/scoped.Sc/...`) and the guide's TF2 -> TF1 key parsing, `tf.Variable(name="scoped/c")`,
the reader's types and errors, restore statuses, and the TF1 cells refused naming their TF2 way."""
from __future__ import annotations

import numpy as np
import pytest

import jdist.tf_compat as tf

GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"


def _printed(save_path):
    """The guide's print_checkpoint, as (key, shape, dtype name, value) sorted by key."""
    reader = tf.train.load_checkpoint(save_path)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    return sorted((key, shapes[key], dtypes[key].name, reader.get_tensor(key)) for key in shapes)


def test_print_checkpoint_of_a_list_of_variables(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = tf.Variable(5.0, name="a")
    b = tf.Variable(6.0, name="b")
    with tf.name_scope("scoped"):
        c = tf.Variable(7.0, name="c")
    save_path = tf.train.Checkpoint(variables=[a, b, c]).save("tf2-ckpt")
    assert save_path == "tf2-ckpt-1"  # observed, TF 2.21
    rows = _printed(save_path)
    # observed, TF 2.21 (printed in hash order; the same rows): the object graph is a 0-d `string` of bytes
    assert [row[:3] for row in rows] == [
        (GRAPH, [], "string"), ("save_counter/.ATTRIBUTES/VARIABLE_VALUE", [], "int64"),
        ("variables/0/.ATTRIBUTES/VARIABLE_VALUE", [], "float32"),
        ("variables/1/.ATTRIBUTES/VARIABLE_VALUE", [], "float32"),
        ("variables/2/.ATTRIBUTES/VARIABLE_VALUE", [], "float32")]
    assert isinstance(rows[0][3], bytes)
    assert [row[3] for row in rows[1:]] == [1, 5.0, 6.0, 7.0]
    assert type(rows[1][3]) is np.int64 and type(rows[2][3]) is np.float32  # observed, TF 2.21
    # observed, TF 2.21: list_variables sorted by key, of a prefix or of its directory
    assert tf.train.list_variables(save_path) == tf.train.list_variables(str(tmp_path)) == [row[:2] for row in rows]


def test_reader_dtypes_are_tf_dtypes_and_missing_keys_and_files_raise_tf_errors(tmp_path):
    path = tf.train.Checkpoint(v=tf.Variable(1.0)).save(str(tmp_path / "k"))
    reader = tf.train.load_checkpoint(path)
    dtypes = reader.get_variable_to_dtype_map()
    # observed, TF 2.21: DType objects, tf.string for the object graph
    assert dtypes[GRAPH] == tf.string and dtypes["v/.ATTRIBUTES/VARIABLE_VALUE"] == tf.float32
    assert dtypes["save_counter/.ATTRIBUTES/VARIABLE_VALUE"] == tf.int64
    assert repr(dtypes["v/.ATTRIBUTES/VARIABLE_VALUE"]) == "tf.float32"
    assert reader.has_tensor("v/.ATTRIBUTES/VARIABLE_VALUE") and not reader.has_tensor("nope")
    with pytest.raises(tf.errors.NotFoundError, match="^Key nope not found in checkpoint$"):  # observed, TF 2.21
        reader.get_tensor("nope")
    assert isinstance(tf.train.load_variable(path, GRAPH), bytes)  # observed, TF 2.21
    missing = str(tmp_path / "missing-prefix")
    text = f"Unsuccessful TensorSliceReader constructor: Failed to find any matching files for {missing}"
    for read in (tf.train.load_checkpoint, tf.train.list_variables):  # observed, TF 2.21: NotFoundError
        with pytest.raises(tf.errors.NotFoundError, match=f"^{text}$"):
            read(missing)
        (tmp_path / "empty").mkdir(exist_ok=True)
        with pytest.raises(ValueError, match="Couldn't find 'checkpoint' file or checkpoints in given directory"):
            read(str(tmp_path / "empty"))


def test_dict_keys_are_escaped_as_tf_escapes_them(tmp_path):
    # the guide's "TF2 checkpoint saved in TF1" cell, eagerly: var_list={name: variable}
    ckpt = tf.train.Checkpoint(var_list={"a": tf.Variable(1.0), "b": tf.Variable(2.0),
                                         "scoped/c": tf.Variable(3.0)})
    path = ckpt.save(str(tmp_path / "tf2-ckpt-saved-in-session"))
    keys = [key for key, _ in tf.train.list_variables(path)]
    # observed, TF 2.21: "/" in a name is ".S", "." is ".."
    assert keys == [GRAPH, "save_counter/.ATTRIBUTES/VARIABLE_VALUE", "var_list/a/.ATTRIBUTES/VARIABLE_VALUE",
                    "var_list/b/.ATTRIBUTES/VARIABLE_VALUE", "var_list/scoped.Sc/.ATTRIBUTES/VARIABLE_VALUE"]
    # the guide's convert_tf2_to_tf1 parsing recovers the names
    reader = tf.train.load_checkpoint(path)
    names = {key.split("/")[1].replace(".S", "/"): reader.get_tensor(key)
             for key in reader.get_variable_to_dtype_map() if key.startswith("var_list/")}
    assert names == {"a": 1.0, "b": 2.0, "scoped/c": 3.0}  # observed, TF 2.21
    other = tf.train.Checkpoint(v={"x.y": tf.Variable(1.0), "a/b": tf.Variable(2.0), "p.S": tf.Variable(3.0)})
    path = other.save(str(tmp_path / "k"))
    assert [key for key, _ in tf.train.list_variables(path)][2:] == [  # observed, TF 2.21
        "v/a.Sb/.ATTRIBUTES/VARIABLE_VALUE", "v/p..S/.ATTRIBUTES/VARIABLE_VALUE", "v/x..y/.ATTRIBUTES/VARIABLE_VALUE"]
    x, ab, late = tf.Variable(0.0), tf.Variable(0.0), tf.Variable(0.0)
    status = tf.train.Checkpoint(v={"x.y": x, "a/b": ab}).restore(path)
    assert (float(x.numpy()), float(ab.numpy())) == (1.0, 2.0)  # observed, TF 2.21
    with pytest.raises(AssertionError):  # observed, TF 2.21: "p.S" has no object
        status.assert_consumed()
    holder = tf.train.Checkpoint(v={})
    holder.restore(path)
    holder.v["p.S"] = late  # added after restore: takes its value (observed, TF 2.21: 3.0)
    assert float(late.numpy()) == 3.0


def test_a_checkpoint_written_before_names_were_escaped_still_restores(tmp_path):
    """jdist's own compatibility: its checkpoints from before escaping hold dict keys as they were
    (`v/x.y/...`, `v/a/b/...`); they restore into the same objects, and assert_consumed passes."""
    import json

    from jdist.train import object_graph

    path = tf.train.Checkpoint(v={"x.y": tf.Variable(1.0), "a/b": tf.Variable(2.0)}).save(str(tmp_path / "k"))
    with np.load(path + ".npz") as data:
        arrays = {object_graph.unescape(key): data[key] for key in data.files}
    graph = json.loads(str(arrays[GRAPH]))
    del graph["escaped"]
    arrays[GRAPH] = np.asarray(json.dumps(graph))
    np.savez(str(tmp_path / "old.npz"), **arrays)  # the layout of before: unescaped keys, no marker
    assert "v/x.y/.ATTRIBUTES/VARIABLE_VALUE" in arrays and "v/a/b/.ATTRIBUTES/VARIABLE_VALUE" in arrays
    x, ab = tf.Variable(0.0), tf.Variable(0.0)
    status = tf.train.Checkpoint(v={"x.y": x, "a/b": ab}).restore(str(tmp_path / "old"))
    assert (float(x.numpy()), float(ab.numpy())) == (1.0, 2.0)
    status.assert_consumed()


def test_converting_a_checkpoint_by_its_keys(tmp_path):
    # the guide's convert_tf1_to_tf2 over a checkpoint's values (the object graph left out: a string)
    source = tf.train.Checkpoint(var_list={"a": tf.Variable(1.0), "scoped/c": tf.Variable(3.0)})
    path = source.save(str(tmp_path / "src"))
    reader = tf.train.load_checkpoint(path)
    values = {key: tf.Variable(reader.get_tensor(key)) for key in reader.get_variable_to_dtype_map() if key != GRAPH}
    converted = tf.train.Checkpoint(vars=values).save(str(tmp_path / "converted"))
    assert [key for key, _ in tf.train.list_variables(converted)][1:] == [  # observed, TF 2.21
        "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
        "vars/save_counter.S..ATTRIBUTES.SVARIABLE_VALUE/.ATTRIBUTES/VARIABLE_VALUE",
        "vars/var_list.Sa.S..ATTRIBUTES.SVARIABLE_VALUE/.ATTRIBUTES/VARIABLE_VALUE",
        "vars/var_list.Sscoped..Sc.S..ATTRIBUTES.SVARIABLE_VALUE/.ATTRIBUTES/VARIABLE_VALUE"]
    a = tf.Variable(0.0)
    status = tf.train.Checkpoint(vars={"var_list/a/.ATTRIBUTES/VARIABLE_VALUE": a}).restore(converted)
    assert float(a.numpy()) == 1.0  # observed, TF 2.21
    assert status.expect_partial() is status
    status.assert_existing_objects_matched()
    status.assert_nontrivial_match()
    with pytest.raises(AssertionError):
        status.assert_consumed()


def test_variable_name_with_a_slash():
    # the guide: `tf.Variable(0.0, name='scoped/c')` names it as name_scope('scoped') does (observed, TF 2.21)
    assert tf.Variable(0.0, name="scoped/c").name == "scoped/c:0"
    with tf.name_scope("x"):
        assert tf.Variable(0.0, name="scoped/c").name == "x/scoped/c:0"
        assert tf.Variable(0.0, name="c").name == "x/c:0"
    assert repr(tf.Variable(1.0, name="a/b/c")) == "<tf.Variable 'a/b/c:0' shape=() dtype=float32, numpy=1.0>"


def test_checkpoint_roots_modules_and_restore_status(tmp_path):
    a, b, c = tf.Variable(0.0), tf.Variable(0.0), tf.Variable(0.0)
    root = tf.train.Checkpoint(variables=[a, b, c])
    assert type(root).__name__ == "Checkpoint"  # observed, TF 2.21
    assert repr(root.variables) == ("ListWrapper([<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=0.0>, "
                                    "<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=0.0>, "
                                    "<tf.Variable 'Variable:0' shape=() dtype=float32, numpy=0.0>])")
    module = tf.Module()
    module.d = tf.Variable(0.0)
    module.sub = tf.Module()
    module.sub.v = tf.Variable(3)
    path = tf.train.Checkpoint(v={"a": a, "b": b}, c=c, module=module).save(str(tmp_path / "root-tf2-ckpt"))
    assert [key for key, _ in tf.train.list_variables(path)] == [  # observed, TF 2.21
        GRAPH, "c/.ATTRIBUTES/VARIABLE_VALUE", "module/d/.ATTRIBUTES/VARIABLE_VALUE",
        "module/sub/v/.ATTRIBUTES/VARIABLE_VALUE", "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
        "v/a/.ATTRIBUTES/VARIABLE_VALUE", "v/b/.ATTRIBUTES/VARIABLE_VALUE"]
    saved = tf.train.Checkpoint(unscoped=[tf.Variable(1.0), tf.Variable(2.0)], scoped=[tf.Variable(3.0)])
    tf2_ckpt_path = saved.save(str(tmp_path / "tf2-ckpt"))
    a, b, c = tf.Variable(0.0), tf.Variable(0.0), tf.Variable(0.0)
    status = tf.train.Checkpoint(unscoped=[a, b], scoped=[c]).restore(tf2_ckpt_path)
    assert type(status).__name__ == "CheckpointLoadStatus"  # observed, TF 2.21
    assert status.assert_consumed() is status and status.run_restore_ops() is None
    assert [float(v.numpy()) for v in (a, b, c)] == [1.0, 2.0, 3.0]
    read = tf.train.Checkpoint(unscoped=[a, b], scoped=[c]).read(tf2_ckpt_path)
    assert type(read).__name__ == "CheckpointLoadStatus"
    nothing = tf.train.Checkpoint(v=a).restore(None)
    assert type(nothing).__name__ == "InitializationOnlyStatus"  # observed, TF 2.21
    with pytest.raises(AssertionError, match=r"No checkpoint specified \(save_path=None\)"):
        nothing.assert_consumed()
    # observed, TF 2.21: with timeout the iterator yields the newest checkpoint, then stops
    assert list(tf.train.checkpoints_iterator(str(tmp_path), timeout=0.1)) == [str(tmp_path / "tf2-ckpt-1")]


@pytest.mark.parametrize("get, alternative", [
    (lambda: tf.compat.v1.variable_scope, "drop the scope, or use tf.name_scope"),
    (lambda: tf.compat.v1.get_variable, r"tf.Variable\(initial_value, name=...\) or self.add_weight"),
    (lambda: tf.compat.v1.make_template, "tf.keras.layers.Layer"),
    (lambda: tf.compat.v1.global_variables, r"tf.train.Checkpoint\(var_list=\{name: variable\}\)"),
    (lambda: tf.compat.v1.zeros_initializer, "tf.keras.initializers"),
    (lambda: tf.compat.v1.initializers, "tf.keras.initializers"),
    (lambda: tf.compat.v1.train, r"Saver\(var_list=\{'a': a\}\) -> tf.train.Checkpoint\(var_list=\{'a': a\}\)"),
    (lambda: tf.compat.v1.train, r"init_from_checkpoint -> v.assign\(tf.train.load_checkpoint"),
    (lambda: tf.compat.v1.Session, r"x.numpy\(\)"),
    (lambda: tf.Graph, "tf.function"),
    # observed, TF 2.21 (Keras 3): tf.compat.v1.keras.utils has no track_tf1_style_variables either
    (lambda: tf.compat.v1.keras, "track_tf1_style_variables"),
    (lambda: tf.compat.v1.layers, "tf.keras.layers"),  # observed, TF 2.21: "`dense` is not available with Keras 3"
])
def test_guides_tf1_cells_are_refused_naming_the_tf2_way(get, alternative):
    with pytest.raises(AttributeError, match=alternative):
        get()


def test_native_keras_model_of_model_mapping_checkpoints_by_attribute(tmp_path):
    # model_mapping's FullyNativeModel: keys by attribute names (tf_keras's, observed TF 2.21 with tf_keras)
    class FullyNativeModel(tf.keras.layers.Layer):
        def __init__(self, units):
            super().__init__()
            self.conv_layer = tf.keras.layers.Conv2D(3, 3, kernel_regularizer="l2")
            self.flatten_layer = tf.keras.layers.Flatten()
            self.dense_layer = tf.keras.layers.Dense(units, kernel_regularizer="l2")

        def call(self, inputs):
            return self.dense_layer(self.flatten_layer(self.conv_layer(inputs)))

    layer = FullyNativeModel(10)
    out = layer(tf.ones((10, 5, 5, 5)))
    assert tuple(out.shape) == (10, 10) and len(layer.losses) == 2  # observed, TF 2.21
    path = tf.train.Checkpoint(layer=layer).write(str(tmp_path / "w"))
    assert tf.train.list_variables(path) == [
        (GRAPH, []), ("layer/conv_layer/bias/.ATTRIBUTES/VARIABLE_VALUE", [3]),
        ("layer/conv_layer/kernel/.ATTRIBUTES/VARIABLE_VALUE", [3, 3, 5, 3]),
        ("layer/dense_layer/bias/.ATTRIBUTES/VARIABLE_VALUE", [10]),
        ("layer/dense_layer/kernel/.ATTRIBUTES/VARIABLE_VALUE", [27, 10])]
