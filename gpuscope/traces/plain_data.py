"""What an untrusted pickle may hold: plain data (dicts, lists, tuples, sets, strings, bytes, numbers, booleans and
None), and how a reader says it holds something else.

A pickle is a program: its GLOBAL/STACK_GLOBAL/INST opcodes import any callable and REDUCE/BUILD/OBJ/NEWOBJ call
it, so ``pickle.load`` on a file from elsewhere runs whatever the file says (``os.system``, say). Both readers here
refuse every global before it is imported: the streaming reader (``pickle_stream``) knows only the opcodes that
build plain data; ``PlainUnpickler``, CPython's C unpickler, refuses every global, persistent id and out-of-band
buffer (Python's documented way of restricting globals). Without a global nothing on the stack is callable, so the
opcodes that call find nothing to call.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

PLAIN_OPCODES = frozenset({
    "PROTO", "FRAME", "STOP", "MARK", "POP", "POP_MARK", "DUP",
    "NONE", "NEWTRUE", "NEWFALSE", "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4",
    "FLOAT", "BINFLOAT", "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "SHORT_BINUNICODE", "BINUNICODE",
    "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8",
    "EMPTY_LIST", "APPEND", "APPENDS", "LIST", "EMPTY_TUPLE", "TUPLE", "TUPLE1", "TUPLE2", "TUPLE3",
    "EMPTY_DICT", "DICT", "SETITEM", "SETITEMS", "EMPTY_SET", "ADDITEMS", "FROZENSET",
    "GET", "BINGET", "LONG_BINGET", "PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE",
})
"""The opcodes that build plain data (pickletools' names)."""
OUTSIDE = {"PERSID": "an object outside the file (a persistent id)",
           "BINPERSID": "an object outside the file (a persistent id)",
           "NEXT_BUFFER": "a buffer outside the file (out-of-band data)",
           "READONLY_BUFFER": "a buffer outside the file (out-of-band data)"}
"""The opcodes that fetch something from outside the file, with what they fetch; every other opcode that is not
plain data imports or calls code."""
ONLY_PLAIN = "only plain data is read"
CUT_SHORT = "not a valid pickle (it ends before its STOP: cut short?)"


class NotPlainData(ValueError):
    """The pickle holds more than plain data (``refused``), or is no pickle; the message says what, in a few
    words."""

    def __init__(self, message: str, *, refused: bool = True) -> None:
        super().__init__(message)
        self.refused = refused


class BudgetSpent(NotPlainData):
    """Reading the pickle spent one of its budgets (``limits.PickleBudget``); the message names it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, refused=False)


def refusal(opcode: str, names: str = "") -> NotPlainData:
    """The refusal of an opcode that is not plain data (``names``: the global it names, where known)."""
    if opcode in OUTSIDE:
        return NotPlainData(f"it holds the pickle opcode {opcode}, which refers to {OUTSIDE[opcode]}; {ONLY_PLAIN}")
    if names:
        return NotPlainData(f"it names the global {names} (pickle opcode {opcode}), which imports code; {ONLY_PLAIN}")
    return NotPlainData(f"it holds the pickle opcode {opcode}, which imports or calls code; {ONLY_PLAIN}")


class _NoBuffers:
    def __iter__(self) -> _NoBuffers:
        return self

    def __next__(self) -> Any:
        raise refusal("NEXT_BUFFER")


class PlainUnpickler(pickle.Unpickler):
    """CPython's C unpickler, refusing every global, persistent id and out-of-band buffer before it is used."""

    def __init__(self, file: io.BufferedIOBase | io.BytesIO | Any) -> None:
        super().__init__(file, buffers=_NoBuffers())

    def find_class(self, module: str, name: str) -> Any:
        raise NotPlainData(f"it names the global {module[:80]}.{name[:80]}, which imports code; {ONLY_PLAIN}")

    def persistent_load(self, pid: Any) -> Any:
        raise refusal("PERSID")


def damage(exc: BaseException) -> NotPlainData:
    """What the C unpickler's own error says about a damaged pickle, as one line."""
    text = str(exc)
    if isinstance(exc, EOFError) or "truncated" in text:
        return NotPlainData(CUT_SHORT, refused=False)
    if text.startswith("unregistered extension code"):
        return NotPlainData(f"it holds an extension code (pickle opcode EXT1, EXT2 or EXT4), which imports code; "
                            f"{ONLY_PLAIN}")
    return NotPlainData(f"not a valid pickle ({type(exc).__name__}: {text[:200]})", refused=False)


def load_plain(file: io.BufferedIOBase | io.BytesIO | Any) -> Any:
    """The plain data the pickle in ``file`` holds, by the C unpickler; ``NotPlainData`` (one line) for anything
    else."""
    try:
        return PlainUnpickler(file).load()
    except NotPlainData:
        raise
    except LOAD_ERRORS as exc:
        raise damage(exc) from None


LOAD_ERRORS: tuple[type[BaseException], ...] = (
    pickle.UnpicklingError, EOFError, IndexError, KeyError, ValueError, TypeError, AttributeError,
    UnicodeDecodeError, OverflowError)
"""What the C unpickler raises for a damaged stream (an empty stack, a bad memo index, a cut ...)."""
