"""Secrets out of what the gateway shows: credentials in URLs, keys and tokens in free text (pure).

``redact_url`` hides a URL's user and password and the values of query parameters whose names
say they are secret (``key``, ``api_key``, ``token``, ``sig``...). ``redact_text`` does the same
for every URL inside a text, and hides bearer tokens and strings shaped like well-known API keys
(``sk-...``, ``ghp_...``, ``xoxb-...``, ``AIza...``) and ``secret=value`` pairs. Used for health
details, error messages and logs that may echo an endpoint, a command line or a server's stderr.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

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
    """``url`` with its user info and the values of secret-named query parameters masked."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode(
                [(name, MASK if is_secret_name(name) else value) for name, value in pairs], safe="*"
            )
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:  # not parseable as a URL: mask it whole rather than risk a leak
        return MASK


def redact_text(text: str) -> str:
    """``text`` with URLs redacted (``redact_url``), bearer tokens, API-key shapes and
    ``secret=value`` pairs masked."""
    text = _URL.sub(lambda m: redact_url(m.group(0)), text)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _KEY_SHAPES.sub(MASK, text)
    return _PAIR.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
