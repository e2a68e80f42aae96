#!/usr/bin/python3
"""Reads the TensorBoard event files of a model_dir, independently of pstrain.

    tensorboard_reader.py MODEL_DIR OUT.json

For each run directory MODEL_DIR/train and MODEL_DIR/validation, reads every
events.out.tfevents.* file as TensorBoard would: TFRecord framing (uint64
length, masked CRC32C of the length, the data, masked CRC32C of the data; the
CRC32C computed here, not by pstrain's code), then each record parsed as an
Event with Debian's python3-protobuf, from message descriptors built here
from TensorFlow's published event.proto, summary.proto, tensor.proto,
tensor_shape.proto and types.proto (their field numbers and types; not from
pstrain's proto/tensorboard.proto). Checks what TensorBoard relies on:

  - every CRC matches, and no file ends inside a record;
  - the first record of each file is file_version "brain.Event:2";
  - every record parses with no field unknown to TensorFlow's messages (a
    field written under the wrong number or wire type would be unknown);
  - a value of plugin "scalars" is a rank-0 DT_FLOAT tensor with one
    float_val and data class SCALAR; a value of plugin "text" is a DT_STRING
    tensor with data class TENSOR.

Writes OUT.json:

    {"train": {"files": ["events.out.tfevents..."],
               "scalars": {"epoch_loss": [[step, value, wall_time], ...]},
               "text": {"model_summary": [[step, "..."]]}},
     "validation": {...}}

and exits 0; on the first problem, prints it to stderr and exits 1. Used by
tests/tensorboard_test.cc.
"""

import json
import os
import struct
import sys

try:
    from google.protobuf import descriptor_pb2
    from google.protobuf import descriptor_pool
    from google.protobuf import message_factory
except ImportError:
    sys.exit("tensorboard_reader: Python's protobuf runtime is missing: "
             "apt-get install python3-protobuf (third_party/install_deps.sh "
             "installs it)")

# TensorFlow's DataType values used below (types.proto).
DT_FLOAT = 1
DT_STRING = 7
# TensorFlow's DataClass values (summary.proto).
DATA_CLASS_SCALAR = 1
DATA_CLASS_TENSOR = 2

_F = descriptor_pb2.FieldDescriptorProto


def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _message(file_proto, name, fields, nested=()):
    """Adds message `name` with `fields` (name, number, type, label, type_name)."""
    msg = file_proto.message_type.add() if isinstance(
        file_proto, descriptor_pb2.FileDescriptorProto) else file_proto.nested_type.add()
    msg.name = name
    for field_name, number, field_type, label, type_name, oneof in fields:
        field = msg.field.add()
        field.name = field_name
        field.number = number
        field.type = field_type
        field.label = label
        if type_name:
            field.type_name = type_name
        if oneof is not None:
            while len(msg.oneof_decl) <= oneof:
                msg.oneof_decl.add().name = "what" if name == "Event" else "value"
            field.oneof_index = oneof
    for build in nested:
        build(msg)
    return msg


