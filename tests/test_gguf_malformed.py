"""Malformed GGUF files (shared/spec/gguf.md §1.1; the classes listed in src/gguf/gguf_reader.h):
one test per class, each asserting gaacrt.GGUFError with its `.kind` and a message that names the
problem; a truncation sweep over every prefix of a small valid file; and random byte flips that
must never crash the process. Files are built with tests/gguf_raw.py, each test breaking one field
of an otherwise valid file.
"""
from __future__ import annotations

import random
import struct

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as QT
from gguf import GGUFValueType as VT

import gaacrt
from gguf_raw import Arr, KV, Raw, RawGGUF, Str, Tensor

HUGE = 1 << 40


def small() -> RawGGUF:
    """A small valid file: six keys of assorted types, three tensors (F32, Q8_0, F16) whose data
    ends exactly on the alignment, so that any shorter prefix is incomplete."""
    rng = np.random.default_rng(0)
    q8 = gguf.quants.quantize(rng.standard_normal((2, 64)).astype(np.float32), QT.Q8_0)
    return RawGGUF(
        kvs=[KV("general.architecture", VT.STRING, "llama"),
             KV("llama.block_count", VT.UINT32, 2),
             KV("tokenizer.ggml.tokens", VT.ARRAY, Arr(VT.STRING, ["<s>", "a", "bc"])),
             KV("tokenizer.ggml.scores", VT.ARRAY, Arr(VT.FLOAT32, [0.0, -1.0, 2.5])),
             KV("flag", VT.BOOL, True),
             KV("rope", VT.FLOAT64, 1e4)],
        tensors=[Tensor("a", QT.F32, [8], rng.standard_normal(8).astype(np.float32).tobytes()),
                 Tensor("q", QT.Q8_0, [64, 2], q8.tobytes()),
                 Tensor("h", QT.F16, [16, 2], rng.standard_normal(32).astype(np.float16).tobytes())])


def open_bytes(tmp_path, data: bytes, name="m.gguf"):
    p = tmp_path / name
    p.write_bytes(data)
    return gaacrt.GGUFFile(str(p))


def expect(tmp_path, raw, kind: str, match: str):
    data = raw.build()[0] if isinstance(raw, RawGGUF) else raw
    with pytest.raises(gaacrt.GGUFError, match=match) as e:
        open_bytes(tmp_path, data)
    assert e.value.kind == kind, f"kind {e.value.kind!r}, message: {e.value}"
    assert isinstance(e.value, ValueError) and isinstance(e.value, gaacrt.GaacrtError)
    return e.value


def test_small_file_is_valid(tmp_path):
    f = open_bytes(tmp_path, small().build()[0])
    assert [t.name for t in f.tensors] == ["a", "q", "h"]
    assert f.metadata["tokenizer.ggml.tokens"] == ["<s>", "a", "bc"]


@pytest.mark.parametrize("magic", [b"GGUX", b"FUGG", b"\x00\x00\x00\x00"])
def test_bad_magic(tmp_path, magic):
    f = small()
    f.magic = magic
    expect(tmp_path, f, "bad_magic", "bad magic")


@pytest.mark.parametrize("version", [1, 4, 0])
def test_unsupported_version(tmp_path, version):
    f = small()
    f.version = version
    expect(tmp_path, f, "unsupported_version", f"unsupported GGUF version {version}")


def test_endianness_mismatch_from_a_byte_swapped_version(tmp_path):
    f = small()
    f.version = 0x03000000
    expect(tmp_path, f, "endianness_mismatch", "big-endian")


def test_endianness_mismatch_from_a_real_big_endian_file(tmp_path):
    w = gguf.GGUFWriter(tmp_path / "be.gguf", "llama", endianess=gguf.GGUFEndian.BIG)
    w.add_uint32("llama.block_count", 2)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    expect(tmp_path, (tmp_path / "be.gguf").read_bytes(), "endianness_mismatch", "0x03000000")


def test_empty_file_is_truncated(tmp_path):
    expect(tmp_path, b"", "truncated", "truncated in header")


def test_truncated_inside_the_header(tmp_path):
    data, _ = small().build()
    expect(tmp_path, data[:12], "truncated", "truncated in header")


def test_truncated_inside_a_kv_pair(tmp_path):
    data, lay = small().build()
    # Half of the last key's f64 value. (A cut in an early key leaves too few bytes for n_kv
    # pairs at all, which the count check reports first as count_past_eof.)
    cut = lay.kv_value_starts[5] + 4
    expect(tmp_path, data[:cut], "truncated", "truncated in metadata entry 5 'rope'")


def test_truncated_inside_a_tensor_info(tmp_path):
    data, lay = small().build()
    cut = lay.ti_starts[1] + 8 + 1 + 4 + 3    # inside ne[0] of tensor 'q'
    expect(tmp_path, data[:cut], "truncated", "tensor 'q'")


