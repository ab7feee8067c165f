"""Secrets kept out of everything gpuscope shows, logs, raises, stores or serves: one set of rules for URLs, free
text (a library's error message) and command lines, used by every layer.

What counts as a secret:

- in a URL, its user and password (``https://alice:pw@host``, ``s3://KEY:SECRET@bucket``: shown as ``***@``) and the
  value of each query or fragment parameter whose name is a secret's (below): ``?token=``, ``access_token``,
  ``key=``, ``sig=`` (Azure SAS), ``X-Amz-Signature``, ``X-Amz-Credential``, ``X-Amz-Security-Token``,
  ``X-Goog-Signature`` (shown as ``name=***``);
- in any text, every URL as above, a ``user:password@`` without a scheme, ``name=value`` where the name is a
  secret's, ``Bearer``/``Basic`` credentials, and the value of each environment variable whose name is a secret's
  (8 characters or more), wherever it is quoted;
- on a command line, besides all that: ``NAME=value`` words (``PASSWORD=x cmd``, ``--token=x``,
  ``db.password=x``) and the word after an option named like a secret (``--password x``, ``-token x``) when
  that word does not start with ``-``; ``Name: value`` words for secret headers (``Authorization: ...``);
  and single-letter options only where the program fixes their meaning (``PROGRAM_SECRETS``).

A name is a secret's when its last word (split at ``-``, ``_``, ``.`` and between a lower- and an upper-case
letter) is one of ``SECRET_WORDS`` or ends with one of ``SECRET_ENDINGS``: ``--password``, ``api_key``,
``AWS_SECRET_ACCESS_KEY``, ``HF_TOKEN``, ``PGPASSWORD``, ``AccountKey`` and ``X-Amz-Signature`` are;
``--password-file``, ``AWS_ACCESS_KEY_ID``, ``--keyfile`` and ``--session-name`` are not (they name where a secret
is, or an identity). More is hidden rather than less: a value is masked whenever its name could be a secret's.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence

MASK = "***"
SECRET_WORDS = frozenset({
    "password", "passwd", "pass", "passphrase", "secret", "token", "auth", "authorization", "credential",
    "credentials", "sig", "signature", "key", "apikey", "cookie", "sas", "bearer", "jwt", "otp",
})
"""Last words of a name that holds a secret."""
SECRET_ENDINGS = ("password", "passwd", "secret", "token", "apikey", "signature", "accesskey", "privatekey")
"""Endings of a last word that make it a secret's (``PGPASSWORD``, ``accesstoken``, ``sastoken``)."""
PROGRAM_SECRETS: Mapping[str, tuple[frozenset[str], frozenset[str]]] = {
    # program: (options whose next word is a secret, options whose glued value is a secret)
    "sshpass": (frozenset({"-p"}), frozenset({"-p"})),
    "mysql": (frozenset(), frozenset({"-p"})),  # ``-p`` alone prompts: the next word is a database
    "mysqldump": (frozenset(), frozenset({"-p"})),
    "mysqladmin": (frozenset(), frozenset({"-p"})),
    "mariadb": (frozenset(), frozenset({"-p"})),
    "redis-cli": (frozenset({"-a"}), frozenset({"-a"})),
    "curl": (frozenset({"-u", "--user", "-U", "--proxy-user"}), frozenset({"-u", "-U"})),
}
"""Single-letter options whose meaning only the program fixes (``-p`` is a port to ssh, a password to sshpass)."""

_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s\"'<>`]*[^\s\"'<>`.,:;!?)\]}]")
"""A URL in text; punctuation that ends it (``...?token=abc: no answer``, ``(see http://h/x).``) is the text's,
so the separator after a masked value stays where it is."""
_USERINFO = re.compile(r"(?<![\w/:@.%-])[^\s/@:\"'=`<>()\[\]{}]+:[^\s/@\"'`<>]+@(?=[\w\[])")
"""``user:password@host`` without a scheme (what a library quotes back of ``s3://KEY:SECRET@bucket``)."""
_PAIR = re.compile(r"(?<![\w.-])([A-Za-z][\w.-]*)=([^\s&;,\"'`]*[^\s&;,\"'`.:!?)\]}])")
_SCHEME_AUTH = re.compile(r"(?i)\b(bearer|basic|token|digest)(\s+)[A-Za-z0-9._~+/=-]{6,}")
_ASSIGNMENT = re.compile(r"^(-{0,2})([A-Za-z_][\w.-]*)=(.*)$", re.DOTALL)
_OPTION = re.compile(r"^--?([A-Za-z][\w.-]*)$")
_HEADER = re.compile(r"^([A-Za-z][\w-]*):\s*(\S.*)$", re.DOTALL)
_SPACE = re.compile(r"(\s+)")
_MIN_ENV_SECRET = 8
"""Shorter environment values are not looked for in text: a 3-letter value would mask every word holding it."""


def secret_name(name: str) -> bool:
    """Whether a query parameter, option, variable or header of this name holds a secret (the module's rule)."""
    words = [w.lower() for w in _WORD_SPLIT.split(name) if w]
    if not words:
        return False
    last = words[-1]
    if last == "string" and len(words) > 1 and words[-2] == "connection":
        return True  # AZURE_STORAGE_CONNECTION_STRING: AccountKey=... inside
    return last in SECRET_WORDS or last.endswith(SECRET_ENDINGS)


