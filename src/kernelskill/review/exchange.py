"""Tensors across the trust boundary: what a runner hands the judge, in a file format the judge parses without
running anything (no pickle, no torch.load).

A runner (a process that has run problem or candidate code) writes a forward's outputs with `write_outputs`; the
judge reads them back with `read_outputs`, which checks every field before it builds a tensor: a known dtype, a
shape that matches the byte count, offsets inside the file, a bounded nesting depth and size. Whatever the runner
was made to write, the judge gets plain CPU tensors or a clear `ExchangeError` (which it counts against the
candidate), never code.

Layout: 8 bytes magic, 8 bytes little-endian header length, the header (JSON), then each tensor's raw bytes.
The header's "tree" mirrors the forward's return value: {"t": index} for a tensor, {"n": number}, {"b": bool},
{"none": true}, {"seq": [...], "tuple": bool} for tuples and lists.
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path

MAGIC = b"KSXCHG01"
BATCH_INPUTS = "inputs.bin"  # the judge's batch: its input sets, made by the reference runner, read by both runners
BATCH_OUTPUTS = "outputs.bin"  # and a runner's outputs of its calls, one file each
MAX_HEADER = 1 << 20  # 1 MiB of JSON: thousands of tensors
MAX_DEPTH = 8
MAX_TENSORS = 4096
DTYPES = ("float64", "float32", "float16", "bfloat16", "complex64", "complex128", "int64", "int32", "int16",
          "int8", "uint8", "bool", "float8_e4m3fn", "float8_e5m2")


class ExchangeError(ValueError):
    """An output file the judge will not read: missing, truncated, malformed or too large."""


def _dtype(name: str):
    import torch

    if name not in DTYPES or not hasattr(torch, name):
        raise ExchangeError(f"unknown dtype {name!r}")
    return getattr(torch, name)


# ------------------------------------------------------------------------------------------------- runner side
def write_outputs(path: str | Path, out) -> int:
    """Write a forward's return value (tensors, numbers, None, nested tuples/lists) to `path`; returns the bytes of
    tensor data. Tensors are copied to the host, contiguous; a tensor subclass is written as the values it gives.
    A batch (a list with one entry per call: outputs, or input sets) is one such value, in one file."""
    import torch

    tensors: list = []

    def tree(value, depth: int):
        if depth > MAX_DEPTH:
            raise ExchangeError(f"outputs nested deeper than {MAX_DEPTH}")
        if isinstance(value, torch.Tensor):
            tensors.append(torch.Tensor(value.detach()).contiguous().cpu() if type(value) is not torch.Tensor
                           else value.detach().contiguous().cpu())
            return {"t": len(tensors) - 1}
        if isinstance(value, bool):
            return {"b": value}
        if isinstance(value, (int, float)):
            return {"n": float(value) if isinstance(value, float) else int(value)}
        if value is None:
            return {"none": True}
        if isinstance(value, (tuple, list)):
            return {"seq": [tree(v, depth + 1) for v in value], "tuple": isinstance(value, tuple)}
        raise ExchangeError(f"an output of type {type(value).__name__} cannot be handed over (tensors, numbers, "
                            "None and tuples/lists of them can)")

    shape = tree(out, 0)
    entries, offset = [], 0
    for t in tensors:
        nbytes = t.numel() * t.element_size()
        entries.append({"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "offset": offset,
                        "nbytes": nbytes})
        offset += nbytes
    header = json.dumps({"tree": shape, "tensors": entries}, allow_nan=True).encode()
    tmp = Path(str(path) + ".part")
    with open(tmp, "wb") as f:
        f.write(MAGIC + struct.pack("<Q", len(header)) + header)
        for t in tensors:
            if t.numel():
                f.write(memoryview(t.reshape(-1).view(torch.uint8).numpy()))
    os.replace(tmp, path)
    return offset


# -------------------------------------------------------------------------------------------------- judge side
def read_outputs(path: str | Path, max_bytes: int, items: range | list[int] | None = None,
                 max_tensors: int = MAX_TENSORS):
    """The value written by `write_outputs`, as CPU tensors; raises ExchangeError for anything else.

    `items`: the file holds a list (a batch: one entry per call) and only these entries are built, in this order,
    reading the bytes of their tensors alone (the judge compares a few calls of a batch of thousands). Every tensor
    entry of the header is checked all the same."""
    import torch

    path = Path(path)
    try:
        size = path.stat().st_size
        f = open(path, "rb")
    except OSError as exc:
        raise ExchangeError(f"no outputs were handed over ({exc.strerror})") from None
    header_limit = MAX_HEADER if max_tensors <= MAX_TENSORS else MAX_HEADER * (max_tensors // MAX_TENSORS + 1)
    with f:
        head = f.read(16)
        if len(head) < 16 or head[:8] != MAGIC:
            raise ExchangeError("the outputs file is not in the exchange format")
        (length,) = struct.unpack("<Q", head[8:])
        if length > header_limit:
            raise ExchangeError(f"the outputs file's header is {length} bytes (at most {header_limit})")
        try:
            header = json.loads(f.read(length))
            tree, entries = header["tree"], header["tensors"]
        except (ValueError, KeyError, TypeError):
            raise ExchangeError("the outputs file's header is not valid") from None
        if not isinstance(entries, list) or len(entries) > max_tensors:
            raise ExchangeError("the outputs file lists too many tensors")
        data_start = 16 + length
        total = 0
        layout = []  # (dtype, shape, offset, nbytes), every entry checked before any is read
        for e in entries:
            try:
                dtype = _dtype(e["dtype"])
                shape = [int(s) for s in e["shape"]]
                offset, nbytes = int(e["offset"]), int(e["nbytes"])
            except (KeyError, TypeError, ValueError):
                raise ExchangeError("a tensor entry of the outputs file is not valid") from None
            itemsize = torch.empty(0, dtype=dtype).element_size()
            if any(s < 0 for s in shape) or len(shape) > 16 or nbytes != math.prod(shape) * itemsize:
                raise ExchangeError(f"a tensor's shape {shape} does not match its {nbytes} bytes")
            total += nbytes
            if total > max_bytes or offset < 0 or data_start + offset + nbytes > size:
                raise ExchangeError("the outputs file is truncated or larger than the outputs can be")
            layout.append((dtype, shape, offset, nbytes))

        def tensor(index: int):
            dtype, shape, offset, nbytes = layout[index]
            f.seek(data_start + offset)
            raw = bytearray(f.read(nbytes))
            t = (torch.frombuffer(raw, dtype=torch.uint8).view(dtype) if nbytes else torch.empty(0, dtype=dtype))
            return t.reshape(shape)

        def build(node, depth: int):
            if depth > MAX_DEPTH or not isinstance(node, dict):
                raise ExchangeError("the outputs file's structure is not valid")
            if "t" in node:
                index = node["t"]
                if not isinstance(index, int) or not 0 <= index < len(layout):
                    raise ExchangeError("the outputs file names a tensor it does not hold")
                return tensor(index)
            if "b" in node:
                return bool(node["b"])
            if "n" in node:
                if not isinstance(node["n"], (int, float)):
                    raise ExchangeError("the outputs file holds a number that is not one")
                return node["n"]
            if "none" in node:
                return None
            if "seq" in node and isinstance(node["seq"], list):
                built = [build(n, depth + 1) for n in node["seq"]]
                return tuple(built) if node.get("tuple") else built
            raise ExchangeError("the outputs file's structure is not valid")

        if items is None:
            return build(tree, 0)
        calls = tree.get("seq") if isinstance(tree, dict) else None
        if not isinstance(calls, list):
            raise ExchangeError("the batch file does not hold a list of calls")
        if any(not 0 <= i < len(calls) for i in items):
            raise ExchangeError(f"the batch file holds {len(calls)} calls, fewer than the judge asked for")
        return [build(calls[i], 1) for i in items]
