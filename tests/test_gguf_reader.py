"""GGUF reader (src/gguf, shared/spec/gguf.md §1): the real models read exactly as the gguf
package reads them, every value type round-trips, and the format's corners (custom alignment,
v2, nested arrays, gaps between tensors) are accepted. Split models: test_gguf_split.py.
"""
from __future__ import annotations

import gc
import struct
import sys

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

import gaacrt
from gguf_raw import Arr, KV, RawGGUF, Tensor

REAL_MODELS = ["smollm2_path", "gemma3_path"]


@pytest.fixture(scope="module", params=REAL_MODELS)
def real(request):
    """(gaacrt.GGUFFile, gguf.GGUFReader) of one real model; the reader is slow to build (the
    Gemma vocabulary has 262144 strings), so each is built once per module."""
    path = request.getfixturevalue(request.param)
    return gaacrt.GGUFFile(path), gguf.GGUFReader(path)


def reader_value(field):
    """A GGUFReader field as the Python value gaacrt should produce."""
    if field.types[0] == VT.ARRAY and field.types[-1] == VT.BOOL:
        return [bool(x) for x in field.contents()]
    if field.types[0] == VT.BOOL:
        return bool(field.contents())
    return field.contents()


def test_real_model_header_matches_gguf_reader(real):
    f, r = real
    assert f.version == 3
    assert f.alignment == 32 == r.alignment           # no general.alignment key: the default
    assert "general.alignment" not in f.metadata
    assert f.data_offset == r.data_offset
    assert f.data_offset % 32 == 0
    assert len(f.tensors) == len(r.tensors)
    assert len(f.metadata) == len([k for k in r.fields if not k.startswith("GGUF.")])
    assert f.n_splits == 1


def test_smollm2_layout_is_as_measured_in_the_spec(smollm2_path):
    # shared/spec/gguf.md §0: 272 tensors, 33 keys, data at 1,785,664, file ends at 98,362,432.
    f = gaacrt.GGUFFile(smollm2_path)
    assert (len(f.tensors), len(f.metadata), f.data_offset, f.file_size) == (272, 33, 1785664, 98362432)
    assert f.architecture == "llama"
    types = {}
    for t in f.tensors:
        types[t.type] = types.get(t.type, 0) + 1
    assert types == {"q4_1": 210, "f32": 61, "q8_0": 1}
    emb = f.tensor_info("token_embd.weight")
    assert (emb.type, emb.shape, emb.offset) == ("q8_0", (576, 49152), 0)


def test_every_tensor_entry_matches_gguf_reader(real):
    f, r = real
    ours = {t.name: t for t in f.tensors}
    assert [t.name for t in f.tensors] == [t.name for t in r.tensors]   # file order kept
    for rt in r.tensors:
        t = ours[rt.name]
        assert t.type_id == int(rt.tensor_type), rt.name
        assert t.shape == tuple(int(d) for d in rt.shape), rt.name        # ne order
        assert f.data_offset + t.offset == rt.data_offset, rt.name
        assert t.nbytes == rt.n_bytes, rt.name
        assert t.n_elements == rt.n_elements, rt.name


def test_every_metadata_value_equals_gguf_reader(real):
    f, r = real
    md = f.metadata
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue
        expect = reader_value(field)
        assert md[key] == expect, key
        want_type = field.types[0].name.lower()
        if field.types[0] == VT.ARRAY:
            want_type += f"[{field.types[-1].name.lower()}]"
        assert f.metadata_type(key) == want_type, key
    assert list(md) == [k for k in r.fields if not k.startswith("GGUF.")]  # file order kept


def test_tensor_bytes_is_a_zero_copy_read_only_view(real):
    f, r = real
    first, second = r.tensors[0], r.tensors[1]
    a = f.tensor_bytes(first.name)
    b = f.tensor_bytes(second.name)
    assert a.dtype == np.uint8 and a.shape == (first.n_bytes,)
    assert not a.flags.writeable
    with pytest.raises(ValueError):
        a[0] = 1
    # Both views point into one mapping: their addresses differ by exactly the file offsets.
    addr = lambda x: x.__array_interface__["data"][0]  # noqa: E731
    assert addr(b) - addr(a) == second.data_offset - first.data_offset
    assert addr(f.tensor_bytes(first.name)) == addr(a)                 # no copy on a second call
    assert np.array_equal(a, np.asarray(first.data).reshape(-1).view(np.uint8))


