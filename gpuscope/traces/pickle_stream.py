"""Plain-data unpickling from a stream, in bounded memory: a pickle machine of its own that knows only the opcodes
that build plain data (``plain_data.PLAIN_OPCODES``), so nothing a pickle names is imported or called.

CPython's C unpickler (``plain_data.PlainUnpickler``) is five to ten times faster, and builds every object the
pickle holds at once: a PyTorch memory snapshot of several GB would become many times that in Python objects. Here
the machine reads the stream in chunks and lets a ``Reducer`` replace each item as it is put into its container (an
item is complete by then: a pickler writes a child whole before the opcode that adds it), so a caller can fold a
trace entry into columns, or a stack frame into an interned id, the moment it is read. The memo slot of a replaced
container is replaced too (a later reference gets the replacement), or emptied when the item is dropped.

Its budgets: a memo index may not pass the bytes read so far (a pickler numbers its memo from 0, one slot per
opcode), so the memo holds at most one slot per byte; a text line is scanned once, however long; a length past the
stream's known size is refused before anything is read for it.
"""

from __future__ import annotations

import codecs
import struct
from typing import IO, Any, Final, Protocol

from gpuscope.traces.plain_data import CUT_SHORT, PLAIN_OPCODES, BudgetSpent, NotPlainData, refusal

CHUNK_BYTES = 1 << 20
DROP: Final = object()
"""What a reducer returns for an item that is to be left out of its container (and of the memo)."""


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
    b"\x94": "MEMOIZE", b"\x95": "FRAME", b"\x96": "BYTEARRAY8",
}
assert set(_NAMES.values()) == PLAIN_OPCODES  # one list of what is plain data, kept by plain_data
_ARG_BYTES = {0x68: 1, 0x6A: 4, 0x4B: 1, 0x4A: 4, 0x4D: 2, 0x8A: 1, 0x8C: 1}
"""The fixed-size arguments ``run`` reads straight from its buffer: BINGET, LONG_BINGET, BININT1, BININT, BININT2,
and the length byte of LONG1 and SHORT_BINUNICODE."""


def load_stream(f: IO[bytes], *, reduce: Reducer | None = None, size_bytes: int | None = None) -> Any:
    """The plain data the pickle in ``f`` holds, items passed through ``reduce`` as they are added to their
    containers; ``NotPlainData`` (one line) for anything else, refused before any of it could run. ``size_bytes``:
    the stream's length, where known (a value said to be longer is refused before it is read)."""
    machine = _Machine(f, reduce, size_bytes)
    try:
        return machine.run()
    except NotPlainData:
        raise
    except (IndexError, struct.error) as exc:  # an argument past the end, or an empty stack
        if machine.cut_in_argument():
            raise NotPlainData(CUT_SHORT, refused=False) from None
        raise NotPlainData(f"not a valid pickle ({type(exc).__name__}: {exc})", refused=False) from None
    except (KeyError, ValueError, TypeError, AttributeError, UnicodeDecodeError, OverflowError, MemoryError,
            RecursionError) as exc:  # damaged: a bad memo index, a number that is not one ...
        raise NotPlainData(f"not a valid pickle ({type(exc).__name__}: {str(exc)[:200]})", refused=False) from None


class _Machine:
    def __init__(self, f: IO[bytes], reduce: Reducer | None, size_bytes: int | None) -> None:
        self.f = f
        self.size_bytes = size_bytes
        self.at_end = False
        """The stream has no more bytes than ``buf`` holds."""
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
                self.at_end = True
                break
            parts.append(chunk)
            have += len(chunk)
        self.buf = b"".join(parts)
        self.pos = 0

    def cut_in_argument(self) -> bool:
        """At the stream's end, the opcode at ``pos`` lacks its fixed-size argument (``run`` keeps ``pos`` at the
        opcode in its last 16 bytes)."""
        left = len(self.buf) - self.pos
        return self.at_end and left < 16 and (left <= 0 or 1 + _ARG_BYTES.get(self.buf[self.pos], 0) > left)

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            if self.size_bytes is not None and self.offset + self.pos + n > self.size_bytes:
                raise NotPlainData(CUT_SHORT, refused=False)
            self._fill(n)
            if n > len(self.buf):
                raise NotPlainData(CUT_SHORT, refused=False)
        start = self.pos
        self.pos = start + n
        return self.buf[start:self.pos]

    def _line(self) -> bytes:
        scanned = self.pos
        while True:
            end = self.buf.find(b"\n", scanned)
            if end >= 0:
                line = self.buf[self.pos:end]
                self.pos = end + 1
                return line
            before = len(self.buf) - self.pos
            self._fill(2 * before + CHUNK_BYTES)  # doubling: a long line is copied a few times, not once a chunk
            if len(self.buf) == before:
                raise NotPlainData("not a valid pickle (a text value without its end of line: cut short?)",
                                   refused=False)
            scanned = before

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
        elif index <= self.offset + self.pos:
            memo.extend([None] * (index - len(memo)))
            memo.append(value)
        else:
            raise BudgetSpent(f"a memo index of {index:,} after {self.offset + self.pos:,} bytes: past the "
                              "reader's limit of one memo slot per byte read (a damaged or hostile pickle)")
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
        dropped: set[int] = set()
        for item in items:
            if id(item) in dropped:  # an item dropped and referred to again in the same batch: dropped (a later
                continue  # batch finds its memo slot emptied)
            new = reduce(target, None, item)
            if new is not item:
                self._replaced(item, new)
            if new is DROP:
                dropped.add(id(item))
            else:
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
                    raise NotPlainData(CUT_SHORT, refused=False)
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
            raise refusal(found, self._naming(found))
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
        elif name in ("SHORT_BINBYTES", "BINBYTES", "BINBYTES8", "BYTEARRAY8"):
            size = {"SHORT_BINBYTES": 1, "BINBYTES": 4, "BINBYTES8": 8, "BYTEARRAY8": 8}[name]
            raw = self._take(int.from_bytes(self._take(size), "little"))
            stack.append(bytearray(raw) if name == "BYTEARRAY8" else bytes(raw))
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
        """What a GLOBAL, INST or STACK_GLOBAL names ("os.system"), read as text only, for the refusal's line."""
        if opcode in ("GLOBAL", "INST"):
            try:
                return ".".join(self._line().decode("ascii", "replace")[:80] for _ in range(2))
            except NotPlainData:
                return ""
        names = self.stack[-2:]
        if opcode == "STACK_GLOBAL" and len(names) == 2 and all(isinstance(n, str) for n in names):
            return ".".join(n[:80] for n in names)
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

