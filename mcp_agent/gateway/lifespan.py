"""The service's lifetime: ``open_service`` recovers the state, starts the Agent in the
background, watches the model server, keeps the state's liveness lease, and at the end shuts the
service down in order (refuse new queries, cancel the running ones and wait for their results,
end the event streams, close the Agent, close the state if it opened it).

The model server is probed at start-up, then every ``PROBE_INTERVAL`` seconds and at once after
a model call fails (``watch_model_server``), so health stops saying it is reachable soon after it
died, and says so again once it is back.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from anyio.abc import TaskStatus

from .._plural import counted
from ..config import AgentConfig
from ..exceptions import StateError
from ..loop.agent import Agent
from ..state import open_agent_state
from ..state.base import State
from ..state.records import Recovery
from .service import AgentFactory, GatewayService

logger = logging.getLogger(__name__)

PROBE_INTERVAL = 30.0
"""Seconds between probes of the model server while nothing fails."""


async def probe_model_server(service: GatewayService, timeout: float = 5.0, *, quiet: bool = False) -> None:
    """Ask the model server for its models once, and say clearly what is wrong (``quiet``: log
    only a change of state, as the periodic probes do).

    The gateway serves either way (``agent_query`` then answers with the same error); this only
    makes the problem visible, in the log and in health (``service.model_server``).
    """
    before = service.model_server.get("reachable")
    found = await _probe(service, timeout)
    service.model_server = found
    if quiet and found.get("reachable") == before:
        return
    if found.get("reachable"):
        logger.log(
            logging.WARNING if found.get("error") else logging.INFO,
            "model server at %s is up%s",
            service.config.llm.endpoint,
            f"; {found['error']}" if found.get("error") else "",
        )
    else:
        logger.warning(
            "model server: %s (agent_query will answer with this error until it is up)", found["error"]
        )


async def watch_model_server(
    service: GatewayService, *, interval: float = PROBE_INTERVAL, timeout: float = 5.0
) -> None:
    """Probe the model server now, then every ``interval`` seconds and after each failed model
    call (``service.model_failures``), until cancelled. A burst of failures costs one probe."""
    quiet = False
    while True:
        service.model_failures.renew()
        await probe_model_server(service, timeout, quiet=quiet)
        quiet = True
        with anyio.move_on_after(interval):
            await service.model_failures.failed.wait()


async def _probe(service: GatewayService, timeout: float) -> dict[str, object]:
    """What one probe finds: ``{"reachable", "model_present", "error"}``."""
    from ..exceptions import MCPAgentError
    from ..providers.factory import build_client
    from ..providers.servers.identify import list_models, model_present

    llm = service.config.llm
    try:
        async with build_client(llm) as client:
            with anyio.fail_after(timeout):
                models = await list_models(llm, client)
    except TimeoutError:
        error = f"the model server at {llm.endpoint} did not answer within {timeout:g} s"
        return {"reachable": False, "model_present": None, "error": error}
    except MCPAgentError as exc:
        return {"reachable": False, "model_present": None, "error": str(exc)}
    present = model_present(llm.model, models) if models else None
    missing: str | None = None
    if present is False:
        missing = f"model {llm.model!r} is not offered by the server (it has: {', '.join(models[:10])})"
    return {"reachable": True, "model_present": present, "error": missing}


def default_factory(state: State) -> Callable[[AgentConfig], AbstractAsyncContextManager[Agent]]:
    """The real Agent's factory, keeping its state in ``state``."""
    from ..assembly import open_agent

    def factory(config: AgentConfig) -> Any:  # gateway.recordDir: each run recorded (loop/recording.py)
        record_dir = config.gateway.record_dir
        if not record_dir:
            return open_agent(config, state=state, hold_starts=True)
        folder = config.base_dir / record_dir
        return open_agent(
            config, state=state, hold_starts=True, record=lambda run_id: folder / f"{run_id}.jsonl"
        )

    return factory


async def keep_state(service: GatewayService, state: State) -> None:
    """Renew this gateway's liveness lease (``State.beat``) every third of ``lease_seconds`` and
    recover what other replicas that died left behind, until cancelled.

    Never ends the service: a failing store (``StateError``; anything else a backend raises is
    logged as the bug it is and counted the same) is shown in health (``service.store``) and
    tried again at the next beat, which also says when it works again. A store failing for
    longer than ``state.maxOutageSeconds`` makes the gateway give up (``service.give_up``): the
    process exits non-zero, for its supervisor to restart it.
    """
    store = service.store
    while True:
        await anyio.sleep(state.limits.lease_seconds / 3)
        try:
            await state.beat()
            report(await state.recover())
        except Exception as exc:
            if not isinstance(exc, StateError):
                logger.exception("state: the heartbeat failed")
            said = store.error
            if store.failed(exc):
                logger.error(
                    "state store failing: %s (health says so; tried again every %.3g s, for up to %s)",
                    exc,
                    state.limits.lease_seconds / 3,
                    f"{store.max_outage:g} s (state.maxOutageSeconds)" if store.max_outage else "ever",
                )
            elif store.error != said:
                logger.warning("state store still failing: %s", exc)
        else:
            down = store.worked()
            if down is not None:
                logger.warning("state store works again (it failed for %.1f s)", down)
        if store.outage_over():
            service.give_up(
                f"the state store has failed for {store.failing_for():.0f} s "
                f"(state.maxOutageSeconds is {store.max_outage:g}): {store.error}"
            )
            return


