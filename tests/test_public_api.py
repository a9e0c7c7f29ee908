"""The public API is exactly what __all__ says, sorted, and every name resolves."""

import mcp_agent


def test_all_is_sorted_and_unique():
    assert mcp_agent.__all__ == sorted(set(mcp_agent.__all__))


def test_all_matches_the_exports():
    exported = {
        name
        for name, value in vars(mcp_agent).items()
        if not name.startswith("_") and not isinstance(value, type(mcp_agent))
        and name != "annotations"
    }
    assert exported == set(mcp_agent.__all__)


def test_every_name_resolves():
    for name in mcp_agent.__all__:
        assert getattr(mcp_agent, name) is not None
