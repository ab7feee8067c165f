"""Unpickling that accepts plain data only: dicts, lists, tuples, sets, strings, bytes, numbers, booleans and None.

A pickle is a program: its GLOBAL/STACK_GLOBAL opcodes import any callable and REDUCE/BUILD/OBJ/NEWOBJ call it, so
``pickle.load`` on a file from elsewhere runs whatever the file says (``os.system``, say). Here every opcode is
checked against a list of those that only build plain data before anything is unpickled, and the unpickler itself
refuses every global as well (Python's documented way of restricting globals), so nothing a pickle names is ever
imported or called. Refused: any global, any call, persistent ids, extension codes and out-of-band buffers.
"""

from __future__ import annotations

import io
import pickle
import pickletools
from typing import Any

PLAIN_OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP",
    "NONE", "NEWTRUE", "NEWFALSE", "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4",
    "FLOAT", "BINFLOAT", "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE",
    "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
    "EMPTY_LIST", "APPEND", "APPENDS", "LIST", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
    "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS", "EMPTY_SET", "ADDITEMS", "FROZENSET",
    "GET", "BINGET", "LONG_BINGET", "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE",
})
"""The opcodes that build plain data (pickletools' names); every other one imports or calls something."""


class NotPlainData(ValueError):
    """The pickle holds more than plain data (``refused``), or is no pickle; the message says what, in a few
    words."""

    def __init__(self, message: str, *, refused: bool = True) -> None:
        super().__init__(message)
        self.refused = refused


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise NotPlainData(f"it names {module}.{name}, and only plain data is read")

    def persistent_load(self, pid: Any) -> Any:
        raise NotPlainData("it refers to a persistent object, and only plain data is read")


def loads_plain(data: bytes) -> Any:
    """The plain data a pickle holds; ``NotPlainData`` (one line) for anything else, before any of it is run."""
    try:
        for opcode, arg, _ in pickletools.genops(data):
            if opcode.name not in PLAIN_OPCODES:
                what = f" {arg}" if opcode.name == "GLOBAL" and arg else ""
                raise NotPlainData(f"it holds the pickle opcode {opcode.name}{what}, which imports or calls code; "
                                   "only plain data is read")
    except NotPlainData:
        raise
    except Exception as exc:  # pickletools raises ValueError and others on a damaged stream
        raise NotPlainData(f"not a valid pickle ({exc})", refused=False) from None
    try:
        return _NoGlobals(io.BytesIO(data)).load()
    except NotPlainData:
        raise
    except Exception as exc:  # a stream that scans clean but does not load (a damaged memo, say)
        raise NotPlainData(f"not a valid pickle ({type(exc).__name__}: {exc})", refused=False) from None
