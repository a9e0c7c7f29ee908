"""The checked-in list of multi-turn entries BFCL's own data makes fail (``known.KNOWN``): exactly
what a scan of BFCL's data finds, and through the gateway those entries fail for that reason."""

from __future__ import annotations

import re

from bench.bfcl.multi_turn.known import KNOWN, scan
from bench.bfcl.multi_turn.replay import run_multi_turn


def test_the_known_list_is_what_bfcls_data_holds() -> None:
    found = scan()
    assert sorted(found) == sorted(KNOWN)
    for name, problems in found.items():
        assert len(problems) == 1, (name, problems)
        function = re.match(r"turn \d+: (\w+)\(", problems[0])
        assert function is not None and function.group(1) in KNOWN[name], (name, problems)


def test_through_the_gateway_the_known_entries_fail_for_their_reason() -> None:
    result = run_multi_turn(
        ["multi_turn_base", "multi_turn_miss_func"], ids=["multi_turn_base_173", "multi_turn_miss_func_49"]
    )
    (ticket,) = result["categories"]["multi_turn_base"]["failed"]
    assert ticket["known"] == KNOWN["multi_turn_base_173"]
    assert ticket["why"].startswith("live: turn 3: no call reached a server")
    (tail,) = result["categories"]["multi_turn_miss_func"]["failed"]
    assert tail["known"] == KNOWN["multi_turn_miss_func_49"]
    assert "turn 1: multi_turn:execution_response_mismatch" in tail["why"]
    assert result["unexplained"] == [] and result["known_that_passed"] == []
