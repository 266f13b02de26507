"""Split models (shared/spec/gguf.md §1.1 "Split files"): `name-00001-of-00003.gguf` and its
siblings open as one GGUFFile. The parts are written by gguf.GGUFWriter(split_max_tensors=...),
which follows llama.cpp's gguf-split: every part carries split.no (u16, 0-based),
split.count (u16) and split.tensors.count (i32); only the first part has the model's metadata;
each part's tensor offsets start at 0 in its own data section.
"""
from __future__ import annotations

import os
import struct

import gguf
import numpy as np
import pytest

import gaacrt
from gguf_raw import KV, RawGGUF, Tensor
from gguf import GGUFValueType as VT
from gguf import GGMLQuantizationType as QT


def write_split_model(tmp_path, n_tensors=5, per_part=2):
    rng = np.random.default_rng(7)
    arrays = {f"blk.{i}.w": rng.standard_normal((3, 32 + 32 * i)).astype(np.float32) for i in range(n_tensors)}
    w = gguf.GGUFWriter(tmp_path / "model.gguf", "llama", split_max_tensors=per_part)
    w.add_name("split test")
    w.add_block_count(n_tensors)
    for name, a in arrays.items():
        w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    n_parts = -(-n_tensors // per_part)
    parts = [tmp_path / f"model-{k:05d}-of-{n_parts:05d}.gguf" for k in range(1, n_parts + 1)]
    assert all(p.is_file() for p in parts)
    return parts, arrays


def test_split_model_opens_as_one_with_tensors_from_every_part(tmp_path):
    parts, arrays = write_split_model(tmp_path)
    f = gaacrt.GGUFFile(str(parts[0]))
    assert f.n_splits == 3
    assert f.file_size == sum(os.path.getsize(p) for p in parts)
    assert [t.name for t in f.tensors] == list(arrays)
    assert [t.split for t in f.tensors] == [0, 0, 1, 1, 2]
    for t in f.tensors:
        assert t.shape == arrays[t.name].shape[::-1]
        got = f.tensor_bytes(t.name).view(np.float32).reshape(arrays[t.name].shape)
        assert np.array_equal(got, arrays[t.name]), t.name
    md = f.metadata
    assert md["general.name"] == "split test" and md["llama.block_count"] == 5
    assert (md["split.no"], md["split.count"], md["split.tensors.count"]) == (0, 3, 5)
    assert f.metadata_type("split.count") == "uint16"


def test_later_parts_restart_offsets_at_zero(tmp_path):
    parts, _ = write_split_model(tmp_path)
    f = gaacrt.GGUFFile(str(parts[0]))
    assert [t.offset for t in f.tensors if t.split == 1][0] == 0
    assert [t.offset for t in f.tensors if t.split == 2][0] == 0


def test_opening_a_later_part_names_the_first(tmp_path):
    parts, _ = write_split_model(tmp_path)
    with pytest.raises(gaacrt.GGUFError, match="00001-of-00003") as e:
        gaacrt.GGUFFile(str(parts[1]))
    assert e.value.kind == "split_mismatch"


def test_missing_part_is_a_split_mismatch_naming_the_part(tmp_path):
    parts, _ = write_split_model(tmp_path)
    parts[2].unlink()
    with pytest.raises(gaacrt.GGUFError, match="model-00003-of-00003.gguf") as e:
        gaacrt.GGUFFile(str(parts[0]))
    assert e.value.kind == "split_mismatch"
    assert "3" in str(e.value)


def test_renamed_first_part_is_a_split_mismatch(tmp_path):
    parts, _ = write_split_model(tmp_path)
    lone = tmp_path / "renamed.gguf"
    parts[0].rename(lone)
    with pytest.raises(gaacrt.GGUFError, match="split.count = 3") as e:
        gaacrt.GGUFFile(str(lone))
    assert e.value.kind == "split_mismatch"


def _part(split_no, count, total, tensors):
    return RawGGUF(kvs=[KV("general.architecture", VT.STRING, "x"), KV("split.no", VT.UINT16, split_no),
                        KV("split.count", VT.UINT16, count), KV("split.tensors.count", VT.INT32, total)],
                   tensors=tensors)


def _f32(name, n=8):
    return Tensor(name, QT.F32, [n], np.zeros(n, np.float32).tobytes())


@pytest.mark.parametrize("case", ["wrong_split_no", "wrong_tensor_total", "duplicate_across_parts",
                                  "count_disagrees"])
def test_inconsistent_parts_are_split_mismatch(tmp_path, case):
    a = _part(0, 2, 2, [_f32("a")])
    b = _part(1, 2, 2, [_f32("b")])
    want = {"wrong_split_no": "split.no", "wrong_tensor_total": "split.tensors.count",
            "duplicate_across_parts": "duplicate tensor name 'a'", "count_disagrees": "split.count"}[case]
    kind = "duplicate_tensor_name" if case == "duplicate_across_parts" else "split_mismatch"
    if case == "wrong_split_no":
        b.kvs[1].value = 5
    elif case == "wrong_tensor_total":
        a.kvs[3].value = 3
    elif case == "duplicate_across_parts":
        b.tensors[0].name = "a"
    elif case == "count_disagrees":
        b.kvs[2].value = 4
    a.write(tmp_path / "m-00001-of-00002.gguf")
    b.write(tmp_path / "m-00002-of-00002.gguf")
    with pytest.raises(gaacrt.GGUFError, match=want) as e:
        gaacrt.GGUFFile(str(tmp_path / "m-00001-of-00002.gguf"))
    assert e.value.kind == kind


def test_gguf_split_key_types_are_as_llama_cpp_writes_them(tmp_path):
    # llama.cpp's gguf-split: split.no / split.count as u16, split.tensors.count as i32.
    parts, _ = write_split_model(tmp_path)
    for k, p in enumerate(parts):
        raw = p.read_bytes()
        n_kv = struct.unpack_from("<Q", raw, 16)[0]
        assert n_kv >= 3
        f_md = gguf.GGUFReader(p).fields
        assert f_md["split.no"].types == [VT.UINT16] and f_md["split.no"].contents() == k
        assert f_md["split.tensors.count"].types == [VT.INT32]