def test_every_truncated_prefix_is_a_gguf_error(tmp_path):
    data, _ = small().build()
    kinds = set()
    for n in range(len(data)):
        with pytest.raises(gaacrt.GGUFError) as e:
            open_bytes(tmp_path, data[:n])
        kinds.add(e.value.kind)
    # A prefix ends inside some section: the count checks see it first for counts, the string
    # checks for strings, and the data check once the header is whole.
    assert kinds <= {"truncated", "count_past_eof", "string_past_eof", "tensor_data_past_eof"}
    assert {"truncated", "tensor_data_past_eof"} <= kinds


@pytest.mark.parametrize("field", ["n_kv", "n_tensors", "array_count", "nested_array_count"])
def test_count_past_eof(tmp_path, field):
    f = small()
    if field == "n_kv":
        f.n_kv = HUGE
    elif field == "n_tensors":
        f.n_tensors = HUGE
    elif field == "array_count":
        f.kvs[3].value.count = HUGE
    else:
        f.kvs.append(KV("nest", VT.ARRAY, Arr(VT.ARRAY, [Arr(VT.UINT64, [1], count=HUGE)])))
    err = expect(tmp_path, f, "count_past_eof", str(HUGE))
    assert "cannot fit" in str(err)


@pytest.mark.parametrize("where", ["key", "string_value", "string_array_item", "tensor_name"])
def test_string_past_eof(tmp_path, where):
    f = small()
    if where == "key":
        f.kvs[1].key = Str(b"llama.block_count", length=HUGE)
    elif where == "string_value":
        f.kvs[0].value = Str(b"llama", length=HUGE)
    elif where == "string_array_item":
        f.kvs[2].value.items[1] = Str(b"a", length=HUGE)
    else:
        f.tensors[1].name = Str(b"q", length=HUGE)
    expect(tmp_path, f, "string_past_eof", f"string length {HUGE} .* past end of file")


def test_tensor_data_past_eof_by_offset(tmp_path):
    f = small()
    f.tensors.append(Tensor("far", QT.F32, [8], None, offset=1 << 20))
    expect(tmp_path, f, "tensor_data_past_eof", "tensor 'far'.*past end of file")


def test_tensor_data_past_eof_by_shape(tmp_path):
    f = small()
    f.tensors[2].ne = [16, 4]                 # 128 bytes declared, 64 present at the end
    expect(tmp_path, f, "tensor_data_past_eof", "tensor 'h'.*past end of file")


def test_tensor_data_past_eof_when_offset_plus_size_wraps(tmp_path):
    f = small()
    f.tensors[0].offset = (1 << 64) - 32      # aligned, but base + offset overflows 64 bits
    f.tensors[0].data = None
    expect(tmp_path, f, "tensor_data_past_eof", "tensor 'a'")


@pytest.mark.parametrize("offsets", [(0, 0), (0, 32), (64, 32)])
def test_tensor_overlap(tmp_path, offsets):
    f = small()
    f.tensors = [Tensor("x", QT.F32, [16], bytes(64), offset=offsets[0]),
                 Tensor("y", QT.F32, [16], bytes(64), offset=offsets[1])]
    expect(tmp_path, f, "tensor_overlap", "overlaps tensor")


def test_tensor_overlap_hidden_behind_an_empty_tensor(tmp_path):
    # x = [0, 128), an empty tensor at 64, y = [96, 160): sorted by offset, x and y are not
    # neighbours, so only a check against the furthest end seen so far catches it.
    f = small()
    f.tensors = [Tensor("x", QT.F32, [32], bytes(128), offset=0),
                 Tensor("e", QT.F32, [0], b"", offset=64),
                 Tensor("y", QT.F32, [16], bytes(64), offset=96)]
    expect(tmp_path, f, "tensor_overlap", "'y'.*overlaps tensor 'x'")


@pytest.mark.parametrize("alignment,offset", [(None, 4), (None, 48), (64, 32)])
def test_misaligned_offset(tmp_path, alignment, offset):
    f = small()
    if alignment:
        f.kvs.append(KV("general.alignment", VT.UINT32, alignment))
        f.alignment = alignment
    f.tensors[1].offset = offset
    expect(tmp_path, f, "misaligned_offset", f"offset {offset} is not a multiple of the alignment {alignment or 32}")


@pytest.mark.parametrize("type_id", [4, 5, 31, 43, 1000])
def test_unknown_tensor_type(tmp_path, type_id):
    f = small()
    f.tensors[0].type_id = type_id
    expect(tmp_path, f, "unknown_tensor_type", f"tensor 'a': unknown tensor type {type_id}")


def test_too_many_dims(tmp_path):
    f = small()
    f.tensors[0].ne = [8, 1, 1, 1, 1]
    expect(tmp_path, f, "too_many_dims", "tensor 'a': 5 dimensions")


