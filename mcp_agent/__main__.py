"""``python -m mcp_agent``: the same as the ``mcp-agent`` command."""

from __future__ import annotations

import sys

from .cli.main import main

sys.exit(main())
