"""Secrets out of what the gateway shows: the secret values it knows, credentials in URLs, keys and
tokens in free text.

Two kinds of masking:

- **Known values** (exact, no guessing). ``remember_secrets`` adds values this process holds as
  secrets: ``secrets_in_config`` finds them in agent.json as loaded (API keys, tokens, secret-named
  ``env`` and ``headers`` values, passwords in URLs, ``${VAR}`` values substituted from
  secret-named variables or into a server's ``env``/``headers``), ``secrets_in_environ`` in the
  environment (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``...). ``parse_config``
  remembers both. ``mask_secrets`` (text) and ``mask_secret_bytes`` (a response body) replace every
  known value, also as it appears inside JSON strings or URL-encoded, with ``***``. Every place
  where text leaves the process applies it: the log formatters (``telemetry/logs.py``), the CLI's stdout
  and stderr, the gateway's HTTP responses and event streams (``SecretsMiddleware`` in ``gateway/middleware.py``),
  the stdio transport (``gateway/serve.py``), and the messages of provider and tool-server errors.
  Values shorter than ``MIN_SECRET_CHARS`` are not remembered: masking a short word everywhere
  would garble every output, and a key that short protects nothing. Nor are the stand-in keys
  local servers' docs suggest (``ollama``, ``lm-studio``: ``PLACEHOLDERS``).
- **Shapes** (heuristic, for text that may hold secrets nobody told us about). ``redact_url``
  hides a URL's user and password and the values of query parameters whose names say they are
  secret (``key``, ``api_key``, ``token``, ``sig``...). ``redact_text`` masks the known values,
  then does the same for every URL inside a text, and hides bearer tokens and strings shaped like
  well-known API keys (``sk-...``, ``ghp_...``, ``xoxb-...``, ``AIza...``) and ``secret=value``
  pairs. Used for logs, health details and error messages that may echo an endpoint, a command
  line or a server's stderr.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

TYPE_CHECKING = False  # not typing's: the CLI imports this module before it parses its arguments
if TYPE_CHECKING:
    from typing import Any

MASK = "***"
_SECRET_NAME = re.compile(
    r"(?i)(^|[_\-.])(key|apikey|api[_\-]?key|token|secret|password|passwd|pwd|auth|authorization|"
    r"sig|signature|credential|credentials|session|sessionid|access[_\-]?token|client[_\-]?secret)$"
)
_URL = re.compile(r"""\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s'"<>`]+""")
_PAIR = re.compile(
    r"(?i)\b([\w.\-]*(?:key|token|secret|password|passwd|pwd|credential))(\s*[=:]\s*)([^\s,;'\"&]+)"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=\-]{8,}")
_KEY_SHAPES = re.compile(
    r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}|AIza[0-9A-Za-z_\-]{30,}|AKIA[0-9A-Z]{16}|hf_[A-Za-z0-9]{20,}"
    r"|gsk_[A-Za-z0-9]{20,})"
)


def is_secret_name(name: str) -> bool:
    """Whether a parameter or variable named ``name`` holds a secret (``api_key``, ``X-Token``...)."""
    return bool(_SECRET_NAME.search(name.strip()))


def redact_url(url: str) -> str:
    """``url`` with its user info and the values of secret-named query parameters masked, the rest
    exactly as written: nothing hidden, the URL as given (``urlunsplit`` would turn
    ``sqlite:////tmp/state.db`` into ``sqlite://tmp/state.db``, another file)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(is_secret_name(name) for name, _ in pairs):
                query = urlencode(
                    [(name, MASK if is_secret_name(name) else value) for name, value in pairs], safe="*"
                )
    except ValueError:  # not parseable as a URL: mask it whole rather than risk a leak
        return MASK
    if netloc == parts.netloc and query == parts.query:
        return url
    head = f"{parts.scheme}:" if parts.scheme else ""
    if url[len(head) :].startswith("//"):
        head += f"//{netloc}"
    return (
        head + parts.path + (f"?{query}" if query else "") + (f"#{parts.fragment}" if parts.fragment else "")
    )


def redact_text(text: str) -> str:
    """``text`` with the known secrets masked (``mask_secrets``), URLs redacted (``redact_url``),
    bearer tokens, API-key shapes and ``secret=value`` pairs masked."""
    text = mask_secrets(text)
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _KEY_SHAPES.sub(MASK, text)
    return _PAIR.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)


# --------------------------------------------------------------------------------------------
# known values

MIN_SECRET_CHARS = 6
"""Shorter values are not remembered as secrets (see the module docstring)."""
PLACEHOLDERS = frozenset(
    {
        "ollama",
        "lm-studio",
        "lmstudio",
        "not-needed",
        "no-key",
        "sk-no-key-required",
        "not-used",
        "placeholder",
    }
)
"""Stand-ins that local servers' docs tell people to put where a key goes (Ollama, LM Studio,
llama.cpp): no secret, and masking "ollama" would garble every hint that names Ollama."""
_SCHEMES = ("bearer ", "basic ", "token ")
"""An ``Authorization`` value's scheme: the credential after it is a secret of its own."""
_ENV_SECRET = re.compile(
    r"(?i)(^|_)(api_?key|key|token|secret|password|passwd|credentials?|access_?key|private_?key)$"
)
"""Names of environment variables whose values are secrets (stricter than ``is_secret_name``:
``DESKTOP_SESSION`` or ``SSH_AUTH_SOCK`` are not)."""


