"""Tensors across the trust boundary: what a runner hands the judge, in a file format the judge parses without
running anything (no pickle, no torch.load).

A runner (a process that has run problem or candidate code) writes a forward's outputs with `write_outputs`; the
judge reads them back with `read_outputs`, which checks every field before it builds a tensor: a known dtype, a
shape that matches the byte count, offsets inside the file, a bounded nesting depth and size. Whatever the runner
was made to write, the judge gets plain CPU tensors or a clear `ExchangeError` (which it counts against the
candidate), never code.

Layout: 8 bytes magic, 8 bytes little-endian header length, the header (JSON), then the data region: each
tensor's raw bytes, starting at a multiple of ALIGN and padded to one. The header's "tree" mirrors the forward's
return value: {"t": index} for a tensor, {"n": number}, {"b": bool}, {"none": true}, {"seq": [...], "tuple": bool}
for tuples and lists.

The judge's batch (judge.py) uses two more things here, so that a runner can do its calls' work nowhere but in its
timed `calls` part:
- its input file's data region is masked (XOR with a stream drawn from a key, `mask_words`) by the reference runner
  that writes it; a runner loads it masked and learns the key only with `calls`, so nothing of the inputs can be
  computed on while they are loaded (`read_batch`, `unmask`);
- a runner ends `calls` by saying each call's `digest` (a sum of its outputs' bytes as integer words); the judge
  reads calls of the file `commit` wrote and checks their digests, so outputs computed after the calls, while
  they are written, are caught.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
import threading
from pathlib import Path

MAGIC = b"KSXCHG01"
ALIGN = 256  # every tensor's bytes start at a multiple of this in the data region: a runner's batch inputs are
# views of one buffer (read_batch), aligned as kernels expect, and the mask's 8-byte words line up with them
BATCH_INPUTS = "inputs.bin"  # the judge's batch: its input sets, made by the reference runner, read by both runners
BATCH_OUTPUTS = "outputs.bin"  # and a runner's outputs of its calls, one file each
CHUNK_BYTES = 256 << 20  # a batch's tensors cross between host and device this much at a time
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
def padded(nbytes: int) -> int:
    """What a tensor of `nbytes` takes of the data region."""
    return -(-nbytes // ALIGN) * ALIGN


def write_outputs(path: str | Path, out, mask: tuple[int, object] | None = None) -> int:
    """Write a forward's return value (tensors, numbers, None, nested tuples/lists) to `path`; returns the bytes of
    tensor data. Tensors are written contiguous, as their host copies; a tensor subclass is written as the values it
    gives. A batch (a list with one entry per call: outputs, or input sets) is one such value, in one file: the
    device tensors of a batch go to the host a chunk at a time (CHUNK_BYTES, gathered on the device), not one copy
    per tensor, which made a batch's `commit` cost seconds on the H200. `mask`, (key, device): the data region is
    written XORed with mask_words(key, ..., device), the device its reader will unmask on."""
    import torch

    tensors: list = []

    def tree(value, depth: int):
        if depth > MAX_DEPTH:
            raise ExchangeError(f"outputs nested deeper than {MAX_DEPTH}")
        if isinstance(value, torch.Tensor):
            tensors.append(torch.Tensor(value.detach()).contiguous() if type(value) is not torch.Tensor
                           else value.detach().contiguous())
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
    entries, offset, total = [], 0, 0
    for t in tensors:
        nbytes = t.numel() * t.element_size()
        entries.append({"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "offset": offset,
                        "nbytes": nbytes})
        offset += padded(nbytes)
        total += nbytes
    header = json.dumps({"tree": shape, "tensors": entries}, allow_nan=True).encode()
    words = mask_words(mask[0], offset // 8, mask[1]).view(torch.uint8) if mask is not None else None
    tmp = Path(str(path) + ".part")
    at = 0  # where the next chunk starts in the data region
    with open(tmp, "wb") as f:
        f.write(MAGIC + struct.pack("<Q", len(header)) + header)
        for chunk in _chunks([t for t in tensors if t.numel()]):
            size = sum(padded(t.numel() * t.element_size()) for t in chunk)
            if chunk[0].device.type == "cpu" and words is None:
                raw = _bytes(chunk[0])
                f.write(memoryview(raw.numpy()))
                f.write(bytes(size - raw.numel()))
                at += size
                continue
            # one gather (padding included) on the chunk's device and one copy to the host for the whole chunk
            zero = torch.zeros(ALIGN, dtype=torch.uint8, device=chunk[0].device)
            parts = []
            for t in chunk:
                raw = _bytes(t)
                parts += [raw, zero[:padded(raw.numel()) - raw.numel()]]
            gathered = torch.cat(parts)
            if words is not None:
                gathered.view(torch.int64).bitwise_xor_(words[at:at + size].to(gathered.device).view(torch.int64))
            at += size
            host = gathered if gathered.device.type == "cpu" else staging(size)[:size].copy_(gathered)
            f.write(memoryview(host.numpy()))
    os.replace(tmp, path)
    return total


def mask_words(key: int, words: int, device):
    """The mask of a batch's input file: `words` random 64-bit words from `key`, drawn on `device` (the writer and
    its readers draw them on the same kind of device: a stream of the GPU's own generator there, one pass; on a
    CPU, numpy's SFC64, several times faster than torch's generator)."""
    import torch

    device = torch.device(device)
    if device.type == "cpu":
        import numpy as np

        return torch.from_numpy(np.random.SFC64(key).random_raw(words).view(np.int64))
    generator = torch.Generator(device=device)
    generator.manual_seed(key)
    return torch.empty(words, dtype=torch.int64, device=device).random_(-(1 << 63), None, generator=generator)


def unmask(buffer, key: int, words: int) -> None:
    """`buffer` (the first bytes of a masked data region of `words` words, as read_batch loaded it) unmasked in
    place: XOR with the same mask, drawn anew from `key`."""
    import torch

    n = buffer.numel() // 8
    if n:
        buffer[:n * 8].view(torch.int64).bitwise_xor_(mask_words(key, words, buffer.device)[:n])


def word_sums(rows):
    """The digest of each row of a 2-D uint8 tensor (one row per call, the bytes of one of its output tensors): the
    sum of its 8-byte words (4-byte, or bytes, where the row's length is not a multiple of 8), as int64, wrapping.
    A call's digest adds its tensors' (wrapping too), in any order (`digest`). Order-free and exact: a runner and
    the judge get the same number from the same bytes, on any device."""
    import torch

    for dtype, size in ((torch.int64, 8), (torch.int32, 4)):
        if rows.shape[1] % size == 0:
            return rows.view(dtype).sum(1, dtype=torch.int64)
    return rows.sum(1, dtype=torch.int64)


def wrap64(value: int) -> int:
    """An integer as int64 arithmetic would hold it (mod 2**64, signed)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value


def digest(value) -> int:
    """One call's digest, from its outputs as read back (word_sums of each tensor, added)."""
    from kernelskill.review.worker.checks import map_tensors

    sums: list[int] = []
    map_tensors(value, lambda t: sums.append(int(word_sums(_bytes(t.contiguous()).unsqueeze(0))[0])))
    return wrap64(sum(sums))


# each thread's host buffer for the copies between host and device, pinned where it can be: the judge compares the
# outputs of several reviews at once (several GPUs, or reviews sharing one), and with one buffer for the process
# one review's bytes were copied to the device from another's (honest kernels failed the judge's trials on an H100)
_STAGING = threading.local()


def staging(nbytes: int):
    """A host buffer of this thread's of at least `nbytes` (at most CHUNK_BYTES), kept for its later copies:
    page-locked memory where CUDA gives it (the copy is then one DMA, and no page of it is faulted in again), else
    plain."""
    import torch

    buffer = getattr(_STAGING, "buffer", None)
    if buffer is None or buffer.numel() < nbytes:
        size = max(nbytes, min(CHUNK_BYTES, 64 << 20))
        try:
            buffer = torch.empty(size, dtype=torch.uint8, pin_memory=torch.cuda.is_available())
        except RuntimeError:  # no page-locked memory to be had: plain memory works, more slowly
            buffer = torch.empty(size, dtype=torch.uint8)
        _STAGING.buffer = buffer
    return buffer


def _bytes(t):
    """A contiguous tensor's bytes, as a flat uint8 view."""
    import torch

    return t.reshape(-1).view(torch.uint8)


def _chunks(tensors: list) -> list[list]:
    """Consecutive tensors grouped for the copy to the host: a host tensor alone, device tensors of one device up to
    CHUNK_BYTES together (one larger than that alone)."""
    chunks: list[list] = []
    size = 0
    for t in tensors:
        nbytes = t.numel() * t.element_size()
        last = chunks[-1] if chunks else None
        if (t.device.type == "cpu" or last is None or last[0].device != t.device
                or size + nbytes > CHUNK_BYTES):
            chunks.append([t])
            size = nbytes
        else:
            last.append(t)
            size += nbytes
    return chunks


# -------------------------------------------------------------------------------------------------- judge side
def _open(path: str | Path, max_bytes: int, max_tensors: int):
    """(open file, tree, layout, data start) of a file written by `write_outputs`, every entry of its header checked
    before any tensor is read: layout is (dtype, shape, offset, nbytes) per tensor."""
    import torch

    path = Path(path)
    try:
        size = path.stat().st_size
        f = open(path, "rb")
    except OSError as exc:
        raise ExchangeError(f"no outputs were handed over ({exc.strerror})") from None
    header_limit = MAX_HEADER if max_tensors <= MAX_TENSORS else MAX_HEADER * (max_tensors // MAX_TENSORS + 1)
    try:
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
        layout = []
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
    except BaseException:
        f.close()
        raise
    return f, tree, layout, data_start


def _build(node, depth: int, layout: list, tensor):
    """The value a header's tree node stands for, each tensor made by `tensor(index)`."""
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
        built = [_build(n, depth + 1, layout, tensor) for n in node["seq"]]
        return tuple(built) if node.get("tuple") else built
    raise ExchangeError("the outputs file's structure is not valid")


def _calls(tree, items) -> list:
    """The tree nodes of these calls of a batch file."""
    calls = tree.get("seq") if isinstance(tree, dict) else None
    if not isinstance(calls, list):
        raise ExchangeError("the batch file does not hold a list of calls")
    if any(not 0 <= i < len(calls) for i in items):
        raise ExchangeError(f"the batch file holds {len(calls)} calls, fewer than the judge asked for")
    return [calls[i] for i in items]


def read_outputs(path: str | Path, max_bytes: int, items: range | list[int] | None = None,
                 max_tensors: int = MAX_TENSORS, device=None):
    """The value written by `write_outputs`, as CPU tensors; raises ExchangeError for anything else.

    `items`: the file holds a list (a batch: one entry per call) and only these entries are built, in this order,
    reading the bytes of their tensors alone (the judge compares a few calls of a batch of thousands). Every tensor
    entry of the header is checked all the same. `device` (the judge, comparing on a GPU):
    each tensor's bytes alone go to the device, through the page-locked staging buffer, into an allocation of its
    own; nothing else of the file is read."""
    import torch

    f, tree, layout, data_start = _open(path, max_bytes, max_tensors)
    direct = device is not None and torch.device(device).type != "cpu"

    def tensor(index: int):
        dtype, shape, offset, nbytes = layout[index]
        if direct:
            if not nbytes:
                return torch.empty(shape, dtype=dtype, device=device)
            return _to_device(f, data_start + offset, nbytes, device).view(dtype).reshape(shape)
        f.seek(data_start + offset)
        raw = torch.empty(nbytes, dtype=torch.uint8)
        if nbytes:
            _read_into(f, memoryview(raw.numpy()))  # straight into the tensor's memory
        return (raw.view(dtype) if nbytes else torch.empty(0, dtype=dtype)).reshape(shape)

    with f:
        if items is None:
            return _build(tree, 0, layout, tensor)
        return [_build(node, 1, layout, tensor) for node in _calls(tree, items)]


def read_samples(path: str | Path, max_bytes: int, items: list[int], max_tensors: int, choose):
    """Some elements of these calls of a batch file, not their whole outputs: per call, (its value with each tensor
    replaced by a 1-D CPU tensor of its elements at the flat positions `choose(call, k, dtype, shape)` gives for the
    call's k-th tensor (an int64 numpy array; None: no elements), each tensor's (dtype name, shape)). Only those
    elements' bytes are read, from a read-only map of the file; every entry of its header is checked as by
    read_outputs."""
    import mmap

    import numpy as np
    import torch

    f, tree, layout, data_start = _open(path, max_bytes, max_tensors)
    with f:
        nodes = _calls(tree, items)
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        held: list = []  # the map's one view, cleared before the map is closed (it refuses while viewed)
        try:
            held.append(np.frombuffer(data, dtype=np.uint8))
            out = []
            for call, node in zip(items, nodes):
                shapes: list[tuple[str, list[int]]] = []

                def tensor(index: int):
                    dtype, shape, offset, _ = layout[index]
                    shapes.append((str(dtype).removeprefix("torch."), shape))
                    positions = choose(call, len(shapes) - 1, dtype, shape)
                    if positions is None or not len(positions):
                        return torch.empty(0, dtype=dtype)
                    at = data_start + offset + positions[:, None] * dtype.itemsize + np.arange(dtype.itemsize)
                    return torch.from_numpy(held[0][at.reshape(-1)]).view(dtype)  # a copy: nothing keeps the map

                out.append((_build(node, 1, layout, tensor), shapes))
        finally:
            held.clear()
            data.close()
    return out


def read_batch(path: str | Path, count: int, device):
    """A runner's batch inputs: (the first `count` input sets of the file, the buffer on `device` their tensors
    are views of, the data region's length in 8-byte words). The file's bytes up to the last tensor needed are
    copied there a chunk at a time, still masked: `unmask(buffer, key, words)` makes them the inputs once the judge
    gives the key. Each tensor starts at a multiple of ALIGN of the buffer (aligned as kernels expect)."""
    import torch

    f, tree, layout, data_start = _open(path, 1 << 62, MAX_TENSORS * max(1, count))
    with f:
        nodes = _calls(tree, range(count))
        used = _tensors_under(nodes)
        if any(layout[i][2] % ALIGN for i in used if i < len(layout)):
            raise ExchangeError("the batch's input file has a tensor not aligned to its data region")
        end = max((layout[i][2] + padded(layout[i][3]) for i in used if i < len(layout)), default=0)
        region = max((offset + padded(nbytes) for _, _, offset, nbytes in layout), default=0)
        if torch.device(device).type == "cpu":
            buffer = torch.empty(end, dtype=torch.uint8)
            f.seek(data_start)
            _read_into(f, memoryview(buffer.numpy()))
        else:
            buffer = _to_device(f, data_start, end, device)

        def tensor(index: int):
            dtype, shape, offset, nbytes = layout[index]
            return buffer[offset:offset + nbytes].view(dtype).reshape(shape)

        return [_build(node, 1, layout, tensor) for node in nodes], buffer, region // 8


def read_outputs_on(on: str, path: str | Path, max_bytes: int, items: list[int] | None = None,
                    max_tensors: int = MAX_TENSORS):
    """read_outputs onto the judge's comparing device `on`: each tensor's bytes straight there through the page-locked
    buffer (a pageable copy of the whole file first took most of a big-output review's GPU time on the H100); on
    the host when the device cannot hold them."""
    if on != "cpu":
        import torch

        try:
            return read_outputs(path, max_bytes, items, max_tensors, device=on)
        except RuntimeError:  # out of memory (an ExchangeError is a ValueError, raised as it is)
            torch.cuda.empty_cache()
    return read_outputs(path, max_bytes, items, max_tensors)


def _tensors_under(nodes: list) -> list[int]:
    """The tensor indices a part of a header's tree names (malformed nodes are left to `build` to refuse)."""
    found: list[int] = []
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if type(node.get("t")) is int:
                found.append(node["t"])
            if isinstance(node.get("seq"), list):
                stack.extend(node["seq"])
    return [i for i in found if i >= 0]


def _to_device(f, start: int, length: int, device):
    """Bytes [start, start + length) of an open file, as a uint8 tensor on `device`, read CHUNK_BYTES at a time."""
    import torch

    blob = torch.empty(length, dtype=torch.uint8, device=device)
    host = staging(min(length, CHUNK_BYTES))
    f.seek(start)
    done = 0
    while done < length:
        n = min(CHUNK_BYTES, length - done)
        _read_into(f, memoryview(host[:n].numpy()))
        blob[done:done + n].copy_(host[:n])
        done += n
    return blob


def _read_into(f, view: memoryview) -> None:
    """Fill `view` from the file's current position (a read may return less than asked)."""
    done = 0
    while done < len(view):
        n = f.readinto(view[done:])
        if not n:
            raise ExchangeError("the file ended before its tensors did")
        done += n


def hand_over(source: Path, target: Path) -> None:
    """The batch's input file, made by the reference runner, into the candidate runner's folder (the only one it
    may read): a hard link, or a copy across file systems. A folder made for it here belongs to the runner, as the
    folder it is made in does: the runner writes its outputs next to it (where it runs as a uid of its own, a folder
    of the judge's would refuse them; seen on the H200)."""
    made = []
    folder = target.parent
    while not folder.exists():
        made.append(folder)
        folder = folder.parent
    owner = folder.stat()
    for each in reversed(made):
        each.mkdir()
        if (owner.st_uid, owner.st_gid) != (os.getuid(), os.getgid()):
            os.chown(each, owner.st_uid, owner.st_gid)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
