"""``.npz`` traffic files: a scipy sparse matrix saved with ``scipy.sparse.save_npz``
(directed traffic), or arrays ``src``, ``dst``, ``weight`` (and optional ``n``).

Read from the file's bytes; the zip directory, the members' sizes and every ``.npy``
header are checked before any array is read.  Errors are
:class:`~mapper.io.graph_format.GraphFormatError` naming the file.
"""

from __future__ import annotations

import io
import math
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..model.graph import CommGraph
from .graph_format import GraphFormatError, SizeLimit

_NPZ_MAX_MEMBERS = 64
_NPZ_MAX_DIRECTORY = 64 << 10     # bytes of zip central directory (a graph has <= 5 arrays)
_NPY_MAX_HEADER = 1 << 16


def read_npz(p: Path, data: bytes, max_bytes: int | None, limit: SizeLimit) -> CommGraph:
    """An .npz file from its bytes; sizes are checked before any array is read.

    The zip directory, the uncompressed member sizes (``ZipInfo.file_size``, which
    zipfile enforces while decompressing) and every ``.npy`` header (shape and dtype,
    read without decompressing the data) are checked first; only then are the arrays
    read, each no larger than its member.
    """
    eocd = data.rfind(b"PK\x05\x06", max(0, len(data) - 22 - 0xFFFF))
    if eocd < 0 or len(data) - eocd < 22:
        raise GraphFormatError(f"{p}: not a readable .npz file (no zip directory)")
    directory = struct.unpack_from("<L", data, eocd + 12)[0]
    if directory > _NPZ_MAX_DIRECTORY:
        raise GraphFormatError(f"{p}: zip directory of {directory} bytes; a graph .npz has "
                               f"a few arrays")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError,
            NotImplementedError) as exc:
        raise GraphFormatError(f"{p}: not a readable .npz file: {exc}") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > _NPZ_MAX_MEMBERS:
            raise GraphFormatError(f"{p}: {len(infos)} members; a graph .npz has a few arrays")
        total = sum(info.file_size for info in infos)
        if max_bytes is not None and total > max_bytes:
            raise GraphFormatError(f"{p}: the arrays are {total} bytes uncompressed, over the "
                                   f"limit of {max_bytes} bytes")
        headers = {info.filename: _npy_header(p, zf, info) for info in infos}
        # keys as numpy.load names them
        members = {name[:-4] if name.endswith(".npy") else name: name for name in headers}

        def array(key: str) -> np.ndarray:
            name = members[key]
            if headers[name] is None:
                raise GraphFormatError(f"{p}: member {name} is not a numpy array")
            try:
                with zf.open(name) as fh:
                    return np.lib.format.read_array(fh, allow_pickle=False)
            except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
                raise GraphFormatError(f"{p}: member {name}: {exc}") from None

        def scalar(key: str) -> int | str:
            shape, _dtype = headers.get(members[key]) or ((), None)
            if math.prod(shape) != 1:
                raise GraphFormatError(f"{p}: {key} must be a single value")
            value = array(key).reshape(()).item()
            return value.decode("ascii", "replace") if isinstance(value, bytes) else value

        keys = set(members)
        if {"indptr", "indices", "data", "shape", "format"} <= keys:
            return _npz_sparse(p, array, scalar, limit)
        if {"src", "dst"} <= keys:
            n = None
            if "n" in keys:
                n = scalar("n")
                if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                    raise GraphFormatError(f"{p}: n must be a non-negative integer")
                limit.check(n, str(p), "n declares")
            src, dst = array("src"), array("dst")
            w = array("weight") if "weight" in keys else None
            for name, x in (("src", src), ("dst", dst)):
                if x.dtype.kind not in "iu":
                    raise GraphFormatError(f"{p}: {name} must be an integer array")
                if n is None and x.size:
                    limit.check(int(x.max()) + 1, str(p), f"{name} names rank {int(x.max())}, "
                                                          f"which implies")
            return CommGraph.from_edges(src, dst, w, n=n, source=str(p))
    raise GraphFormatError(f"{p}: expected a scipy sparse matrix or arrays src, dst[, weight]")


def _npz_sparse(p: Path, array, scalar, limit: SizeLimit) -> CommGraph:
    """A matrix saved by ``scipy.sparse.save_npz`` in csr, csc or bsr format."""
    fmt = scalar("format")
    if fmt not in ("csr", "csc", "bsr"):
        raise GraphFormatError(f"{p}: unsupported sparse format {fmt!r} (csr, csc or bsr)")
    shape = array("shape")
    if shape.shape != (2,) or shape.dtype.kind not in "iu":
        raise GraphFormatError(f"{p}: shape must be two integers")
    rows, cols = (int(x) for x in shape)
    if rows != cols or rows < 0:
        raise GraphFormatError(f"{p}: communication matrix must be square, got {rows}x{cols}")
    limit.check(rows, str(p), "shape declares")
    cls = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "bsr": sp.bsr_matrix}[fmt]
    try:
        a = cls((array("data"), array("indices"), array("indptr")), shape=(rows, cols))
    except (ValueError, TypeError, IndexError) as exc:
        raise GraphFormatError(f"{p}: not a valid {fmt} matrix: {exc}") from None
    return CommGraph.from_matrix(a, directed=True, source=str(p))


def _npy_header(p: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo
                ) -> tuple[tuple[int, ...], np.dtype] | None:
    """Shape and dtype of an .npy member, read without decompressing its data.

    None for a member that is not an .npy array.  The declared data must fit in the
    member's uncompressed size, so reading the array later allocates no more than that.
    """
    try:
        with zf.open(info) as fh:
            head = fh.read(12)
            if not head.startswith(np.lib.format.MAGIC_PREFIX):
                return None
            version = tuple(head[6:8])
            if version == (1, 0) and len(head) >= 10:
                start, hlen = 10, struct.unpack_from("<H", head, 8)[0]
            elif version == (2, 0) and len(head) >= 12:
                start, hlen = 12, struct.unpack_from("<I", head, 8)[0]
            else:
                raise GraphFormatError(f"{p}: member {info.filename}: unsupported .npy "
                                       f"version {version}")
            if hlen > _NPY_MAX_HEADER:
                raise GraphFormatError(f"{p}: member {info.filename}: .npy header of {hlen} "
                                       f"bytes")
            fh.seek(0)
            np.lib.format.read_magic(fh)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, _fortran, dtype = read_header(fh)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise GraphFormatError(f"{p}: member {info.filename}: {exc}") from None
    if dtype.hasobject:
        raise GraphFormatError(f"{p}: member {info.filename}: object arrays are not allowed")
    if any(d < 0 for d in shape):
        raise GraphFormatError(f"{p}: member {info.filename}: negative dimension in {shape}")
    count = math.prod(shape)
    room = info.file_size - start - hlen
    if count * dtype.itemsize > room:
        raise GraphFormatError(f"{p}: member {info.filename} declares {count} entries of "
                               f"{dtype.itemsize} bytes, but holds only {max(room, 0)} bytes")
    return shape, dtype