class KnownSecrets:
    """The secret values this process holds, and one compiled pattern that finds any of them.

    Thread-safe: values are only ever added (``clear`` is for tests), and each change swaps in
    new patterns, which readers use without a lock.
    """

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()
        self._text: re.Pattern[str] | None = None
        self._bytes: re.Pattern[bytes] | None = None

    def __len__(self) -> int:
        return len(self._values)

    def add(self, values: Iterable[str]) -> None:
        """Remember ``values`` (and, for ``Bearer X``, ``X``); short ones and ``PLACEHOLDERS`` are skipped."""
        new = set()
        for value in values:
            if not isinstance(value, str):
                continue
            value = value.strip()
            new.add(value)
            if value.lower().startswith(_SCHEMES):
                new.add(value.split(None, 1)[1].strip())
        with self._lock:
            before = len(self._values)
            self._values |= {
                value for value in new if len(value) >= MIN_SECRET_CHARS and value.lower() not in PLACEHOLDERS
            }
            if len(self._values) != before:
                self._compile()

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._compile()

    def _compile(self) -> None:
        forms: set[str] = set()
        for value in self._values:
            forms.add(value)
            forms.add(json.dumps(value)[1:-1])  # as it appears inside a JSON string
            forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
            forms.add(quote(value, safe=""))  # URL-encoded (a query parameter, a form)
        ordered = sorted(forms, key=len, reverse=True)  # the longest form wins where two overlap
        if not ordered:
            self._text, self._bytes = None, None
            return
        self._text = re.compile("|".join(map(re.escape, ordered)))
        self._bytes = re.compile(b"|".join(re.escape(form.encode()) for form in ordered))

    def mask(self, text: str) -> str:
        pattern = self._text
        return text if pattern is None or not text else pattern.sub(MASK, text)

    def mask_bytes(self, data: bytes) -> bytes:
        pattern = self._bytes
        return data if pattern is None or not data else pattern.sub(MASK.encode(), data)


SECRETS = KnownSecrets()
"""The process's known secrets (``remember_secrets`` adds to them)."""


def remember_secrets(values: Iterable[str]) -> None:
    """Mask ``values`` from now on wherever text leaves the process."""
    SECRETS.add(values)


def mask_secrets(text: str) -> str:
    """``text`` with every known secret value replaced by ``***``."""
    return SECRETS.mask(text)


def mask_secret_bytes(data: bytes) -> bytes:
    """``mask_secrets`` for UTF-8 bytes (a response body or a chunk of one)."""
    return SECRETS.mask_bytes(data)


def mask_secrets_in(value: Any) -> Any:
    """``mask_secrets`` over every string (keys too) of parsed JSON: a copy when anything changed."""
    if not len(SECRETS):
        return value
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, Mapping):
        return {mask_secrets_in(k): mask_secrets_in(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_secrets_in(item) for item in value]
    return value


def is_secret_key(name: str) -> bool:
    """Whether a config key or header named ``name`` holds a secret: ``apiKey``, ``authToken``,
    ``Authorization``, ``X-Api-Key``, ``GITHUB_TOKEN``, ``Cookie``..."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.strip())
    return is_secret_name(snake) or snake.lower() in {"cookie", "set-cookie", "proxy-authorization"}


def secrets_in_url(text: str) -> set[str]:
    """The password (or lone user token) and secret-named query values of every URL in ``text``;
    for a password, also the ``user:password`` credential HTTP Basic sends (base64), which a
    server may quote back."""
    found: set[str] = set()
    for match in _URL.finditer(text):
        try:
            parts = urlsplit(match.group(0))
            if parts.password:
                found.add(parts.password)
                userinfo = f"{unquote(parts.username or '')}:{unquote(parts.password)}"
                found.add(base64.b64encode(userinfo.encode()).decode())  # as HTTP Basic sends it
            elif "@" in parts.netloc and parts.username:
                found.add(parts.username)  # https://TOKEN@host: the token is the user
            found |= {value for name, value in parse_qsl(parts.query) if is_secret_name(name)}
        except ValueError:
            continue
    return found


def secrets_in_config(data: Any, substituted: Iterable[tuple[str, str, str]] = ()) -> set[str]:
    """The secret values in a config as parsed JSON, after ``${VAR}`` expansion.

    Args:
        data: the config (any JSON: the walk needs no model, so new keys are covered).
        substituted: ``(path, variable, value)`` of each ``${VAR}`` expansion.

    A string is a secret when its key is secret-named (``is_secret_key``), when it follows a
    secret-named flag in a list (``["--api-key", "X"]``, ``"--token=X"``), when it is the password
    of a URL, or when it came from ``${VAR}`` with ``VAR`` secret-named or into an ``env`` or
    ``headers`` object.
    """
    found: set[str] = set()

    def walk(value: Any, key: str | None) -> None:
        if isinstance(value, str):
            if key is not None and is_secret_key(key):
                found.add(value)
            if "://" in value:
                found.update(secrets_in_url(value))
        elif isinstance(value, Mapping):
            for name, item in value.items():
                walk(item, str(name))
        elif isinstance(value, list):
            flag: str | None = None
            for item in value:
                if isinstance(item, str) and item.startswith("-"):
                    name, eq, given = item.lstrip("-").partition("=")
                    if eq and is_secret_key(name):
                        found.add(given)
                    flag = name if not eq else None
                    walk(item, None)
                    continue
                walk(item, flag)
                flag = None

    walk(data, None)
    for path, variable, value in substituted:
        if is_secret_name(variable) or _ENV_SECRET.search(variable) or re.search(r"\.(env|headers)\.", path):
            found.add(value)
    return found


def secrets_in_environ(environ: Mapping[str, str]) -> set[str]:
    """The values of environment variables named like secrets (``OPENAI_API_KEY``, ``HF_TOKEN``...)."""
    return {value for name, value in environ.items() if _ENV_SECRET.search(name)}
