"""One BLAS thread for the small products of one question: the NumPy encoder's forward pass
and the scan over the passages' vectors.

NumPy's OpenBLAS splits even a ``[13, 384] x [384, 1152]`` product over every core; on two
cores shared with other work, the second thread's wait turned a 0.2 ms product into 12 ms
(bench/reports/19-dense-hybrid-retrieval.md). OpenBLAS (0.3.27 and later) can set the count
for the calling thread alone (``openblas_set_num_threads_local``), which is what this does, so a
server's other threads and the rest of the process keep theirs. NumPy has no public call for it;
the library is found among those the process has loaded. Where it is not OpenBLAS (another build
of NumPy), nothing is changed.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@functools.lru_cache(maxsize=1)
def _set_local() -> Any:
    """OpenBLAS's ``openblas_set_num_threads_local``, or None where there is none."""
    import numpy  # noqa: F401  (loads NumPy's BLAS, so the search below finds it)

    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    libraries = sorted({line.split()[-1] for line in maps.splitlines() if "openblas" in line})
    for library in libraries:
        try:
            function = ctypes.CDLL(library).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        function.argtypes, function.restype = [ctypes.c_int], ctypes.c_int
        return function
    return None


def available() -> bool:
    """Whether the calling thread's BLAS thread count can be set here."""
    return _set_local() is not None


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block's NumPy products on the calling thread alone."""
    set_local = _set_local()
    if set_local is None:
        yield
        return
    before = set_local(1)
    try:
        yield
    finally:
        set_local(before)
