"""Plain-data unpickling from a stream, in bounded memory: a pickle machine of its own that knows only the opcodes
that build plain data (``plain_pickle.PLAIN_OPCODES``), so nothing a pickle names is imported or called.

``plain_pickle.loads_plain`` checks a whole pickle and then hands it to the standard unpickler, which builds every
object it holds at once. A PyTorch memory snapshot of several GB would become many times that in Python objects.
Here the machine reads the stream in chunks and lets a ``Reducer`` replace each item as it is put into its
container (an item is complete by then: a pickler writes a child whole before the opcode that adds it), so a caller
can fold a trace entry into columns, or a stack frame into an interned id, the moment it is read. The memo slot of
a replaced container is replaced too (a later reference gets the replacement), or emptied when the item is dropped.
"""

from __future__ import annotations

import codecs
import struct
from typing import IO, Any, Final, Protocol

from gpuscope.traces.plain_pickle import PLAIN_OPCODES, NotPlainData

CHUNK_BYTES = 1 << 20
DROP: Final = object()
"""What a reducer returns for an item that is to be left out of its container (and of the memo)."""
_MAX_MEMO_GAP = 1 << 20
"""A PUT past the memo's end by more than this is refused rather than grown into (a damaged or hostile index)."""


class Reducer(Protocol):
    """Replaces items as they are added to a list (``key`` None) or set in a dict (``key`` the item's key)."""

    def __call__(self, container: list[Any] | dict[Any, Any], key: Any, item: Any) -> Any: ...


_unpack_i = struct.Struct("<i").unpack_from
_unpack_I = struct.Struct("<I").unpack_from
_unpack_Q = struct.Struct("<Q").unpack_from
_unpack_H = struct.Struct("<H").unpack_from
_unpack_d = struct.Struct(">d").unpack_from
_NAMES = {
    b"(": "MARK", b".": "STOP", b"0": "POP", b"1": "POP_MARK", b"2": "DUP", b"F": "FLOAT", b"I": "INT",
    b"J": "BININT", b"K": "BININT1", b"L": "LONG", b"M": "BININT2", b"N": "NONE", b"S": "STRING",
    b"T": "BINSTRING", b"U": "SHORT_BINSTRING", b"V": "UNICODE", b"X": "BINUNICODE", b"a": "APPEND",
    b"d": "DICT", b"}": "EMPTY_DICT", b"e": "APPENDS", b"g": "GET", b"h": "BINGET", b"j": "LONG_BINGET",
    b"l": "LIST", b"]": "EMPTY_LIST", b"p": "PUT", b"q": "BINPUT", b"r": "LONG_BINPUT", b"s": "SETITEM",
    b"t": "TUPLE", b")": "EMPTY_TUPLE", b"u": "SETITEMS", b"G": "BINFLOAT", b"\x80": "PROTO", b"\x85": "TUPLE1",
    b"\x86": "TUPLE2", b"\x87": "TUPLE3", b"\x88": "NEWTRUE", b"\x89": "NEWFALSE", b"\x8a": "LONG1",
    b"\x8b": "LONG4", b"B": "BINBYTES", b"C": "SHORT_BINBYTES", b"\x8c": "SHORT_BINUNICODE",
    b"\x8d": "BINUNICODE8", b"\x8e": "BINBYTES8", b"\x8f": "EMPTY_SET", b"\x90": "ADDITEMS", b"\x91": "FROZENSET",
    b"\x94": "MEMOIZE", b"\x95": "FRAME",
}
assert set(_NAMES.values()) == PLAIN_OPCODES  # one list of what is plain data, kept by plain_pickle


