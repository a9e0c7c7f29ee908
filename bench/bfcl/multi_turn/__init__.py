"""BFCL's multi-turn categories replayed through the gateway's ``agent_query`` sessions.

BFCL v4 (``bfcl-eval``, installed ``--no-deps`` by ``make test``) ships four multi-turn categories
of 200 entries each (``multi_turn_base``, ``multi_turn_miss_func``, ``multi_turn_miss_param``,
``multi_turn_long_context``): conversations over stateful Python APIs (a file system, a message
service, ticketing, trading, travel, vehicle control, a calculator), judged by the APIs' state
after each turn. Modules:

- ``data``: the entries, their ground truth, and each API class's functions as MCP tools;
- ``server``: one MCP stdio server per API class over a live instance of it, driven between
  turns through a control socket the model never sees;
- ``control``: that control socket's protocol (both sides);
- ``model``: the scripted model that makes a turn's ground-truth calls, one per round;
- ``judge``: BFCL's own checkers applied to what reached the servers;
- ``replay``: the harness (``run_multi_turn``); ``python -m bench.bfcl.multi_turn`` prints its JSON.
"""