def about(where: str, message: str) -> str:
    """A message about an endpoint: ``where`` (its URL as it may be shown, or words around it), a colon, and what
    happened. Every message that names a URL and then says something of it is joined here, so the two always read
    apart (``redact_text`` leaves the colon after a masked query value where it is)."""
    return f"{where}: {message}"


def redact_url(url: str) -> str:
    """``url`` as it may be shown or kept: ``user:password@`` (or a user alone) becomes ``***@``, and the value of
    each query or fragment parameter named like a secret becomes ``***``. Unchanged when it holds neither; ``***``
    when it cannot be parsed and may hold a user."""
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port
    except ValueError:
        return MASK if "@" in url or "?" in url else url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@" + netloc.rpartition("@")[2]
    query, fragment = _masked_params(parts.query), _masked_params(parts.fragment)
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query, fragment=fragment))


def bare_url(url: str) -> str:
    """A URL without its user, password, query or fragment: how a trace file read by URL is named (the query of a
    signed URL changes with each signing; the file is the same)."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return MASK
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _masked_params(text: str) -> str:
    if "=" not in text:
        return text
    pairs = urllib.parse.parse_qsl(text, keep_blank_values=True)
    if not any(secret_name(name) for name, _ in pairs):
        return text
    return urllib.parse.urlencode([(n, MASK if secret_name(n) else v) for n, v in pairs], safe="*")


def redact_text(text: str, *, env: Mapping[str, str] | None = None) -> str:
    """Any text (a message, a library's exception, a log line) with every secret the module knows of masked:
    URLs' credentials and secret parameters, ``user:password@``, ``name=value`` pairs of secret names,
    ``Bearer``/``Basic`` credentials, and the environment's secret values (``env``, default ``os.environ``)."""
    text = _URL.sub(lambda m: redact_url(m.group()), text)
    text = _USERINFO.sub(f"{MASK}@", text)
    text = _PAIR.sub(lambda m: f"{m.group(1)}={MASK}" if secret_name(m.group(1)) else m.group(), text)
    text = _SCHEME_AUTH.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    return _without_environment_secrets(text, os.environ if env is None else env)


def _without_environment_secrets(text: str, env: Mapping[str, str]) -> str:
    for value in sorted(environment_secrets(env), key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    return text


def environment_secrets(env: Mapping[str, str]) -> Iterable[str]:
    """The values of the environment's variables named like secrets, long enough to look for."""
    return (v for k, v in env.items() if len(v) >= _MIN_ENV_SECRET and secret_name(k))


def redact_command(words: Sequence[str], *, env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """A command line's words as they may be stored or shown (the module's rules for command lines); a word holding
    spaces (``bash -c '...'``) has the same rules applied to its own words."""
    return tuple(_redact_words(list(words), os.environ if env is None else env))


def _redact_words(words: list[str], env: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    program = ""
    secret_next = False
    for i, word in enumerate(words):
        if secret_next and not word.startswith("-"):
            out.append(MASK + word[len(word.rstrip(";&|)")):])  # ``--password x;`` keeps its ``;``
            secret_next = False
            continue
        base = word.rsplit("/", 1)[-1]
        if base in PROGRAM_SECRETS:
            program = base
        shown, secret_next = _redact_word(word, program, env)
        out.append(shown)
        if secret_next and i + 1 < len(words) and words[i + 1].startswith("-"):
            secret_next = False
    return out


def _redact_word(word: str, program: str, env: Mapping[str, str]) -> tuple[str, bool]:
    """One word as shown, and whether the next word is a secret (the value of a secret option)."""
    separate, glued = PROGRAM_SECRETS.get(program, (frozenset(), frozenset()))
    if word in separate:
        return word, True
    if len(word) > 2 and word[:2] in glued and not word.startswith("--"):
        return word[:2] + MASK, False
    assignment = _ASSIGNMENT.match(word)
    if assignment is not None:
        dashes, name, value = assignment.groups()
        if not dashes and _SPACE.search(value.strip()):
            return _redact_value(word, env), False  # a shell line that starts with VAR=value
        return f"{dashes}{name}={MASK if secret_name(name) else _redact_value(value, env)}", False
    option = _OPTION.match(word)
    if option is not None:
        return word, secret_name(option.group(1))
    return _redact_value(word, env), False


def _redact_value(value: str, env: Mapping[str, str]) -> str:
    """A word or an option's value: a secret header line (``Cookie: id=...``) as ``Name: ***``, a shell line
    (words with spaces) word by word, anything else as text."""
    header = _HEADER.match(value)
    if header is not None and "//" not in value and secret_name(header.group(1)):
        return f"{header.group(1)}: {MASK}"
    if _SPACE.search(value.strip()):
        parts = _SPACE.split(value)
        tokens = _redact_words(parts[0::2], env)
        return "".join(t + (parts[2 * j + 1] if 2 * j + 1 < len(parts) else "") for j, t in enumerate(tokens))
    return redact_text(value, env=env)
