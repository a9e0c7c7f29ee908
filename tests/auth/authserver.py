"""The login flow of the tests' ``Issuer``, run by authlib's OAuth 2 core on Starlette.

authlib ships server integrations for Flask and Django only; its core is framework-neutral, and
this module is the small adapter (requests in, responses out) plus the storage it asks for:
clients from dynamic registration (RFC 7591), authorization codes with their PKCE challenge
(RFC 7636, required), scopes cut to what the user may have (``Issuer.scope``), and JWT access tokens (RFC 9068) signed with the issuer's key, for the
issuer's audience. ``/authorize`` approves at once for ``Issuer.user``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from authlib.oauth2 import AuthorizationServer, OAuth2Error
from authlib.oauth2.rfc6749 import AuthorizationCodeMixin, ClientMixin, JsonRequest, OAuth2Request
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload, JsonPayload
from authlib.oauth2.rfc7591 import ClientMetadataClaims, ClientRegistrationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from .issuer import Issuer


class FormRequest(OAuth2Request):
    def __init__(self, request: Request, form: dict[str, str]) -> None:
        super().__init__(method=request.method, uri=str(request.url), headers=request.headers)
        self._args = dict(request.query_params)
        self._form = form
        self.payload = BasicOAuth2Payload({**self._args, **form})

    @property
    def args(self) -> dict[str, str]:
        return self._args

    @property
    def form(self) -> dict[str, str]:
        return self._form


class BodyPayload(JsonPayload):
    def __init__(self, data: Any) -> None:
        self._data = data

    @property
    def data(self) -> Any:
        return self._data


@dataclass
class Client(ClientMixin):  # type: ignore[misc]
    client_id: str
    client_secret: str
    metadata: dict[str, Any]
    allowed: str
    """The scopes its user may have: a request for more gets only these."""

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str:
        return str(self.metadata["redirect_uris"][0])

    def get_allowed_scope(self, scope: str) -> str:
        allowed = self.allowed.split()
        return " ".join(name for name in (scope or self.allowed).split() if name in allowed)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.metadata.get("redirect_uris", [])

    def check_client_secret(self, client_secret: str) -> bool:
        return bool(self.client_secret) and client_secret == self.client_secret

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return endpoint != "token" or method == self.metadata.get(
            "token_endpoint_auth_method", "client_secret_basic"
        )

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code"

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in ("authorization_code", "refresh_token")


@dataclass
class Code(AuthorizationCodeMixin):  # type: ignore[misc]
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    user: str
    code_challenge: str | None
    code_challenge_method: str | None

    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


@dataclass
class User:
    name: str

    def get_user_id(self) -> str:
        return self.name


@dataclass
class Store:
    clients: dict[str, Client] = field(default_factory=dict)
    codes: dict[str, Code] = field(default_factory=dict)


def flow_routes(issuer: Issuer) -> list[Route]:
    """``/authorize``, ``/token`` and ``/register`` of ``issuer`` (module docstring)."""
    store = Store()

    class Server(AuthorizationServer):  # type: ignore[misc]
        def query_client(self, client_id: str) -> Client | None:
            return store.clients.get(client_id)

        def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
            pass

        def create_oauth2_request(self, request: Any) -> Any:
            return request

        def create_json_request(self, request: Any) -> Any:
            return request

        def handle_response(self, status: int, body: Any, headers: list[tuple[str, str]]) -> Response:
            found = dict(headers)
            if "Location" in found:
                return RedirectResponse(found["Location"], status_code=status)
            return JSONResponse(body, status_code=status, headers={"Cache-Control": "no-store"})

        def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
            pass

    class Grant(AuthorizationCodeGrant):  # type: ignore[misc]
        TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = [
            "client_secret_basic",
            "client_secret_post",
            "none",
        ]

        def save_authorization_code(self, code: str, request: OAuth2Request) -> None:
            data = request.payload.data
            store.codes[code] = Code(
                code,
                request.client.get_client_id(),
                data.get("redirect_uri", ""),
                request.scope or "",
                request.user.name,
                data.get("code_challenge"),
                data.get("code_challenge_method"),
            )

        def query_authorization_code(self, code: str, client: Client) -> Code | None:
            found = store.codes.get(code)
            return found if found is not None and found.client_id == client.client_id else None

        def delete_authorization_code(self, authorization_code: Code) -> None:
            store.codes.pop(authorization_code.code, None)

        def authenticate_user(self, authorization_code: Code) -> User:
            return User(authorization_code.user)

    class Tokens(JWTBearerTokenGenerator):  # type: ignore[misc]
        def get_jwks(self) -> Any:
            return issuer.signing

        def get_audiences(self, client: Client, user: User, scope: str) -> str:
            return issuer.audience

    class Registration(ClientRegistrationEndpoint):  # type: ignore[misc]
        def authenticate_token(self, request: Any) -> bool:
            return True  # open registration

        def get_server_metadata(self) -> dict[str, Any]:
            return issuer.metadata()

        def save_client(
            self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: Any
        ) -> Client:
            client = Client(
                client_info["client_id"], client_info["client_secret"], client_metadata, issuer.scope
            )
            store.clients[client.client_id] = client
            return client

    server = Server()
    server.register_grant(Grant, [CodeChallenge(required=True)])
    server.register_endpoint(Registration(claims_classes=[ClientMetadataClaims]))
    tokens: Tokens | None = None

    def generator() -> Tokens:
        nonlocal tokens
        if tokens is None:  # the issuer's URL is known once it serves
            tokens = Tokens(issuer.url)
            server.register_token_generator("default", tokens)
        return tokens

    async def authorize(request: Request) -> Response:
        generator()
        issuer.resources_asked.append(request.query_params.get("resource", ""))
        oauth = FormRequest(request, {})
        user = User(issuer.user)
        try:
            grant = server.get_consent_grant(oauth, end_user=user)
        except OAuth2Error as error:
            return JSONResponse(
                {"error": error.error, "error_description": error.description}, status_code=400
            )
        response: Response = server.create_authorization_response(oauth, grant_user=user, grant=grant)
        return response

    async def token(request: Request) -> Response:
        generator()
        form = {key: str(value) for key, value in (await request.form()).items()}
        issuer.resources_asked.append(form.get("resource", ""))
        response: Response = server.create_token_response(FormRequest(request, form))
        return response

    async def register(request: Request) -> Response:
        body = JsonRequest(request.method, str(request.url), request.headers)
        body.payload = BodyPayload(json.loads(await request.body()))
        response: Response = server.create_endpoint_response("client_registration", body)
        return response

    return [
        Route("/authorize", authorize, methods=["GET"]),
        Route("/token", token, methods=["POST"]),
        Route("/register", register, methods=["POST"]),
    ]