def test_tensor_bytes_keep_the_file_mapped_after_the_file_object_is_deleted(smollm2_path):
    f = gaacrt.GGUFFile(smollm2_path)
    name = f.tensors[-1].name
    refs = sys.getrefcount(f)
    view = f.tensor_bytes(name)
    assert sys.getrefcount(f) == refs + 1     # the view owns a reference to the file object
    expect = bytes(view[:4096])
    del f
    gc.collect()
    assert bytes(view[:4096]) == expect        # would fault or change if the mapping were gone
    assert int(view.sum(dtype=np.uint64)) >= 0


def test_missing_tensor_is_a_key_error(smollm2_path):
    f = gaacrt.GGUFFile(smollm2_path)
    with pytest.raises(KeyError, match="no tensor named 'nope'"):
        f.tensor_bytes("nope")
    with pytest.raises(KeyError):
        f.tensor_info("nope")


# ---- files written with gguf.GGUFWriter ---------------------------------------------------

SCALARS = [  # (writer method, value, expected Python value, gguf type name)
    ("add_uint8", 200, 200, "uint8"), ("add_int8", -100, -100, "int8"),
    ("add_uint16", 60000, 60000, "uint16"), ("add_int16", -30000, -30000, "int16"),
    ("add_uint32", 4_000_000_000, 4_000_000_000, "uint32"), ("add_int32", -2_000_000_000, -2_000_000_000, "int32"),
    ("add_uint64", 2**64 - 1, 2**64 - 1, "uint64"), ("add_int64", -(2**63), -(2**63), "int64"),
    ("add_float32", 0.1, float(np.float32(0.1)), "float32"), ("add_float64", 0.1, 0.1, "float64"),
    ("add_bool", True, True, "bool"), ("add_string", "héllo ✓", "héllo ✓", "string"),
]
ARRAYS = [  # (element type, values, expected)
    (VT.UINT8, [0, 255], [0, 255]), (VT.INT8, [-128, 127], [-128, 127]),
    (VT.UINT16, [0, 65535], [0, 65535]), (VT.INT16, [-32768, 32767], [-32768, 32767]),
    (VT.UINT32, [0, 2**32 - 1], [0, 2**32 - 1]), (VT.INT32, [-(2**31), 2**31 - 1], [-(2**31), 2**31 - 1]),
    (VT.UINT64, [0, 2**64 - 1], [0, 2**64 - 1]), (VT.INT64, [-(2**63), 2**63 - 1], [-(2**63), 2**63 - 1]),
    (VT.FLOAT32, [1.5, -0.1], [1.5, float(np.float32(-0.1))]), (VT.FLOAT64, [1.5, -0.1], [1.5, -0.1]),
    (VT.BOOL, [True, False, True], [True, False, True]),
    (VT.STRING, ["a", "", "ünï", "x" * 300], ["a", "", "ünï", "x" * 300]),
]


