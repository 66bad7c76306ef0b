"""The bridge to the C++ library: where it is, how its functions are called, what their status codes mean.

The library is `build/libvecstats.so` at the repository root (see CMakeLists.txt), found from this file's
location so the package works wherever the repository is. It is loaded on first use, and each function is
looked up when it is first called: a library built before a function existed still serves the others.
"""

import ctypes
import math
from collections.abc import Iterable
from pathlib import Path

LIBRARY = Path(__file__).resolve().parent.parent / "build" / "libvecstats.so"

# enum vs_status in include/vecstats.h
OK, EMPTY, DOMAIN, NULL, NO_MEMORY = range(5)

_library = None


def library() -> ctypes.CDLL:
    """The loaded shared object; OSError with a hint when it has not been built."""
    global _library
    if _library is None:
        if not LIBRARY.is_file():
            raise OSError(f"{LIBRARY} does not exist: build it with "
                          "`cmake -S . -B build -G Ninja && cmake --build build` in the repository root")
        _library = ctypes.CDLL(str(LIBRARY))
    return _library


def function(name: str, *extra_argtypes: type) -> ctypes._CFuncPtr:
    """The C function `name(const double *xs, size_t n, <extra>..., double *out)`, typed for ctypes.

    AttributeError when the library has no such symbol (it was built from older sources).
    """
    fn = getattr(library(), name)
    fn.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.c_size_t, *extra_argtypes,
                   ctypes.POINTER(ctypes.c_double)]
    fn.restype = ctypes.c_int
    return fn


def as_doubles(values: Iterable[float]) -> tuple[ctypes.Array, int]:
    """A C array of doubles holding `values` (any iterable of numbers), and its length."""
    items = [float(v) for v in values]
    return (ctypes.c_double * len(items))(*items), len(items)


def call(name: str, values: Iterable[float], *extra: object, argtypes: tuple[type, ...] = ()) -> float:
    """Call the C function `name` on `values` (plus `extra` arguments of `argtypes`); return its result.

    A status other than OK becomes ValueError (or MemoryError) naming the function.
    """
    fn = function(name, *argtypes)
    array, n = as_doubles(values)
    out = ctypes.c_double(math.nan)
    status = fn(array, n, *extra, ctypes.byref(out))
    if status == OK:
        return out.value
    if status == NO_MEMORY:
        raise MemoryError(f"{name}: no memory for a working copy of {n} values")
    reasons = {EMPTY: f"not enough values ({n})", DOMAIN: "an argument or value is outside the domain",
               NULL: "null pointer"}
    raise ValueError(f"{name}: {reasons.get(status, f'unknown status {status}')}")