def share_events(service: GatewayService, state: State, tasks: anyio.abc.TaskGroup) -> None:
    """With a shared state backend (Redis: its ``events``, a ``SharedEvents``), this replica's
    run events go to the other replicas and theirs come into ``service.bus``, so that
    ``/api/v1/events`` on any replica shows the runs of all (decoded only while someone listens)."""
    shared = state.events
    if shared is None:
        return
    service.shared_events = shared
    tasks.start_soon(functools.partial(shared.relay, service.bus, wanted=lambda: service.bus.listeners > 0))


def report(found: Recovery) -> None:
    if found.runs or found.approvals or found.locks:
        logger.warning(
            "state: a gateway restart interrupted %s (recorded as terminal_error); %s of theirs "
            "expired, %s released",
            counted(found.runs, "run"),
            counted(found.approvals, "pending approval"),
            counted(found.locks, "conversation lock"),
        )


@asynccontextmanager
async def open_service(
    service: GatewayService,
    factory: AgentFactory | None = None,
    *,
    state: State | None = None,
    background: bool = True,
    stop_timeout: float = 5.0,
) -> AsyncIterator[GatewayService]:
    """Start the service's Agent (in the background unless ``background`` is False); yield the service.

    The state (``state``, else what ``state.url`` names, else memory; opened here and closed at
    the end) is recovered first: runs that died with an earlier gateway are recorded as
    interrupted and their approvals expired. Then its lease is kept (``keep_state``).
    In the background, the service answers ``starting`` until the Agent (its tool servers) is
    up. On exit: refuse new queries, cancel running ones (waiting up to ``stop_timeout`` for
    their ``cancelled`` results), end the event streams, then close the Agent.

    Raises:
        ConfigError: the state cannot be opened (naming ``state.url``).
    """
    async with AsyncExitStack() as stack:
        if state is None:
            state = await open_agent_state(service.config, default=None)
            stack.push_async_callback(state.aclose)
        service.state_store = state
        report(await state.recover())
        async with _run_service(service, factory, state, background=background, stop_timeout=stop_timeout):
            yield service


@asynccontextmanager
async def _run_service(
    service: GatewayService,
    factory: AgentFactory | None,
    state: State,
    *,
    background: bool,
    stop_timeout: float,
) -> AsyncIterator[GatewayService]:
    config = service.config
    probe = factory is None  # the real model server: check it at start-up
    build = default_factory(state) if factory is None else functools.partial(factory, state=state)
    stop = anyio.Event()
    notifier = anyio.CancelScope()

    async def notify() -> None:
        with notifier:
            async with anyio.create_task_group() as loops:
                loops.start_soon(service.tool_changes.deliver)
                loops.start_soon(service.catalog_changes.deliver)

    async def own_agent(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        started = False
        if background:
            task_status.started()
            started = True
        try:
            async with build(config) as agent:
                service.attach(agent)
                if not started:
                    task_status.started()
                    started = True
                await stop.wait()
                logger.info("closing the agent and its tool servers")
        except Exception as exc:
            if service.state == "stopping":
                logger.exception("closing the agent failed")
            else:
                logger.exception("the agent failed to start")
                service.fail(f"{type(exc).__name__}: {exc}")
            if not started:
                task_status.started()

    async with anyio.create_task_group() as tg, anyio.create_task_group() as spawned:
        service._tasks = spawned
        tg.start_soon(notify)
        spawned.start_soon(keep_state, service, state)
        share_events(service, state, spawned)
        if probe:
            spawned.start_soon(watch_model_server, service)
        await tg.start(own_agent)
        service.now_serving()  # the lifespan is done: the transport accepts requests from now on
        try:
            yield service
        finally:
            with anyio.CancelScope(shield=True):
                running = service.begin_shutdown()
                if running:
                    logger.info("cancelling %d running queries", running)
                    await service.wait_idle(stop_timeout)
            service._tasks = None
            spawned.cancel_scope.cancel()  # what outlives requests (their runs were told to stop above)
            service.bus.close()
            stop.set()
            notifier.cancel()
