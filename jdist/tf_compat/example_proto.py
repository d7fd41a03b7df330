"""`tf.train.Example` and its messages, as protobuf classes built from TF's own .proto definitions.

The messages of tensorflow/core/example/feature.proto and example.proto (proto3, package `tensorflow`, the
same field numbers) are declared here as descriptors in a pool of their own, so they coexist with
TensorFlow's if both are imported, and protobuf makes the classes: the API is protobuf's, as TF users write
it (`tf.train.Example(features=tf.train.Features(feature={...}))`, `SerializeToString()`, `FromString`,
`print(example)` in text format). Serialized bytes equal TF 2.21's (observed).
"""
from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_REPEATED, _OPTIONAL = _F.LABEL_REPEATED, _F.LABEL_OPTIONAL


def _field(name: str, number: int, kind: int, label: int = _OPTIONAL, type_name: str = "",
           oneof: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = dict(name=name, number=number, type=kind, label=label, json_name=_camel(name))
    if type_name:
        spec["type_name"] = type_name
    if oneof is not None:
        spec["oneof_index"] = oneof
    return spec


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _map_entry(name: str, value_type: str) -> descriptor_pb2.DescriptorProto:
    entry = descriptor_pb2.DescriptorProto(name=name, options=descriptor_pb2.MessageOptions(map_entry=True))
    entry.field.add(**_field("key", 1, _F.TYPE_STRING))
    entry.field.add(**_field("value", 2, _F.TYPE_MESSAGE, type_name=value_type))
    return entry


def _message(name: str, *fields: dict[str, Any], nested: tuple = (),
             oneofs: tuple = ()) -> descriptor_pb2.DescriptorProto:
    message = descriptor_pb2.DescriptorProto(name=name)
    for spec in fields:
        message.field.add(**spec)
    message.nested_type.extend(nested)
    for oneof in oneofs:
        message.oneof_decl.add(name=oneof)
    return message


def _feature_file() -> descriptor_pb2.FileDescriptorProto:
    """tensorflow/core/example/feature.proto."""
    msg, packed = _F.TYPE_MESSAGE, descriptor_pb2.FieldOptions(packed=True)
    float_value = _field("value", 1, _F.TYPE_FLOAT, _REPEATED)
    int64_value = _field("value", 1, _F.TYPE_INT64, _REPEATED)
    float_value["options"], int64_value["options"] = packed, packed
    return descriptor_pb2.FileDescriptorProto(
        name="tensorflow/core/example/feature.proto", package="tensorflow", syntax="proto3",
        message_type=[
            _message("BytesList", _field("value", 1, _F.TYPE_BYTES, _REPEATED)),
            _message("FloatList", float_value),
            _message("Int64List", int64_value),
            _message("Feature", _field("bytes_list", 1, msg, type_name=".tensorflow.BytesList", oneof=0),
                     _field("float_list", 2, msg, type_name=".tensorflow.FloatList", oneof=0),
                     _field("int64_list", 3, msg, type_name=".tensorflow.Int64List", oneof=0), oneofs=("kind",)),
            _message("Features", _field("feature", 1, msg, _REPEATED, ".tensorflow.Features.FeatureEntry"),
                     nested=(_map_entry("FeatureEntry", ".tensorflow.Feature"),)),
            _message("FeatureList", _field("feature", 1, msg, _REPEATED, ".tensorflow.Feature")),
            _message("FeatureLists",
                     _field("feature_list", 1, msg, _REPEATED, ".tensorflow.FeatureLists.FeatureListEntry"),
                     nested=(_map_entry("FeatureListEntry", ".tensorflow.FeatureList"),)),
        ])


def _example_file() -> descriptor_pb2.FileDescriptorProto:
    """tensorflow/core/example/example.proto."""
    msg = _F.TYPE_MESSAGE
    return descriptor_pb2.FileDescriptorProto(
        name="tensorflow/core/example/example.proto", package="tensorflow", syntax="proto3",
        dependency=["tensorflow/core/example/feature.proto"],
        message_type=[
            _message("Example", _field("features", 1, msg, type_name=".tensorflow.Features")),
            _message("SequenceExample", _field("context", 1, msg, type_name=".tensorflow.Features"),
                     _field("feature_lists", 2, msg, type_name=".tensorflow.FeatureLists")),
        ])


_POOL = descriptor_pool.DescriptorPool()
_POOL.AddSerializedFile(_feature_file().SerializeToString())
_POOL.AddSerializedFile(_example_file().SerializeToString())


def _class(name: str) -> Any:
    cls = message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"tensorflow.{name}"))
    cls.__module__ = __name__  # found by pickle, and shown as a class of this module
    return cls


BytesList = _class("BytesList")
FloatList = _class("FloatList")
Int64List = _class("Int64List")
Feature = _class("Feature")
Features = _class("Features")
FeatureList = _class("FeatureList")
FeatureLists = _class("FeatureLists")
Example = _class("Example")
SequenceExample = _class("SequenceExample")

TRAIN = dict(BytesList=BytesList, FloatList=FloatList, Int64List=Int64List, Feature=Feature, Features=Features,
             FeatureList=FeatureList, FeatureLists=FeatureLists, Example=Example, SequenceExample=SequenceExample)
