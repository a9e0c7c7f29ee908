"""Pure-ASGI middleware of the gateway, one class per module.

Outermost first, as ``app.py`` stacks them: ``DrainMiddleware`` (tracks requests, ends them at
shutdown), ``HostOriginMiddleware`` (421/403), ``CORSMiddleware`` (only allowed origins),
``BearerAuthMiddleware`` (401), ``BodyLimitMiddleware`` (413).
"""

from __future__ import annotations

from .auth import BearerAuthMiddleware
from .body import BodyLimitMiddleware
from .cors import CORSMiddleware
from .drain import DrainMiddleware
from .hosts import HostOriginMiddleware

__all__ = [
    "BearerAuthMiddleware",
    "BodyLimitMiddleware",
    "CORSMiddleware",
    "DrainMiddleware",
    "HostOriginMiddleware",
]
