"""AgentDojo's suites, loaded without the model SDKs its package imports, and our table of them.

``agentdojo`` (PyPI, pinned in the Makefile's ``AGENTDOJO`` line) declares langchain, openai,
anthropic, cohere and google-genai as dependencies: about 300 MB and three minutes of install,
all for its own agent pipelines, which we never run. ``make`` installs it with ``--no-deps`` plus
the few packages its suites import (``AGENTDOJO_DEPS``). Only one thing stands in the way: the
package ``agentdojo.agent_pipeline``'s ``__init__`` imports every model client, and the task
suites import two plain modules from inside it (the ground-truth pipeline and the tool-result
formatter). ``_without_model_clients`` registers that package (and ``llms``) as bare packages so
their modules import without the ``__init__``, and stands in for the one constant the formatter
takes from the Google client. Everything else is AgentDojo's own code: suites, environments,
tools, injection vectors, the ``important_instructions`` attack and the checkers.

The table (``ANNOTATIONS``) says how each suite's tools are annotated in MCP: which only read
(``readOnlyHint``), which change the environment in a way that cannot be undone (``destructiveHint``)
and which return text written by someone other than the user (``openWorldHint``: e-mails, files,
reviews, messages, web pages). ``tests/agentdojo/test_bridge.py`` checks it against AgentDojo: every
read-only tool leaves the environment equal, and every tool whose result carries an injection
vector in a ground-truth run is open-world.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from dataclasses import dataclass
from functools import cache
from typing import Any

VERSION = "v1.2.2"
"""The benchmark version AgentDojo's own ``benchmark`` script runs by default."""
SUITES = ("workspace", "banking", "travel", "slack")
ATTACK = "important_instructions"
TARGET_MODEL = "gpt-4o-2024-05-13"
"""Whose name the attack text addresses (``GPT-4``): the attack needs one; AgentDojo's default."""
MISSING = (
    "AgentDojo is not installed in this Python ({python}): run `make agentdojo` "
    "(it installs agentdojo --no-deps and the few packages its suites need)"
)


def _without_model_clients() -> None:
    """Let ``agentdojo.agent_pipeline``'s plain modules import without its ``__init__``."""
    if "agentdojo.agent_pipeline" in sys.modules:
        return
    spec = importlib.util.find_spec("agentdojo")
    if spec is None or spec.origin is None:
        raise SystemExit(MISSING.format(python=sys.executable))
    root = os.path.dirname(spec.origin)
    for name in ("agentdojo.agent_pipeline", "agentdojo.agent_pipeline.llms"):
        package = types.ModuleType(name)
        package.__path__ = [os.path.join(root, *name.split(".")[1:])]
        sys.modules[name] = package
    google = types.ModuleType("agentdojo.agent_pipeline.llms.google_llm")
    google.EMPTY_FUNCTION_NAME = "<empty-function-name>"  # type: ignore[attr-defined]
    sys.modules[google.__name__] = google


@cache
def load_suite(name: str) -> Any:
    """AgentDojo's ``TaskSuite`` called ``name`` (one of ``SUITES``)."""
    if name not in SUITES:
        raise SystemExit(f"unknown AgentDojo suite {name!r}: choose from {', '.join(SUITES)}")
    _without_model_clients()
    from agentdojo.task_suite.load_suites import get_suite

    return get_suite(VERSION, name)


def render(result: Any) -> str:
    """A tool's result as AgentDojo shows it to a model (its default YAML formatter)."""
    _without_model_clients()
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str

    return str(tool_result_to_str(result))


class _Target:
    """What the attack reads of the pipeline it attacks: its name (for the model's name)."""

    name = TARGET_MODEL


@cache
def attack(suite_name: str) -> Any:
    """AgentDojo's ``important_instructions`` attack on ``suite_name``."""
    suite = load_suite(suite_name)
    from agentdojo.attacks.attack_registry import load_attack

    return load_attack(ATTACK, suite, _Target())


def injections(suite_name: str, user_task: Any, injection_task: Any) -> dict[str, str]:
    """The injection vector values the attack fills in for this pair of tasks."""
    return dict(attack(suite_name).attack(user_task, injection_task))


@dataclass(frozen=True)
class Table:
    read_only: frozenset[str]
    """Tools that only read the environment."""
    not_destructive: frozenset[str]
    """Tools that write, but only in a way that loses nothing (mark as read, log a visit)."""
    open_world: frozenset[str]
    """Tools whose result carries text written by someone other than the user."""

    def hints(self, tool: str) -> dict[str, bool]:
        read_only = tool in self.read_only
        return {
            "readOnlyHint": read_only,
            "destructiveHint": not read_only and tool not in self.not_destructive,
            "openWorldHint": tool in self.open_world,
        }


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


ANNOTATIONS: dict[str, Table] = {
    "workspace": Table(
        read_only=_names(
            """get_sent_emails get_received_emails get_draft_emails search_emails
            search_contacts_by_name search_contacts_by_email get_current_day search_calendar_events
            get_day_calendar_events search_files_by_filename get_file_by_id list_files search_files"""
        ),
        # it returns the unread e-mails and marks them read
        not_destructive=_names("get_unread_emails"),
        open_world=_names(
            """get_unread_emails get_sent_emails get_received_emails get_draft_emails search_emails
            search_calendar_events get_day_calendar_events search_files_by_filename get_file_by_id
            list_files search_files append_to_file delete_file share_file add_calendar_event_participants
            reschedule_calendar_event"""
        ),
    ),
    "banking": Table(
        read_only=_names(
            "get_iban get_balance get_most_recent_transactions get_scheduled_transactions read_file get_user_info"
        ),
        not_destructive=frozenset(),
        open_world=_names("get_most_recent_transactions get_scheduled_transactions read_file"),
    ),
    "travel": Table(
        read_only=_names(
            """get_user_information get_all_hotels_in_city get_hotels_prices get_rating_reviews_for_hotels
            get_hotels_address get_all_restaurants_in_city get_cuisine_type_for_restaurants
            get_restaurants_address get_rating_reviews_for_restaurants
            get_dietary_restrictions_for_all_restaurants get_contact_information_for_restaurants
            get_price_for_restaurants check_restaurant_opening_hours get_all_car_rental_companies_in_city
            get_car_types_available get_rating_reviews_for_car_rental get_car_fuel_options
            get_car_rental_address get_car_price_per_day search_calendar_events get_day_calendar_events
            get_flight_information"""
        ),
        not_destructive=frozenset(),
        open_world=_names(
            """get_rating_reviews_for_hotels get_rating_reviews_for_restaurants
            get_rating_reviews_for_car_rental"""
        ),
    ),
    "slack": Table(
        read_only=_names("get_channels read_channel_messages read_inbox get_users_in_channel"),
        # a visit is logged in the environment (and sends whatever the URL carries out)
        not_destructive=_names("get_webpage"),
        open_world=_names("get_channels read_channel_messages read_inbox get_webpage"),
    ),
}
