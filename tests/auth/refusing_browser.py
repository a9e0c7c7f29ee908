"""A browser whose person says no: ``refusing_browser.py URL`` sends the authorization request's
``redirect_uri`` an ``access_denied`` error, as an authorization server does when a person
refuses (RFC 6749 §4.1.2.1)."""

from __future__ import annotations

import sys
import urllib.request
from urllib.parse import parse_qs, urlencode, urlsplit

if __name__ == "__main__":
    query = {key: values[0] for key, values in parse_qs(urlsplit(sys.argv[1]).query).items()}
    answer = {"error": "access_denied", "error_description": "no thanks", "state": query.get("state", "")}
    with urllib.request.urlopen(f"{query['redirect_uri']}?{urlencode(answer)}", timeout=30) as reply:
        reply.read()
