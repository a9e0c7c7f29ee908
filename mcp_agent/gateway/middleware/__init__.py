"""Pure-ASGI middleware of the gateway, one class per module.

Outermost first, as ``app.py`` stacks them: ``DrainMiddleware`` (tracks requests, ends them at
shutdown), ``SecretsMiddleware`` (known secret values masked in every response), ``HostOriginMiddleware`` (421/403), ``CORSMiddleware`` (only allowed origins),
``CallerAuthMiddleware`` (401, 403), ``BodyLimitMiddleware`` (413).
"""

from __future__ import annotations

from .auth import CallerAuthMiddleware, caller_of
from .body import BodyLimitMiddleware
from .cors import CORSMiddleware
from .drain import DrainMiddleware
from .hosts import HostOriginMiddleware

__all__ = [
    "BodyLimitMiddleware",
    "CORSMiddleware",
    "CallerAuthMiddleware",
    "DrainMiddleware",
    "HostOriginMiddleware",
    "caller_of",
]