@pytest.mark.parametrize("ne", [[1 << 32, 1 << 32, 1 << 32], [1 << 62, 4], [1 << 62]])
def test_element_count_overflow(tmp_path, ne):
    f = small()
    f.tensors[0].ne = ne                      # elements or bytes (F32: 4 per element) overflow
    expect(tmp_path, f, "element_count_overflow", "tensor 'a'.*overflows 64 bits")


def test_duplicate_tensor_name(tmp_path):
    f = small()
    f.tensors[2].name = "a"
    expect(tmp_path, f, "duplicate_tensor_name", "duplicate tensor name 'a'")


def test_duplicate_key(tmp_path):
    f = small()
    f.kvs.append(KV("llama.block_count", VT.UINT32, 3))
    expect(tmp_path, f, "duplicate_key", "duplicate metadata key 'llama.block_count'")


@pytest.mark.parametrize("vtype,value", [(VT.UINT32, 0), (VT.UINT32, 3), (VT.UINT32, 48),
                                         (VT.INT32, -32), (VT.STRING, "32"), (VT.UINT64, 1 << 40)])
def test_bad_alignment(tmp_path, vtype, value):
    f = small()
    f.kvs.append(KV("general.alignment", vtype, value))
    expect(tmp_path, f, "bad_alignment", "general.alignment must be a power of two")


@pytest.mark.parametrize("where", ["value", "array_element"])
def test_bad_value_type(tmp_path, where):
    f = small()
    if where == "value":
        f.kvs[1].vtype = 13
        f.kvs[1].value = Raw(struct.pack("<I", 2))
    else:
        f.kvs[3].value.elem = 13
        f.kvs[3].value.items = []
    expect(tmp_path, f, "bad_value_type", "unknown (array element|value) type 13")


def test_nesting_too_deep(tmp_path):
    v = Arr(VT.INT32, [1])
    for _ in range(9):
        v = Arr(VT.ARRAY, [v])
    f = small()
    f.kvs.append(KV("deep", VT.ARRAY, v))
    expect(tmp_path, f, "nesting_too_deep", "'deep': arrays nested deeper than 8 levels")


def test_nesting_up_to_the_limit_is_accepted(tmp_path):
    v = Arr(VT.INT32, [1])
    for _ in range(7):
        v = Arr(VT.ARRAY, [v])
    f = small()
    f.kvs.append(KV("deep", VT.ARRAY, v))
    got = open_bytes(tmp_path, f.build()[0]).metadata["deep"]
    for _ in range(8):
        assert isinstance(got, list) and len(got) == 1
        got = got[0]
    assert got == 1


@pytest.mark.parametrize("type_id,ne,match", [
    (QT.Q8_0, [48, 2], "ne\\[0\\] = 48 is not a multiple of the q8_0 block size 32"),
    (QT.Q4_K, [128, 1], "ne\\[0\\] = 128 is not a multiple of the q4_K block size 256"),
    (QT.F32, [8, -1], "negative dimension ne\\[1\\] = -1"),
])
def test_bad_shape(tmp_path, type_id, ne, match):
    f = small()
    f.tensors[1].type_id, f.tensors[1].ne = type_id, ne
    expect(tmp_path, f, "bad_shape", f"tensor 'q': {match}")


def test_split_mismatch(tmp_path):
    f = small()
    f.kvs += [KV("split.no", VT.UINT16, 0), KV("split.count", VT.UINT16, 2)]
    expect(tmp_path, f, "split_mismatch", "split.count = 2")   # not named *-00001-of-00002.gguf


def test_random_byte_flips_never_crash(tmp_path):
    """Thousands of mutated copies of the small file: each opens or raises GGUFError; whatever
    opens can be fully read (metadata, tensor table, every tensor's bytes)."""
    base, _ = small().build()
    rng = random.Random(1234)
    outcomes = {"ok": 0}
    path = tmp_path / "fuzz.gguf"
    for it in range(3000):
        data = bytearray(base)
        for _ in range(rng.choice((1, 1, 2, 4))):
            pos = rng.randrange(len(data)) if rng.random() < 0.5 else rng.randrange(min(len(data), 200))
            data[pos] = rng.choice((0, 0xFF, 0x80, 0x7F, rng.randrange(256)))
        if rng.random() < 0.1:
            data = data[:rng.randrange(len(data))]
        path.write_bytes(data)
        try:
            f = gaacrt.GGUFFile(str(path))
        except gaacrt.GGUFError as e:
            outcomes[e.kind] = outcomes.get(e.kind, 0) + 1
            continue
        md = f.metadata
        assert len(md) <= len(data)
        for t in f.tensors:
            assert f.tensor_bytes(t.name).nbytes == t.nbytes
        outcomes["ok"] += 1
    assert outcomes["ok"] > 0 and len(outcomes) > 5, outcomes
