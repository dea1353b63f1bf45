"""Event payloads to protobuf messages, tolerating strings that are not valid UTF-8.

proto3 ``string`` fields must be UTF-8, but C++ writers do not check, and upb then rejects
the whole Event.  Such a record is parsed again with a twin of the same schema in which every
``string`` field is ``bytes``; the bad strings are repaired with backslash escapes, and the
repaired message is parsed with the real schema, so nothing downstream needs to know.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message
from tensorboard.compat.proto import event_pb2

if TYPE_CHECKING:
    # Imported where the twin schema is built: it takes a sizeable share of start-up, and
    # only records with invalid UTF-8 need it.
    from google.protobuf import descriptor_pb2

Event = event_pb2.Event
_LENIENT_PACKAGE = "tbconvert_lenient"


class UnparseableEvent(Exception):
    """The payload passed its CRC but is not an Event even when read leniently."""


def parse_event(payload: bytes) -> tuple[Any, bool]:
    """Parse one record's payload.

    Returns:
        The Event and whether strings had to be repaired (lossy).

    Raises:
        UnparseableEvent: the payload is not an Event at all.
    """
    try:
        return Event.FromString(payload), False
    except DecodeError:
        pass
    try:
        lenient = _lenient_event_class().FromString(payload)
        _repair_strings(lenient)
        return Event.FromString(lenient.SerializeToString()), True
    except DecodeError as error:
        raise UnparseableEvent(str(error)) from error


def _repair_strings(message: Message) -> None:
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_MESSAGE:
            items = value if _is_repeated(field) else [value]
            if field.message_type.GetOptions().map_entry:
                items = list(value.values()) if _map_values_are_messages(field) else []
            for item in items:
                _repair_strings(item)
        elif field.type == FieldDescriptor.TYPE_BYTES and _was_string(field):
            if _is_repeated(field):
                value[:] = [_repair(item) for item in value]
            else:
                setattr(message, field.name, _repair(value))


def _repair(data: bytes) -> bytes:
    return data.decode("utf-8", errors="backslashreplace").encode("utf-8")


def _is_repeated(field: FieldDescriptor) -> bool:
    # protobuf >= 5.28 has is_repeated; older releases only have label.
    repeated = getattr(field, "is_repeated", None)
    if repeated is None:
        return bool(field.label == FieldDescriptor.LABEL_REPEATED)
    return bool(repeated)


def _map_values_are_messages(field: FieldDescriptor) -> bool:
    return bool(field.message_type.fields_by_name["value"].type == FieldDescriptor.TYPE_MESSAGE)


def _was_string(field: FieldDescriptor) -> bool:
    return field.full_name in _string_fields()


def _string_fields() -> frozenset[str]:
    return lenient_schema()[1]


def _lenient_event_class() -> type[Message]:
    return lenient_schema()[0]


@lru_cache(maxsize=1)
def lenient_schema() -> tuple[type[Message], frozenset[str]]:
    """Event's twin with every string field read as bytes, and those fields' full names
    (built once per process, when a first record needs it)."""
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    string_fields: set[str] = set()
    for file_proto in _dependency_order(event_pb2.DESCRIPTOR):
        pool.Add(_bytes_twin(file_proto, string_fields))
    descriptor = pool.FindMessageTypeByName(f"{_LENIENT_PACKAGE}.{Event.DESCRIPTOR.full_name}")
    message_class: type[Message] = message_factory.GetMessageClass(descriptor)
    return message_class, frozenset(string_fields)


def _dependency_order(file_descriptor: Any) -> list[descriptor_pb2.FileDescriptorProto]:
    from google.protobuf import descriptor_pb2

    ordered: list[descriptor_pb2.FileDescriptorProto] = []
    seen: set[str] = set()

    def visit(fd: Any) -> None:
        if fd.name in seen:
            return
        seen.add(fd.name)
        for dependency in fd.dependencies:
            visit(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(proto)
        ordered.append(proto)

    visit(file_descriptor)
    return ordered


def _bytes_twin(
    proto: descriptor_pb2.FileDescriptorProto, string_fields: set[str]
) -> descriptor_pb2.FileDescriptorProto:
    """``proto`` in a package of its own, its string fields made bytes (their names added to
    ``string_fields``)."""
    from google.protobuf import descriptor_pb2

    twin = descriptor_pb2.FileDescriptorProto()
    twin.CopyFrom(proto)
    twin.name = f"{_LENIENT_PACKAGE}/{proto.name}"
    old_package = proto.package
    twin.package = f"{_LENIENT_PACKAGE}.{old_package}" if old_package else _LENIENT_PACKAGE
    twin.dependency[:] = [f"{_LENIENT_PACKAGE}/{name}" for name in proto.dependency]
    for message in twin.message_type:
        _retype(message, f"{old_package}.{message.name}", string_fields)
    return twin


def _retype(
    message: descriptor_pb2.DescriptorProto, full_name: str, string_fields: set[str]
) -> None:
    from google.protobuf import descriptor_pb2

    for field in message.field:
        if field.type == descriptor_pb2.FieldDescriptorProto.TYPE_STRING:
            field.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
            string_fields.add(f"{_LENIENT_PACKAGE}.{full_name}.{field.name}")
        if field.type_name.startswith("."):
            field.type_name = f".{_LENIENT_PACKAGE}{field.type_name}"
    for nested in message.nested_type:
        _retype(nested, f"{full_name}.{nested.name}", string_fields)
