"""The names `jdist.tf_compat` adds for TF's extension types: `tf.experimental.ExtensionType`,
`BatchableExtensionType`, the dispatch decorators, and `tf.type_spec_from_value`."""
from __future__ import annotations

from jdist.tf_compat import extension_type_data as _data  # registers extension values as tf.data elements
from jdist.tf_compat.extension_type import BatchableExtensionType, ExtensionType
from jdist.tf_compat.extension_type_dispatch import NAMES as _DISPATCH
from jdist.tf_compat.extension_type_saving import refusing_extension_types
from jdist.tf_compat.extension_type_spec import ExtensionTypeSpec, type_spec_from_value

EXPERIMENTAL = dict(ExtensionType=ExtensionType, BatchableExtensionType=BatchableExtensionType,
                    ExtensionTypeSpec=ExtensionTypeSpec, **_DISPATCH)

__all__ = ["EXPERIMENTAL", "refusing_extension_types", "type_spec_from_value"]
assert _data  # imported for its registration
