"""gguf_raw — a tiny GGUF serializer for tests that need files no real writer would produce.

Follows shared/spec/gguf.md §1.1: magic · u32 version · u64 n_tensors · u64 n_kv · KV pairs ·
tensor infos · zero padding to the alignment · tensor data. Every field can be overridden, so a
test builds a valid file from Python values and then breaks exactly one thing:

    f = RawGGUF(kvs=[KV("general.architecture", STRING, "llama")],
                tensors=[Tensor("w", F32, [8], np.zeros(8, np.float32).tobytes())])
    f.tensors[0].n_dims = 5          # -> too_many_dims
    data, layout = f.build()

`layout` records where each section starts, so truncation tests can cut inside a chosen one.
Values: scalars are Python numbers; STRING is str or bytes (`Str` overrides the length field);
ARRAY is `Arr(elem_type, items)` and items may be `Arr`s themselves (nested arrays, which
llama.cpp refuses); `Raw(bytes)` writes a value's bytes verbatim.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from gguf import GGUFValueType as VT

GGUF_MAGIC = b"GGUF"

_SCALAR = {
    VT.UINT8: "<B", VT.INT8: "<b", VT.UINT16: "<H", VT.INT16: "<h", VT.UINT32: "<I",
    VT.INT32: "<i", VT.FLOAT32: "<f", VT.BOOL: "<?", VT.UINT64: "<Q", VT.INT64: "<q",
    VT.FLOAT64: "<d",
}


@dataclass
class Str:
    """A gguf string whose length field may lie (`length` overrides len(data))."""
    data: bytes
    length: int | None = None


@dataclass
class Raw:
    """Bytes written verbatim in place of a value (for value types no encoder knows)."""
    data: bytes


@dataclass
class Arr:
    """An array value; `count` overrides the written element count."""
    elem: int
    items: list[Any]
    count: int | None = None


@dataclass
class KV:
    key: str | Str
    vtype: int
    value: Any


@dataclass
class Tensor:
    """One tensor-info entry plus its bytes. `ne` is in ggml order (ne[0] contiguous).
    offset None -> the running sum of aligned sizes; n_dims None -> len(ne); data None -> no
    bytes are written for it (used to point a tensor past the end of the file)."""
    name: str | Str
    type_id: int
    ne: list[int]
    data: bytes | None
    offset: int | None = None
    n_dims: int | None = None


@dataclass
class Layout:
    header_end: int = 0
    kv_starts: list[int] = field(default_factory=list)      # byte where each KV pair begins
    kv_value_starts: list[int] = field(default_factory=list)  # byte where each value begins
    ti_starts: list[int] = field(default_factory=list)      # byte where each tensor info begins
    ti_end: int = 0
    data_offset: int = 0
    tensor_offsets: list[int] = field(default_factory=list)  # relative to data_offset


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


def encode_string(s: str | bytes | Str) -> bytes:
    if isinstance(s, Str):
        return struct.pack("<Q", len(s.data) if s.length is None else s.length) + s.data
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def encode_value(vtype: int, value: Any) -> bytes:
    """The bytes of one value (without its type tag)."""
    vtype = int(vtype)
    if isinstance(value, Raw):
        return value.data
    if vtype == VT.STRING:
        return encode_string(value)
    if vtype == VT.ARRAY:
        assert isinstance(value, Arr), "ARRAY values are Arr(elem, items)"
        count = len(value.items) if value.count is None else value.count
        out = struct.pack("<IQ", int(value.elem), count)
        return out + b"".join(encode_value(value.elem, it) for it in value.items)
    if vtype in _SCALAR:
        return struct.pack(_SCALAR[VT(vtype)], value)
    raise ValueError(f"encode_value: no encoding for value type {vtype} (use raw bytes)")


@dataclass
class RawGGUF:
    kvs: list[KV] = field(default_factory=list)
    tensors: list[Tensor] = field(default_factory=list)
    magic: bytes = GGUF_MAGIC
    version: int = 3
    n_kv: int | None = None          # header count overrides
    n_tensors: int | None = None
    alignment: int = 32              # used for padding and default offsets (not written as a key)
    pad_end: bool = True             # pad the last tensor's data to the alignment

    def build(self) -> tuple[bytes, Layout]:
        lay = Layout()
        out = bytearray(self.magic)
        out += struct.pack("<I", self.version)
        out += struct.pack("<QQ", len(self.tensors) if self.n_tensors is None else self.n_tensors,
                           len(self.kvs) if self.n_kv is None else self.n_kv)
        lay.header_end = len(out)
        for kv in self.kvs:
            lay.kv_starts.append(len(out))
            out += encode_string(kv.key)
            out += struct.pack("<I", int(kv.vtype))
            lay.kv_value_starts.append(len(out))
            out += encode_value(kv.vtype, kv.value)
        running = 0
        for t in self.tensors:
            lay.ti_starts.append(len(out))
            out += encode_string(t.name)
            out += struct.pack("<I", len(t.ne) if t.n_dims is None else t.n_dims)
            out += b"".join(struct.pack("<q", d) for d in t.ne)
            off = running if t.offset is None else t.offset
            out += struct.pack("<IQ", int(t.type_id), off)
            lay.tensor_offsets.append(off)
            if t.offset is None and t.data is not None:
                running = _align(running + len(t.data), self.alignment)
        lay.ti_end = len(out)
        lay.data_offset = _align(len(out), self.alignment)
        out += bytes(lay.data_offset - len(out))
        blob = bytearray()
        for t, off in zip(self.tensors, lay.tensor_offsets):
            if t.data is None:
                continue
            if len(blob) < off + len(t.data):
                blob += bytes(off + len(t.data) - len(blob))
            blob[off:off + len(t.data)] = t.data
        if self.pad_end:
            blob += bytes(_align(len(blob), self.alignment) - len(blob))
        return bytes(out + blob), lay

    def write(self, path) -> Layout:
        data, lay = self.build()
        with open(path, "wb") as f:
            f.write(data)
        return lay
