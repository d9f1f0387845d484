"""Bearer tokens (``Authorization: Bearer <token>``): only their SHA-256 is stored.

Scopes: ``read``, ``write`` (includes read) and ``admin`` (includes write: retention and other
platform configuration, /admin/…). Every state-changing endpoint depends on :data:`WriteToken`,
every /admin endpoint on :data:`AdminToken`; reads of stored data depend on :data:`ReadToken`,
which asks for a token only when MEASUREDB_API_REQUIRE_TOKEN_FOR_READS=true (a token that is
sent is always checked). Tokens are made by ``measuredb token create NAME --scope read|write|admin``.

Reads never write for anonymous callers. The live reads that ask the running collector
(MEASREADACTIVE ``/active/…``, MEASSTATUS ``/measurements/{id}/status``) go over the control
request bus: each inserts a row into _measure.control_request and holds a connection until the
collector answers. They depend on :data:`CollectorToken`: a read token always, whatever
MEASUREDB_API_REQUIRE_TOKEN_FOR_READS says. What stays open to anonymous callers is rate
limited per client address (api/ratelimit.py).

Reads remember a token's scope for a minute (api/cache.py :class:`TokenCache`; a revocation
is seen at once); writes ask the database every time.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import text

from api.cache import SYNCED_KEY
from api.db import SessionDep
from api.errors import Forbidden, Unauthorized
from core import tokens

bearer = HTTPBearer(auto_error=False, description="a token from `measuredb token create`")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def _scope(session: SessionDep, credentials: HTTPAuthorizationCredentials | None) -> str | None:
    if credentials is None:
        return None
    scope = session.execute(text("SELECT measure.token_scope(:h)"),
                            {"h": tokens.digest(credentials.credentials)}).scalar()
    if scope is None:
        raise Unauthorized("the bearer token is unknown or revoked", field="Authorization")
    return scope


def require_write(session: SessionDep, credentials: Credentials) -> str:
    scope = _scope(session, credentials)
    if scope is None:
        raise Unauthorized("this endpoint changes state: send Authorization: Bearer <token> "
                           "with a write token (measuredb token create NAME --scope write)",
                           field="Authorization")
    if scope not in ("write", "admin"):
        raise Forbidden("this endpoint changes state and needs a write token; this one is "
                        f"{scope}-only", field="Authorization")
    return scope


def require_admin(session: SessionDep, credentials: Credentials) -> str:
    scope = _scope(session, credentials)
    if scope is None:
        raise Unauthorized("this endpoint configures the platform: send Authorization: Bearer <token> "
                           "with an admin token (measuredb token create NAME --scope admin)",
                           field="Authorization")
    if scope != "admin":
        raise Forbidden(f"this endpoint configures the platform and needs an admin token; this one is "
                        f"{scope}", field="Authorization")
    return scope


async def require_read(request: Request, session: SessionDep, credentials: Credentials) -> str | None:
    if credentials is None:
        if request.app.state.settings.require_token_for_reads:
            raise Unauthorized("reads need a token on this server: send Authorization: Bearer "
                               "<token> (measuredb token create NAME --scope read)",
                               field="Authorization")
        return None
    cache = getattr(request.app.state, "read_cache", None)
    if cache is None or not getattr(request.state, SYNCED_KEY, False):
        return await run_in_threadpool(_scope, session, credentials)
    # the cache middleware synced with the database's notifications for this request: a
    # token revoked before the request arrived is no longer in the token cache
    sha = tokens.digest(credentials.credentials)
    scope = cache.tokens.get(sha)
    if scope is None:
        generation = cache.tokens.generation
        scope = await run_in_threadpool(_scope, session, credentials)
        cache.tokens.put(sha, scope, generation)
    return scope


def require_token(session: SessionDep, credentials: Credentials) -> str:
    scope = _scope(session, credentials)
    if scope is None:
        raise Unauthorized("this read asks the running collector (a control request): send "
                           "Authorization: Bearer <token> with a read token (measuredb token "
                           "create NAME --scope read)", field="Authorization")
    return scope


WriteToken = Annotated[str, Depends(require_write)]
AdminToken = Annotated[str, Depends(require_admin)]
ReadToken = Annotated[str | None, Depends(require_read)]
CollectorToken = Annotated[str, Depends(require_token)]
