"""Fingerprints of the user's own functions (registered methods and models of the coverage engine).

A fingerprint names a function by its module, qualified name and a SHA-256 of its code, the same in
every process (a Ray worker's, a later run's), so that a result on disk computed by an earlier
function registered under the same name is recomputed, not reused.
"""

from __future__ import annotations

import functools
import hashlib
import types
from typing import Any, Callable


def hash_code(h: Any, code: Any) -> None:
    """Feeds a code object's bytecode, constants and names to ``h``. A nested function, lambda or (before
    Python 3.12) comprehension is a code object among the constants, whose repr holds its memory address:
    it is hashed the same way in its place, so that the fingerprint is the same in every process (a Ray
    worker's, a later run's); the repr of constants without code objects is hashed as it was."""
    h.update(code.co_code)
    consts = code.co_consts
    if any(isinstance(c, type(code)) for c in consts):
        nested = []
        for c in consts:
            if isinstance(c, type(code)):
                sub = hashlib.sha256()
                hash_code(sub, c)
                nested.append(f"<code {c.co_name} {sub.hexdigest()[:16]}>")
            else:
                nested.append(c)
        consts = tuple(nested)
    h.update(repr(consts).encode())
    h.update(repr(code.co_names).encode())


_PLAIN = (str, int, float, bool, complex, bytes, type(None))


def _hash_value(h: Any, value: Any, depth: int) -> None:
    """A closure cell's or default argument's value: a function by its code (recursively), a class or
    module by its name, a plain value (number, string, tuple of them) by its repr, anything else (an
    array, an object) by its type only (a repr may hold an address)."""
    if (
        callable(value)
        and depth < 4
        and (getattr(value, "__code__", None) is not None or isinstance(value, functools.partial))
    ):
        hash_function(h, value, depth + 1)
    elif isinstance(value, type):
        h.update(f"<class {value.__module__}.{value.__qualname__}>".encode())
    elif isinstance(value, types.ModuleType):
        h.update(f"<module {value.__name__}>".encode())
    elif isinstance(value, _PLAIN) or (isinstance(value, tuple) and all(isinstance(v, _PLAIN) for v in value)):
        h.update(repr(value).encode())
    else:
        h.update(f"<{type(value).__module__}.{type(value).__qualname__}>".encode())


def hash_function(h: Any, fn: Callable, depth: int = 0) -> None:
    """Feeds a function to ``h``: its code (:func:`hash_code`), default arguments and the values its
    closure captured (functions recursively, so that two models built by one factory from different
    functions differ); a ``functools.partial`` by its function, arguments and keywords. Functions it calls
    by a global name are not followed (their names are hashed, not their code), nor the values of
    captured arrays (their type only)."""
    if isinstance(fn, functools.partial):
        h.update(b"<partial>")
        hash_function(h, fn.func, depth + 1)
        for v in fn.args:
            _hash_value(h, v, depth)
        for k in sorted(fn.keywords):
            h.update(k.encode())
            _hash_value(h, fn.keywords[k], depth)
        return
    code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__call__", None), "__code__", None)
    if code is None:
        h.update(f"<{type(fn).__module__}.{type(fn).__qualname__}>".encode())
        return
    hash_code(h, code)
    for v in getattr(fn, "__defaults__", None) or ():
        _hash_value(h, v, depth)
    for k, v in sorted((getattr(fn, "__kwdefaults__", None) or {}).items()):
        h.update(k.encode())
        _hash_value(h, v, depth)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        _hash_value(h, v, depth)


def function_name(fn: Callable) -> str:
    """``module.qualname`` of a function (of a partial's function)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    module = getattr(fn, "__module__", "") or ""
    return f"{module}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"
