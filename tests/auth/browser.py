"""A browser with no person in front of it, for ``$MCP_AGENT_BROWSER``: ``browser.py URL``.

It GETs the authorization URL and follows the redirects (the fixture's authorization server
approves at once and sends it back to ``mcp-agent login``'s loopback receiver). With
``$BROWSER_LOG`` set, it appends the URL it was given to that file.
"""

from __future__ import annotations

import os
import sys
import urllib.request

if __name__ == "__main__":
    url = sys.argv[1]
    if log := os.environ.get("BROWSER_LOG"):
        with open(log, "a", encoding="utf-8") as file:
            file.write(url + "\n")
    with urllib.request.urlopen(url, timeout=30) as answer:
        answer.read()