def _build_messages():
    """TensorFlow's Event and the messages it holds, as TensorFlow numbers them."""
    f = descriptor_pb2.FileDescriptorProto()
    f.name = "tensorflow_event_subset.proto"
    f.package = "tensorflow"
    f.syntax = "proto3"
    opt, rep = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

    data_type = f.enum_type.add()
    data_type.name = "DataType"
    for name, number in [("DT_INVALID", 0), ("DT_FLOAT", 1), ("DT_DOUBLE", 2),
                         ("DT_INT32", 3), ("DT_UINT8", 4), ("DT_INT16", 5),
                         ("DT_INT8", 6), ("DT_STRING", 7), ("DT_INT64", 9),
                         ("DT_BOOL", 10), ("DT_HALF", 19)]:
        value = data_type.value.add()
        value.name, value.number = name, number
    data_class = f.enum_type.add()
    data_class.name = "DataClass"
    for name, number in [("DATA_CLASS_UNKNOWN", 0), ("DATA_CLASS_SCALAR", 1),
                         ("DATA_CLASS_TENSOR", 2),
                         ("DATA_CLASS_BLOB_SEQUENCE", 3)]:
        value = data_class.value.add()
        value.name, value.number = name, number

    def dim(parent):
        _message(parent, "Dim", [
            ("size", 1, _F.TYPE_INT64, opt, None, None),
            ("name", 2, _F.TYPE_STRING, opt, None, None)])

    _message(f, "TensorShapeProto", [
        ("dim", 2, _F.TYPE_MESSAGE, rep, ".tensorflow.TensorShapeProto.Dim", None),
        ("unknown_rank", 3, _F.TYPE_BOOL, opt, None, None)], nested=[dim])
    _message(f, "TensorProto", [
        ("dtype", 1, _F.TYPE_ENUM, opt, ".tensorflow.DataType", None),
        ("tensor_shape", 2, _F.TYPE_MESSAGE, opt, ".tensorflow.TensorShapeProto", None),
        ("version_number", 3, _F.TYPE_INT32, opt, None, None),
        ("tensor_content", 4, _F.TYPE_BYTES, opt, None, None),
        ("half_val", 13, _F.TYPE_INT32, rep, None, None),
        ("float_val", 5, _F.TYPE_FLOAT, rep, None, None),
        ("double_val", 6, _F.TYPE_DOUBLE, rep, None, None),
        ("int_val", 7, _F.TYPE_INT32, rep, None, None),
        ("string_val", 8, _F.TYPE_BYTES, rep, None, None),
        ("scomplex_val", 9, _F.TYPE_FLOAT, rep, None, None),
        ("int64_val", 10, _F.TYPE_INT64, rep, None, None),
        ("bool_val", 11, _F.TYPE_BOOL, rep, None, None),
        ("dcomplex_val", 12, _F.TYPE_DOUBLE, rep, None, None)])

    def plugin_data(parent):
        _message(parent, "PluginData", [
            ("plugin_name", 1, _F.TYPE_STRING, opt, None, None),
            ("content", 2, _F.TYPE_BYTES, opt, None, None)])

    _message(f, "SummaryMetadata", [
        ("plugin_data", 1, _F.TYPE_MESSAGE, opt,
         ".tensorflow.SummaryMetadata.PluginData", None),
        ("display_name", 2, _F.TYPE_STRING, opt, None, None),
        ("summary_description", 3, _F.TYPE_STRING, opt, None, None),
        ("data_class", 4, _F.TYPE_ENUM, opt, ".tensorflow.DataClass", None)],
        nested=[plugin_data])

    def value(parent):
        _message(parent, "Value", [
            ("node_name", 7, _F.TYPE_STRING, opt, None, None),
            ("tag", 1, _F.TYPE_STRING, opt, None, None),
            ("metadata", 9, _F.TYPE_MESSAGE, opt, ".tensorflow.SummaryMetadata", None),
            ("simple_value", 2, _F.TYPE_FLOAT, opt, None, 0),
            ("obsolete_old_style_histogram", 3, _F.TYPE_BYTES, opt, None, 0),
            ("tensor", 8, _F.TYPE_MESSAGE, opt, ".tensorflow.TensorProto", 0)])

    _message(f, "Summary", [
        ("value", 1, _F.TYPE_MESSAGE, rep, ".tensorflow.Summary.Value", None)],
        nested=[value])
    _message(f, "Event", [
        ("wall_time", 1, _F.TYPE_DOUBLE, opt, None, None),
        ("step", 2, _F.TYPE_INT64, opt, None, None),
        ("file_version", 3, _F.TYPE_STRING, opt, None, 0),
        ("graph_def", 4, _F.TYPE_BYTES, opt, None, 0),
        ("summary", 5, _F.TYPE_MESSAGE, opt, ".tensorflow.Summary", 0),
        ("meta_graph_def", 9, _F.TYPE_BYTES, opt, None, 0)])

    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    event = pool.FindMessageTypeByName("tensorflow.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(event)
    return message_factory.MessageFactory(pool).GetPrototype(event)


Event = _build_messages()


class ReadError(Exception):
    pass


def _records(path):
    with open(path, "rb") as f:
        data = f.read()
    at = 0
    while at < len(data):
        if at + 12 > len(data):
            raise ReadError(f"{path}: ends inside a record header at byte {at}")
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if length_crc != masked_crc32c(header):
            raise ReadError(f"{path}: bad length CRC at byte {at}")
        if at + 16 + length > len(data):
            raise ReadError(f"{path}: ends inside a record at byte {at}")
        record = data[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if data_crc != masked_crc32c(record):
            raise ReadError(f"{path}: bad data CRC at byte {at}")
        yield record
        at += 16 + length


def _check_known(message, where):
    """Fails on any field TensorFlow's messages do not declare."""
    if len(message.UnknownFields()) > 0:
        raise ReadError(f"{where}: fields unknown to TensorFlow's "
                        f"{message.DESCRIPTOR.name}")
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        items = value if field.label == field.LABEL_REPEATED else [value]
        for item in items:
            _check_known(item, where)


def read_run(run_dir):
    run = {"files": [], "scalars": {}, "text": {}}
    names = sorted(n for n in os.listdir(run_dir)
                   if n.startswith("events.out.tfevents."))
    if not names:
        raise ReadError(f"{run_dir}: no events.out.tfevents.* file")
    for name in names:
        path = os.path.join(run_dir, name)
        run["files"].append(name)
        for index, record in enumerate(_records(path)):
            event = Event()
            event.ParseFromString(record)
            where = f"{path} record {index}"
            _check_known(event, where)
            if index == 0:
                if event.file_version != "brain.Event:2":
                    raise ReadError(f"{where}: file_version is "
                                    f"{event.file_version!r}, not 'brain.Event:2'")
                continue
            if event.WhichOneof("what") != "summary":
                raise ReadError(f"{where}: not a summary")
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name
                tensor = value.tensor
                if plugin == "scalars":
                    if (value.WhichOneof("value") != "tensor" or
                            tensor.dtype != DT_FLOAT or
                            len(tensor.tensor_shape.dim) != 0 or
                            len(tensor.float_val) != 1 or
                            value.metadata.data_class != DATA_CLASS_SCALAR):
                        raise ReadError(f"{where}: {value.tag} is not a "
                                        "rank-0 float scalar")
                    run["scalars"].setdefault(value.tag, []).append(
                        [event.step, tensor.float_val[0], event.wall_time])
                elif plugin == "text":
                    if (tensor.dtype != DT_STRING or
                            len(tensor.string_val) != 1 or
                            value.metadata.data_class != DATA_CLASS_TENSOR):
                        raise ReadError(f"{where}: {value.tag} is not text")
                    run["text"].setdefault(value.tag, []).append(
                        [event.step, tensor.string_val[0].decode("utf-8")])
                else:
                    raise ReadError(f"{where}: {value.tag} has plugin {plugin!r}")
    return run


def main(argv):
    if len(argv) != 3:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    model_dir, out = argv[1], argv[2]
    try:
        result = {run: read_run(os.path.join(model_dir, run))
                  for run in ("train", "validation")}
    except (ReadError, OSError) as e:
        print(f"tensorboard_reader: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a record protobuf cannot parse
        print(f"tensorboard_reader: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    with open(out, "w") as f:
        json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