def _write_all_types(path, alignment: int | None):
    w = gguf.GGUFWriter(path, "testarch")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for method, value, _, _ in SCALARS:
        getattr(w, method)(f"t.{method[4:]}", value)
    for elem, values, _ in ARRAYS:
        w.add_key_value(f"t.arr_{elem.name.lower()}", values, VT.ARRAY, sub_type=elem)
    rng = np.random.default_rng(1)
    arrays = {
        "odd": rng.standard_normal(7).astype(np.float32),            # 28 bytes: padding follows
        "mat": rng.standard_normal((3, 5)).astype(np.float16),       # ne = [5, 3]
        "q": gguf.quants.quantize(rng.standard_normal((2, 64)).astype(np.float32), QT.Q8_0),
    }
    w.add_tensor("odd", arrays["odd"])
    w.add_tensor("mat", arrays["mat"])
    w.add_tensor("q", arrays["q"], raw_dtype=QT.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return arrays


@pytest.mark.parametrize("alignment", [None, 64])
def test_every_value_type_and_alignment_round_trip_from_gguf_writer(tmp_path, alignment):
    path = tmp_path / "all.gguf"
    arrays = _write_all_types(path, alignment)
    f = gaacrt.GGUFFile(str(path))
    md = f.metadata
    for method, _, expect, tname in SCALARS:
        key = f"t.{method[4:]}"
        assert md[key] == expect and type(md[key]) is type(expect), key
        assert f.metadata_type(key) == tname
    for elem, _, expect in ARRAYS:
        key = f"t.arr_{elem.name.lower()}"
        assert md[key] == expect, key
        assert all(type(x) is type(expect[0]) for x in md[key]), key
        assert f.metadata_type(key) == f"array[{elem.name.lower()}]"
    align = alignment or 32
    assert f.alignment == align
    if alignment:
        assert md["general.alignment"] == alignment
    assert f.data_offset % align == 0
    info = {t.name: t for t in f.tensors}
    assert info["mat"].shape == (5, 3) and info["mat"].type == "f16"
    assert info["q"].shape == (64, 2) and info["q"].type == "q8_0"
    for t in f.tensors:
        assert t.offset % align == 0, t.name
        assert bytes(f.tensor_bytes(t.name)) == arrays[t.name].tobytes(), t.name


def test_version_2_file_reads_like_version_3(tmp_path):
    path = tmp_path / "v3.gguf"
    _write_all_types(path, None)
    raw = bytearray(path.read_bytes())
    assert struct.unpack_from("<I", raw, 4)[0] == 3
    struct.pack_into("<I", raw, 4, 2)               # v2 differs only in the version field
    v2 = tmp_path / "v2.gguf"
    v2.write_bytes(raw)
    a, b = gaacrt.GGUFFile(str(path)), gaacrt.GGUFFile(str(v2))
    assert (a.version, b.version) == (3, 2)
    assert a.metadata == b.metadata
    assert [(t.name, t.shape, t.offset) for t in a.tensors] == [(t.name, t.shape, t.offset) for t in b.tensors]


def test_nested_arrays_read_back_as_nested_lists(tmp_path):
    nested = Arr(VT.ARRAY, [Arr(VT.INT32, [1, -2]), Arr(VT.STRING, ["a", "bc"]),
                            Arr(VT.ARRAY, [Arr(VT.FLOAT32, [0.5]), Arr(VT.BOOL, [])]), Arr(VT.UINT8, [])])
    raw = RawGGUF(kvs=[KV("general.architecture", VT.STRING, "x"), KV("nest", VT.ARRAY, nested),
                       KV("after", VT.UINT32, 7)])
    path = tmp_path / "nested.gguf"
    raw.write(path)
    f = gaacrt.GGUFFile(str(path))
    assert f.metadata["nest"] == [[1, -2], ["a", "bc"], [[0.5], []], []]
    assert f.metadata_type("nest") == "array[array]"
    assert f.metadata["after"] == 7     # the cursor ended exactly after the nested value


def test_gaps_between_tensors_are_accepted(tmp_path):
    a = np.arange(8, dtype=np.float32)
    b = np.arange(16, dtype=np.float32) * -1
    raw = RawGGUF(kvs=[KV("general.architecture", VT.STRING, "x")],
                  tensors=[Tensor("b", QT.F32, [16], b.tobytes(), offset=256),   # out of order,
                           Tensor("a", QT.F32, [8], a.tobytes(), offset=0)])     # 224-byte gap
    path = tmp_path / "gaps.gguf"
    raw.write(path)
    f = gaacrt.GGUFFile(str(path))
    assert [(t.name, t.offset) for t in f.tensors] == [("b", 256), ("a", 0)]
    assert np.array_equal(f.tensor_bytes("a").view(np.float32), a)
    assert np.array_equal(f.tensor_bytes("b").view(np.float32), b)


def test_zero_tensor_file_has_data_offset_at_aligned_end_of_header(tmp_path):
    raw = RawGGUF(kvs=[KV("general.architecture", VT.STRING, "x")])
    path = tmp_path / "empty.gguf"
    lay = raw.write(path)
    f = gaacrt.GGUFFile(str(path))
    assert f.tensors == [] and f.data_offset == lay.data_offset
