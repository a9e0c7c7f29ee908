"""HTTP plumbing shared by the model calls (``providers/``) and the tool calls (``tools/``), below
both: ``lean.py``, a lean HTTP/1.1 transport for either flavour of httpx (``httpx`` for the model
servers, ``httpx2`` for the MCP SDK's clients). It imports nothing of ``mcp_agent``."""
