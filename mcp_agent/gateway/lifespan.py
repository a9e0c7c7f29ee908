"""The service's lifetime: ``open_service`` starts the Agent in the background, probes the model
server once, and at the end shuts the service down in order (refuse new queries, cancel the
running ones and wait for their results, end the event streams, close the Agent).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.abc import TaskStatus

from .service import AgentFactory, GatewayService

logger = logging.getLogger(__name__)


async def probe_model_server(service: GatewayService, timeout: float = 5.0) -> None:
    """Ask the model server for its models once, and say clearly at start-up what is wrong.

    The gateway serves either way (``agent_query`` then answers with the same error); this only
    makes the problem visible at once, in the log and in health.
    """
    from ..exceptions import MCPAgentError
    from ..providers.factory import build_client
    from ..providers.models import list_models, model_present

    llm = service.config.llm
    try:
        async with build_client(llm) as client:
            with anyio.fail_after(timeout):
                models = await list_models(llm, client)
    except TimeoutError:
        error = f"the model server at {llm.endpoint} did not answer within {timeout:g} s"
        service.model_server = {"reachable": False, "model_present": None, "error": error}
        logger.warning("model server: %s", error)
        return
    except MCPAgentError as exc:
        service.model_server = {"reachable": False, "model_present": None, "error": str(exc)}
        logger.warning("model server: %s (agent_query will answer with this error until it is up)", exc)
        return
    present = model_present(llm.model, models) if models else None
    missing: str | None = None
    if present is False:
        missing = f"model {llm.model!r} is not offered by the server (it has: {', '.join(models[:10])})"
        logger.warning("model server: %s", missing)
    else:
        logger.info("model server at %s is up; model %r %s", llm.endpoint, llm.model,
                    "is available" if present else "could not be confirmed")
    service.model_server = {"reachable": True, "model_present": present, "error": missing}


def default_factory() -> AgentFactory:
    """The real Agent's factory (imported late: the gateway only needs the seam)."""
    from ..loop.agent import Agent

    return Agent.from_config  # type: ignore[return-value]


@asynccontextmanager
async def open_service(
    service: GatewayService,
    factory: AgentFactory | None = None,
    *,
    background: bool = True,
    stop_timeout: float = 5.0,
) -> AsyncIterator[GatewayService]:
    """Start the service's Agent (in the background unless ``background`` is False); yield the service.

    In the background, the service answers ``starting`` until the Agent (its tool servers) is
    up. On exit: refuse new queries, cancel running ones (waiting up to ``stop_timeout`` for
    their ``cancelled`` results), end the event streams, then close the Agent.
    """
    config = service.config
    probe = factory is None  # the real model server: check it at start-up
    factory = factory or default_factory()
    stop = anyio.Event()
    notifier = anyio.CancelScope()

    async def notify() -> None:
        with notifier:
            async with anyio.create_task_group() as loops:
                loops.start_soon(service._notify_loop)
                loops.start_soon(service._catalog_loop)

    async def own_agent(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        started = False
        if background:
            task_status.started()
            started = True
        try:
            async with factory(config) as agent:
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
        if probe:
            tg.start_soon(probe_model_server, service)
        await tg.start(own_agent)
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
