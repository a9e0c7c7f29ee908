"""The gateway's MCP face: what a client sees over SSE, Streamable HTTP and stdio.

``server.py`` is the tool server (``agent_query``, and the inner tools with ``exposeTools``);
``query.py`` one ``agent_query`` call with its progress; ``ask_caller.py`` approvals asked of
the caller; ``passthrough.py`` and ``catalog.py`` the inner tools, resources and prompts passed
on; ``sessions.py`` the cap on open sessions; ``resumable.py`` resumable streams and gone
clients; ``stdio.py`` the stdio streams; ``quiet_logs.py`` the SDK's reports of bad clients.
"""