def load_stream(f: IO[bytes], *, reduce: Reducer | None = None) -> Any:
    """The plain data the pickle in ``f`` holds, items passed through ``reduce`` as they are added to their
    containers; ``NotPlainData`` (one line) for anything else, refused before any of it could run."""
    try:
        return _Machine(f, reduce).run()
    except NotPlainData:
        raise
    except (IndexError, KeyError, ValueError, TypeError, AttributeError, UnicodeDecodeError, struct.error,
            OverflowError, MemoryError, RecursionError) as exc:  # damaged: an empty stack, a bad memo index ...
        raise NotPlainData(f"not a valid pickle ({type(exc).__name__}: {exc})", refused=False) from None


class _Machine:
    def __init__(self, f: IO[bytes], reduce: Reducer | None) -> None:
        self.f = f
        self.buf = b""
        self.pos = 0
        self.reduce = reduce
        self.stack: list[Any] = []
        self.marks: list[int] = []
        self.memo: list[Any] = []
        self.memo_slot: dict[int, int] = {}
        """id(container) -> its memo index, for containers a reducer may replace."""
        self.offset = 0
        """Bytes of the stream before ``buf``."""

    def _fill(self, need: int) -> None:
        """Make ``need`` bytes available from ``pos`` (fewer only at the end of the stream)."""
        rest = self.buf[self.pos:]
        self.offset += self.pos
        parts = [rest]
        have = len(rest)
        while have < need:
            chunk = self.f.read(max(CHUNK_BYTES, need - have))
            if not chunk:
                break
            parts.append(chunk)
            have += len(chunk)
        self.buf = b"".join(parts)
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            self._fill(n)
            if n > len(self.buf):
                raise NotPlainData("not a valid pickle (it ends in the middle of a value)", refused=False)
        start = self.pos
        self.pos = start + n
        return self.buf[start:self.pos]

    def _line(self) -> bytes:
        while True:
            end = self.buf.find(b"\n", self.pos)
            if end >= 0:
                line = self.buf[self.pos:end]
                self.pos = end + 1
                return line
            before = len(self.buf) - self.pos
            self._fill(before + CHUNK_BYTES)
            if len(self.buf) == before:
                raise NotPlainData("not a valid pickle (a text value without its end of line)", refused=False)

    def _pop_mark(self) -> list[Any]:
        start = self.marks.pop()
        items = self.stack[start:]
        del self.stack[start:]
        return items

    def _memoize(self, index: int, value: Any) -> None:
        memo = self.memo
        if index == len(memo):
            memo.append(value)
        elif index < len(memo):
            memo[index] = value
        elif index - len(memo) <= _MAX_MEMO_GAP:
            memo.extend([None] * (index - len(memo)))
            memo.append(value)
        else:
            raise NotPlainData(f"not a valid pickle (a memo index {index} far past its end)", refused=False)
        if type(value) is list or type(value) is dict:
            self.memo_slot[id(value)] = index

    def _replaced(self, old: Any, new: Any) -> None:
        slot = self.memo_slot.pop(id(old), None)
        if slot is not None:
            self.memo[slot] = None if new is DROP else new

    def _append(self, target: list[Any], items: list[Any]) -> None:
        reduce = self.reduce
        if reduce is None:
            target.extend(items)
            return
        for item in items:
            new = reduce(target, None, item)
            if new is not item:
                self._replaced(item, new)
            if new is not DROP:
                target.append(new)

    def _setitems(self, target: dict[Any, Any], items: list[Any]) -> None:
        reduce = self.reduce
        for i in range(0, len(items) - 1, 2):
            key, value = items[i], items[i + 1]
            if reduce is not None:
                new = reduce(target, key, value)
                if new is not value:
                    self._replaced(value, new)
                if new is DROP:
                    continue
                value = new
            target[key] = value

    def run(self) -> Any:  # noqa: C901 - one loop over the opcodes, the common ones first: the hot path
        stack = self.stack
        memo = self.memo
        append = stack.append
        buf = self.buf
        pos = self.pos
        end = len(buf) - 16
        while True:
            if pos > end:  # keep 16 bytes ahead: every fixed-size argument below is read straight from ``buf``
                self.pos = pos
                self._fill(16)
                buf, pos = self.buf, 0
                end = len(buf) - 16
                if not buf:
                    raise NotPlainData("not a valid pickle (it ends before its STOP)", refused=False)
            code = buf[pos]
            pos += 1
            if code == 0x68:  # BINGET
                append(memo[buf[pos]])
                pos += 1
            elif code == 0x6A:  # LONG_BINGET
                append(memo[_unpack_I(buf, pos)[0]])
                pos += 4
            elif code == 0x94:  # MEMOIZE
                self._memoize(len(memo), stack[-1])
            elif code == 0x28:  # MARK
                self.marks.append(len(stack))
            elif code == 0x4B:  # BININT1
                append(buf[pos])
                pos += 1
            elif code == 0x4A:  # BININT
                append(_unpack_i(buf, pos)[0])
                pos += 4
            elif code == 0x4D:  # BININT2
                append(_unpack_H(buf, pos)[0])
                pos += 2
            elif code == 0x7D:  # EMPTY_DICT
                append({})
            elif code == 0x5D:  # EMPTY_LIST
                append([])
            elif code == 0x75:  # SETITEMS
                items = self._pop_mark()
                self._setitems(stack[-1], items)
            elif code == 0x65:  # APPENDS
                items = self._pop_mark()
                self._append(stack[-1], items)
            elif code == 0x8A or code == 0x8C:  # LONG1, SHORT_BINUNICODE: a one-byte length, then the value
                n = buf[pos]
                pos += 1
                if pos + n <= len(buf):
                    raw = buf[pos:pos + n]
                    pos += n
                else:
                    self.pos = pos
                    raw = self._take(n)
                    buf, pos = self.buf, self.pos
                    end = len(buf) - 16
                append(int.from_bytes(raw, "little", signed=True) if code == 0x8A
                       else str(raw, "utf-8", "surrogatepass"))
            elif code == 0x2E:  # STOP
                if len(stack) != 1 or self.marks:
                    raise NotPlainData("not a valid pickle (its STOP leaves no single value)", refused=False)
                return stack.pop()
            else:
                self.pos = pos
                self._other(bytes((code,)))
                buf, pos = self.buf, self.pos
                end = len(buf) - 16

    def _other(self, code: bytes) -> None:  # noqa: C901 - the rest of the opcodes, one branch each
        stack = self.stack
        name = _NAMES.get(code)
        if name is None:
            found = _refused_name(code)
            if not found:
                raise NotPlainData(f"not a valid pickle (an unknown opcode {code!r})", refused=False)
            raise NotPlainData(f"it holds the pickle opcode {found}{self._naming(found)}, which imports or calls "
                               "code; only plain data is read")
        if name == "PROTO":
            if self._take(1)[0] > 5:
                raise NotPlainData("not a valid pickle (a protocol past 5)", refused=False)
        elif name == "FRAME":
            self._take(8)  # frames only group opcodes for the reader's benefit: read straight through them
        elif name == "NONE":
            stack.append(None)
        elif name in ("NEWTRUE", "NEWFALSE"):
            stack.append(name == "NEWTRUE")
        elif name == "BINUNICODE":
            stack.append(str(self._take(_unpack_I(self._take(4))[0]), "utf-8", "surrogatepass"))
        elif name == "BINUNICODE8":
            stack.append(str(self._take(_unpack_Q(self._take(8))[0]), "utf-8", "surrogatepass"))
        elif name in ("SHORT_BINBYTES", "BINBYTES", "BINBYTES8"):
            size = {"SHORT_BINBYTES": 1, "BINBYTES": 4, "BINBYTES8": 8}[name]
            stack.append(bytes(self._take(int.from_bytes(self._take(size), "little"))))
        elif name in ("SHORT_BINSTRING", "BINSTRING"):  # Python 2 str: read as the standard unpickler does (ASCII)
            size = 1 if name == "SHORT_BINSTRING" else 4
            length = int.from_bytes(self._take(size), "little", signed=size == 4)
            if length < 0:
                raise ValueError("a string of negative length")
            stack.append(self._take(length).decode("ascii"))
        elif name == "LONG4":
            length = _unpack_i(self._take(4))[0]
            if length < 0:
                raise ValueError("an integer of negative length")
            stack.append(int.from_bytes(self._take(length), "little", signed=True))
        elif name == "BINFLOAT":
            stack.append(_unpack_d(self._take(8))[0])
        elif name in ("BINPUT", "LONG_BINPUT"):
            index = self._take(1)[0] if name == "BINPUT" else _unpack_I(self._take(4))[0]
            self._memoize(index, stack[-1])
        elif name in ("EMPTY_TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"):
            n = {"EMPTY_TUPLE": 0, "TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}[name]
            items = stack[len(stack) - n:] if n else []
            if len(items) != n:
                raise IndexError("a tuple of more items than the stack holds")
            del stack[len(stack) - n:]
            stack.append(tuple(items))
        elif name in ("TUPLE", "LIST", "FROZENSET"):
            items = self._pop_mark()
            stack.append(tuple(items) if name == "TUPLE" else frozenset(items) if name == "FROZENSET" else [])
            if name == "LIST":
                self._append(stack[-1], items)
        elif name == "DICT":
            items = self._pop_mark()
            stack.append({})
            self._setitems(stack[-1], items)
        elif name == "EMPTY_SET":
            stack.append(set())
        elif name == "ADDITEMS":
            items = self._pop_mark()
            stack[-1].update(items)
        elif name == "APPEND":
            item = stack.pop()
            self._append(stack[-1], [item])
        elif name == "SETITEM":
            value = stack.pop()
            key = stack.pop()
            self._setitems(stack[-1], [key, value])
        elif name == "POP":
            if self.marks and self.marks[-1] == len(stack):
                self.marks.pop()
            else:
                stack.pop()
        elif name == "POP_MARK":
            self._pop_mark()
        elif name == "DUP":
            stack.append(stack[-1])
        else:
            self._text(name)

    def _naming(self, opcode: str) -> str:
        """What a GLOBAL or STACK_GLOBAL names (" os.system"), read as text only, for the refusal's line."""
        if opcode == "GLOBAL":
            try:
                return " " + ".".join(self._line().decode("ascii", "replace")[:80] for _ in range(2))
            except NotPlainData:
                return ""
        names = self.stack[-2:]
        if opcode == "STACK_GLOBAL" and len(names) == 2 and all(isinstance(n, str) for n in names):
            return " " + ".".join(n[:80] for n in names)
        return ""

    def _text(self, name: str) -> None:
        """Protocol 0's opcodes, whose argument is a line of text."""
        line = self._line()
        stack = self.stack
        if name == "INT":
            stack.append(line == b"01" if line in (b"00", b"01") else int(line))
        elif name == "LONG":
            stack.append(int(line[:-1] if line.endswith(b"L") else line))
        elif name == "FLOAT":
            stack.append(float(line))
        elif name == "STRING":
            if len(line) < 2 or line[0] != line[-1] or line[:1] not in (b'"', b"'"):
                raise ValueError("a STRING opcode without quotes")
            stack.append(codecs.escape_decode(line[1:-1])[0].decode("ascii"))
        elif name == "UNICODE":
            stack.append(str(line, "raw-unicode-escape"))
        elif name == "GET":
            stack.append(self.memo[int(line)])
        elif name == "PUT":
            self._memoize(int(line), stack[-1])


def _refused_name(code: bytes) -> str:
    """The name of an opcode that is not plain data ("GLOBAL", "REDUCE" ...), or "" for no opcode at all."""
    import pickletools

    for op in pickletools.opcodes:
        if op.code.encode("latin-1") == code:
            return op.name
    return ""

