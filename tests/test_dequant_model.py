#!/usr/bin/env python3
"""Golden test of quant_dequantize_ref against gguf-py.

For every tensor of the default model, the output of the dequant tool
(build/release/tools/dequant, i.e. ingot's scalar reference) must equal
gguf.quants.dequantize() from the `gguf` Python package *bit for bit*: both
evaluate the same float32 expressions of ggml's dequantize_row_* (e.g.
(d*sc)*q - dmin*m for Q4_K) in the same order, with IEEE round-to-nearest
and no fused multiply-add, so there is no tolerance. Bits are compared, so
-0.0 vs +0.0 or a changed NaN would also fail.

A second part writes a small GGUF with random blocks of the types the model
lacks (F16, BF16, Q4_0, Q4_1, Q5_1, Q2_K, Q3_K, Q5_K, ...) and checks those
the same way. Random bits reach codes a quantizer never emits; only the fp16
scale fields are kept finite (NaN payload propagation is not specified by
either side).

Big tensors (token_embd, 262144 x 640) are streamed in chunks of rows so no
more than a few chunks of floats are in memory at once.

  PYTHONPATH=~/.cache/ingot/pip/test python3 tests/test_dequant_model.py
Environment: INGOT_MODEL (model path), INGOT_DEQUANT (tool path).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import gguf
    from gguf import GGMLQuantizationType as T
except ImportError:
    sys.exit("test_dequant_model: the gguf package is missing (tests/run.sh puts "
             "~/.cache/ingot/pip/test on PYTHONPATH; make test-deps installs it)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.environ.get("INGOT_DEQUANT", os.path.join(ROOT, "build/release/tools/dequant"))
CHUNK_ELEMS = 1 << 22  # floats compared per step

# Byte offsets of the fp16 scale fields in a block, for the random part.
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def model_path():
    p = os.environ.get("INGOT_MODEL")
    if not p:
        home = os.environ.get("INGOT_HOME") or os.path.expanduser("~/.cache/ingot/models")
        p = os.path.join(home, "gemma-3-270m-q4_k_m.gguf")
    return p


def rows_2d(tensor):
    """The tensor's raw data as a 2-D array of storage rows."""
    data = tensor.data
    return data.reshape(-1, data.shape[-1]) if data.ndim > 1 else data.reshape(1, -1)


def first_mismatch(got, want):
    bad = np.nonzero(got.view(np.uint32) != want.view(np.uint32))[0]
    return None if bad.size == 0 else int(bad[0])


def check_tensor(path, tensor):
    """Streams the tool's output for one tensor against gguf-py; returns an
    error string or None."""
    qtype = T(tensor.tensor_type)
    rows = rows_2d(tensor)
    row_elems = int(tensor.n_elements) // rows.shape[0]
    step = max(1, CHUNK_ELEMS // row_elems)
    proc = subprocess.Popen([TOOL, path, tensor.name], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    err = None
    done = 0
    for r0 in range(0, rows.shape[0], step):
        want = gguf.quants.dequantize(rows[r0:r0 + step], qtype).reshape(-1).astype(np.float32)
        buf = proc.stdout.read(want.size * 4)
        got = np.frombuffer(buf, dtype=np.float32)
        if got.size != want.size:
            err = f"tool gave {done + got.size} values, expected {tensor.n_elements}"
            break
        i = first_mismatch(got, want)
        if i is not None:
            err = (f"element {done + i}: ingot {got[i]!r} ({got[i:i+1].view(np.uint32)[0]:#010x})"
                   f" gguf-py {want[i]!r} ({want[i:i+1].view(np.uint32)[0]:#010x})")
            break
        done += want.size
    if err is None and proc.stdout.read(1):
        err = "tool wrote more values than the tensor has"
    proc.stdout.close()
    stderr = proc.stderr.read().decode(errors="replace").strip()
    proc.stderr.close()
    if proc.wait() != 0 and err is None:
        err = f"tool failed: {stderr}"
    return err


def check_file(path, label):
    reader = gguf.GGUFReader(path)
    passed = failed = 0
    for tensor in reader.tensors:
        err = check_tensor(path, tensor)
        name = f"{label}:{tensor.name} ({T(tensor.tensor_type).name})"
        if err:
            failed += 1
            print(f"FAIL {name}: {err}")
        else:
            passed += 1
    return passed, failed


def random_blocks(rng, qtype, n_rows, row_elems):
    """Random tensor bytes of qtype (n_rows x row_elems) with finite scales."""
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    n_blocks = row_elems // block_elems
    if qtype in (T.F16, T.BF16):
        f = rng.standard_normal((n_rows, row_elems)).astype(np.float32) * 3
        f[0, :4] = [0.0, -0.0, 1e-6, -65504.0]  # zeros, subnormal, extremes
        if qtype == T.F16:
            return f.astype(np.float16).view(np.uint8)
        return (f.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    raw = rng.integers(0, 256, (n_rows * n_blocks, block_bytes), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        halves = (rng.standard_normal(raw.shape[0]) * 0.05).astype(np.float16)
        raw[:, off:off + 2] = halves.view(np.uint8).reshape(-1, 2)
    return raw.reshape(n_rows, n_blocks * block_bytes)


def check_random_types(tmpdir):
    rng = np.random.default_rng(1234)
    path = os.path.join(tmpdir, "random_types.gguf")
    writer = gguf.GGUFWriter(path, arch="quanttest")
    for qtype in (T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0,
                  T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K):
        data = random_blocks(rng, qtype, 8, 512)
        writer.add_tensor(f"random.{qtype.name}", data, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return check_file(path, "random")


def main():
    model = model_path()
    if not os.path.exists(model):
        print(f"test_dequant_model: model not found at {model}: run ./ingot pull "
              f"(or set INGOT_MODEL)")
        print("0 passed, 1 failed")
        return 1
    if not os.access(TOOL, os.X_OK):
        print(f"test_dequant_model: {TOOL} not built: run make tests-build")
        print("0 passed, 1 failed")
        return 1
    passed, failed = check_file(model, "model")
    with tempfile.TemporaryDirectory() as tmp:
        p, f = check_random_types(tmp)
    passed += p
    failed += f
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
