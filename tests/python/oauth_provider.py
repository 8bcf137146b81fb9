"""A real OAuth 2.1 authorization server for tests, built on Authlib: dynamic client registration
(RFC 7591), the authorization code grant with PKCE S256 required (RFC 7636), refresh tokens and
client credentials, resource indicators (RFC 8707), RFC 9068 JWT access tokens signed RS256,
introspection (RFC 7662), revocation (RFC 7009) and its metadata (RFC 8414, also served as
`/.well-known/openid-configuration`). It listens on 127.0.0.1 only, keeps everything in memory,
and has test controls under `/test/` that no real identity provider would have: it is a
loopback test provider, never to be exposed.

    python tests/python/oauth_provider.py URL_FILE [--introspection-credentials PATH]

It binds a free loopback port, writes its base URL (`http://127.0.0.1:PORT`, also its issuer)
to URL_FILE once it is serving, and serves until SIGTERM. With `--introspection-credentials` it
writes `cem-resource-server:SECRET` (mode 0600) there first: the pre-registered confidential
client a resource server authenticates as (HTTP Basic) to `/introspect`, and which may revoke
any token at `/revoke`.

Users (the password is `pw-` + the name; `sub` is `user-` + the name): alice (tenant team-a,
groups eng, staff), amy (team-a; eng), bob (team-b; ops), nobody (no tenant), stranger (tenant
no-such-team). `/authorize` shows a login form; a GET with `username` and `password` added to its
query signs in at once and answers the 302 to the redirect URI. Access tokens carry iss, sub, aud
(the `resource` of the grant, else the client id), exp (1 hour), iat, nbf, jti, client_id,
scope (default `mcp:run`), and the user's tenant, groups and `realm_access.roles`.

Test controls (JSON bodies):
    POST /test/mint {"claims": {...}, "kid"?, "alg"?: "RS256"|"none"|"HS256-with-public-key",
                     "opaque"?: bool, "typ"?: str|null}
        -> {"token": ...}. A JWT of exactly these claims; typ defaults to "at+jwt" (null: none).
        RS256 signs with the key `kid` names if the provider has it (even one dropped from the
        JWKS), else with the current key, putting `kid` (default: the current kid) in the
        header. "none" is unsigned; "HS256-with-public-key" is HMAC-SHA256 keyed with the PEM
        (SubjectPublicKeyInfo) of that RSA public key. With "opaque", a random opaque token that
        /introspect answers active with these claims until it is revoked or its `exp` passes.
    POST /test/jwks-mode {"mode"?: "normal"|"slow"|"garbage"|"huge"|"down",
                          "metadata"?: "normal"|"down"}
        How /jwks answers from then on (slow: after 30 s; garbage: 200, not JSON; huge: 200,
        a valid JWKS padded past 5 MiB; down: 503), and whether the metadata answers 503.
    POST /test/rotate {"drop_old"?: bool} -> {"kid": NEW}: a new signing key.
    GET /test/stats -> {"jwks_requests", "metadata_requests", "introspection_requests"}.
"""

import argparse
import base64
import hashlib
import hmac
import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from authlib.common.security import generate_token
from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc6749 import ClientMixin, InvalidGrantError, InvalidRequestError, grants
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7591 import ClientMetadataClaims, ClientRegistrationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oauth2.rfc7662 import IntrospectionEndpoint
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator
from flask import Flask, Response, g, jsonify, request
from joserfc import jwt
from joserfc.errors import InvalidClaimError
from joserfc.jwk import KeySet, RSAKey
from markupsafe import escape
from werkzeug.serving import make_server

SCOPES = ["mcp:run", "mcp:read"]
DEFAULT_SCOPE = "mcp:run"
RESOURCE_SERVER = "cem-resource-server"
LOOPBACK = {"127.0.0.1", "localhost"}
JWKS_MODES = {"normal", "slow", "garbage", "huge", "down"}
USERS = {
    "alice": {"tenant": "team-a", "groups": ["eng", "staff"]},
    "amy": {"tenant": "team-a", "groups": ["eng"]},
    "bob": {"tenant": "team-b", "groups": ["ops"]},
    "nobody": {"groups": []},
    "stranger": {"tenant": "no-such-team", "groups": []},
}


@dataclass(frozen=True)
class User:
    name: str

    def get_user_id(self):
        return f"user-{self.name}"

    def claims(self):
        info = USERS[self.name]
        claims = {"groups": info["groups"], "realm_access": {"roles": info["groups"]}}
        if "tenant" in info:
            claims["tenant"] = info["tenant"]
        return claims


def sign_in(username, password):
    if username in USERS and hmac.compare_digest(password.encode(), f"pw-{username}".encode()):
        return User(username)
    return None


def same_redirect(uri, registered):
    """Exact match, or for a loopback URI the same but for the port (RFC 8252 section 7.3)."""
    a, b = urlsplit(uri), urlsplit(registered)
    return uri == registered or (a.hostname in LOOPBACK
                                 and a._replace(netloc=a.hostname) == b._replace(netloc=b.hostname))


@dataclass
class Client(ClientMixin):
    client_id: str
    client_secret: str | None
    metadata: dict

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return (self.metadata.get("redirect_uris") or [None])[0]

    def get_allowed_scope(self, scope):
        """What was asked (the server has checked it is among SCOPES), else the default: any
        client may ask for any scope, whatever it registered with."""
        return scope or DEFAULT_SCOPE

    def check_redirect_uri(self, redirect_uri):
        return any(same_redirect(redirect_uri, r) for r in self.metadata.get("redirect_uris", []))

    def check_client_secret(self, client_secret):
        return self.client_secret is not None and hmac.compare_digest(client_secret.encode(),
                                                                      self.client_secret.encode())

    def check_endpoint_auth_method(self, method, endpoint):
        if self.client_secret is None:
            return method == "none"
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type):
        return response_type in self.metadata.get("response_types", ["code"])

    def check_grant_type(self, grant_type):
        return grant_type in self.metadata.get("grant_types", ["authorization_code"])


@dataclass
class Issued:
    """An access token (a JWT this provider issued, or a minted opaque one) with what
    introspection reports of it, and the refresh token issued with it."""
    access_token: str
    claims: dict
    client_id: str | None
    refresh_token: str | None = None
    user: User | None = None
    resource: str | None = None
    access_revoked: bool = False
    refresh_revoked: bool = False

    def check_client(self, client):
        return client.client_id == self.client_id

    def get_scope(self):
        return self.claims.get("scope", "")

    def is_expired(self):
        exp = self.claims.get("exp")
        return isinstance(exp, (int, float)) and exp <= time.time()

    def is_revoked(self):
        return self.access_revoked


@dataclass
class Code:
    code: str
    client_id: str
    redirect_uri: str | None
    scope: str
    user: User
    code_challenge: str
    code_challenge_method: str
    resource: str | None
    expires_at: float = field(default_factory=lambda: time.time() + 600)

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope


class InvalidTargetError(OAuth2Error):
    error = "invalid_target"


def requested_resource(req):
    """The RFC 8707 `resource` of an OAuth request: one absolute URI without a fragment, or None."""
    values = req.payload.datalist.get("resource", [])
    if len(values) > 1:
        raise InvalidTargetError("One resource at most.")
    if not values:
        return None
    parts = urlsplit(values[0])
    if not (parts.scheme and parts.netloc) or parts.fragment:
        raise InvalidTargetError("The resource must be an absolute URI without a fragment.")
    return values[0]


def bind_resource(req, granted):
    """Fixes the audience of the token about to be issued: the resource asked for now, else the
    one granted earlier; they must agree."""
    asked = requested_resource(req)
    if asked and granted and asked != granted:
        raise InvalidTargetError("The resource differs from the one granted.")
    g.resource = asked or granted


class S256Required(CodeChallenge):
    """PKCE required of every client, with S256 only."""
    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def validate_code_challenge(self, grant, redirect_uri):
        data = grant.request.payload.data
        if not data.get("code_challenge") or data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("PKCE with code_challenge_method S256 is required.")
        super().validate_code_challenge(grant, redirect_uri)


def resource_indicator(grant):
    """Grant extension: the authorization request's `resource` is checked with the request."""
    grant.register_hook("after_validate_authorization_request_payload",
                        lambda grant, redirect_uri: requested_resource(grant.request))


class AuthorizationCodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

    def save_authorization_code(self, code, req):
        data = req.payload.data
        self.server.codes[code] = Code(code, req.client.client_id, req.payload.redirect_uri, req.scope, req.user,
                                       data["code_challenge"], data["code_challenge_method"],
                                       requested_resource(req))

    def query_authorization_code(self, code, client):
        found = self.server.codes.get(code)
        if found and found.client_id == client.client_id and found.expires_at > time.time():
            return found
        return None

    def delete_authorization_code(self, authorization_code):
        self.server.codes.pop(authorization_code.code, None)

    def authenticate_user(self, authorization_code):
        return authorization_code.user

    def validate_token_request(self):
        super().validate_token_request()
        bind_resource(self.request, self.request.authorization_code.resource)


class RefreshTokenGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    def authenticate_refresh_token(self, refresh_token):
        found = self.server.refresh_tokens.get(refresh_token)
        return found if found and not found.refresh_revoked else None

    def authenticate_user(self, refresh_token):
        return refresh_token.user

    def revoke_old_credential(self, refresh_token):
        refresh_token.refresh_revoked = True

    def validate_token_request(self):
        super().validate_token_request()
        bind_resource(self.request, self.request.refresh_token.resource)


class ClientCredentialsGrant(grants.ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]

    def validate_token_request(self):
        super().validate_token_request()
        bind_resource(self.request, None)


class LoopbackClientMetadata(ClientMetadataClaims):
    """Client metadata whose redirect URIs are http on the loopback host."""

    def validate_redirect_uris(self):
        super().validate_redirect_uris()
        for uri in self.get("redirect_uris") or []:
            parts = urlsplit(uri)
            if parts.scheme != "http" or parts.hostname not in LOOPBACK:
                raise InvalidClaimError("redirect_uris")


class Registration(ClientRegistrationEndpoint):
    """Open dynamic registration; public clients (`none`) get no secret."""

    def authenticate_token(self, req):
        return "open registration"

    def get_server_metadata(self):
        return self.server.metadata()

    def generate_client_info(self, req):
        info = super().generate_client_info(req)
        if req.payload.data.get("token_endpoint_auth_method") == "none":
            del info["client_secret"], info["client_secret_expires_at"]
        return info

    def save_client(self, client_info, client_metadata, req):
        client = Client(client_info["client_id"], client_info.get("client_secret"), client_metadata)
        self.server.clients[client.client_id] = client
        return client


class Introspection(IntrospectionEndpoint):
    """Any confidential client may introspect (HTTP Basic); refresh tokens are never active."""

    def query_token(self, token_string, token_type_hint):
        return self.server.access_tokens.get(token_string)

    def check_permission(self, token, client, req):
        return True

    def introspect_token(self, token):
        return {**token.claims, "active": True}


class Revocation(RevocationEndpoint):
    """Revokes the whole grant of an access or refresh token: by the client it was issued to, or
    by the resource server's client."""
    CLIENT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "none"]

    def query_token(self, token_string, token_type_hint):
        return self.server.access_tokens.get(token_string) or self.server.refresh_tokens.get(token_string)

    def authenticate_token(self, req, client):
        self.check_params(req, client)
        token = self.query_token(req.form["token"], None)
        if token and client.client_id not in (token.client_id, RESOURCE_SERVER):
            raise InvalidGrantError()
        return token

    def revoke_token(self, token, req):
        token.access_revoked = token.refresh_revoked = True


class Keys:
    """The RSA keys: every one made (by kid), those published in the JWKS, the signing one."""

    def __init__(self):
        self.made = {}
        self.published = []
        self.signing = None
        self.rotate(drop_old=False)

    def rotate(self, drop_old):
        key = RSAKey.generate_key(2048, private=True)
        key.ensure_kid()
        self.made[key.kid] = key
        self.published = [key.kid] if drop_old else [*self.published, key.kid]
        self.signing = key
        return key.kid

    def named(self, kid):
        return self.made.get(kid, self.signing)

    def jwks(self):
        return {"keys": [{**self.made[kid].as_dict(private=False), "use": "sig", "alg": "RS256"}
                         for kid in self.published]}


class AccessTokens(JWTBearerTokenGenerator):
    """RFC 9068 access tokens of 1 hour, with the user's claims and the bound resource."""

    def __init__(self, issuer, keys):
        super().__init__(issuer, refresh_token_generator=lambda **_: generate_token(48), expires_generator=3600)
        self.keys = keys

    def get_jwks(self):
        return KeySet([self.keys.signing])

    def get_audiences(self, client, user, scope):
        return g.get("resource") or client.get_client_id()

    def get_extra_claims(self, client, grant_type, user, scope):
        now = int(time.time())
        return {"iat": now, "nbf": now, **(user.claims() if user else {})}


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64json(value):
    return b64(json.dumps(value, separators=(",", ":")).encode())


class Provider(AuthorizationServer):
    """The authorization server: its clients, codes, tokens and keys, and the test controls' state."""

    def __init__(self, resource_server_secret):
        super().__init__()
        self.scopes_supported = SCOPES
        self.issuer = None
        self.keys = Keys()
        self.clients = {RESOURCE_SERVER: Client(RESOURCE_SERVER, resource_server_secret, {
            "token_endpoint_auth_method": "client_secret_basic", "grant_types": ["client_credentials"]})}
        self.codes = {}
        self.access_tokens = {}
        self.refresh_tokens = {}
        self.jwks_mode = "normal"
        self.metadata_mode = "normal"
        self.stats = {"jwks_requests": 0, "metadata_requests": 0, "introspection_requests": 0}
        self.stats_lock = threading.Lock()
        self.register_grant(AuthorizationCodeGrant, [S256Required(required=True), resource_indicator])
        self.register_grant(RefreshTokenGrant)
        self.register_grant(ClientCredentialsGrant)
        self.register_endpoint(Registration(claims_classes=[LoopbackClientMetadata]))
        self.register_endpoint(Introspection)
        self.register_endpoint(Revocation)

    def serve_as(self, issuer):
        self.issuer = issuer
        self.register_token_generator("default", AccessTokens(issuer, self.keys))

    def count(self, what):
        with self.stats_lock:
            self.stats[what] += 1

    def query_client(self, client_id):
        return self.clients.get(client_id)

    def save_token(self, token, req):
        claims = json.loads(base64.urlsafe_b64decode(token["access_token"].split(".")[1] + "=="))  # our own JWT
        self.remember(Issued(token["access_token"], claims, req.client.client_id, token.get("refresh_token"),
                             req.user, g.get("resource")))

    def remember(self, issued):
        self.access_tokens[issued.access_token] = issued
        if issued.refresh_token:
            self.refresh_tokens[issued.refresh_token] = issued

    def metadata(self):
        base = self.issuer
        return {
            "issuer": base,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "registration_endpoint": f"{base}/register",
            "jwks_uri": f"{base}/jwks",
            "introspection_endpoint": f"{base}/introspect",
            "revocation_endpoint": f"{base}/revoke",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
            "introspection_endpoint_auth_methods_supported": ["client_secret_basic"],
            "scopes_supported": SCOPES,
        }

    def mint(self, body):
        claims = body["claims"]
        if body.get("opaque"):
            token = generate_token(43)
            self.remember(Issued(token, claims, claims.get("client_id")))
            return token
        alg, typ = body.get("alg", "RS256"), body.get("typ", "at+jwt")
        header = {"alg": alg} if typ is None else {"alg": alg, "typ": typ}
        if alg == "none":
            return f"{b64json(header)}.{b64json(claims)}."
        key = self.keys.named(body.get("kid"))
        header["kid"] = body.get("kid") or key.kid
        if alg == "RS256":
            return jwt.encode(header, claims, key, default_type=None)
        if alg == "HS256-with-public-key":
            signing_input = f"{b64json({**header, 'alg': 'HS256'})}.{b64json(claims)}"
            mac = hmac.new(key.as_pem(private=False), signing_input.encode(), hashlib.sha256).digest()
            return f"{signing_input}.{b64(mac)}"
        raise ValueError(f"unknown alg {alg!r}")

    def jwks_response(self):
        self.count("jwks_requests")
        mode = self.jwks_mode
        if mode == "down":
            return Response("down", status=503)
        if mode == "garbage":
            return Response(b"\x89not json at all {{{", status=200, mimetype="application/json")
        if mode == "slow":
            time.sleep(30)
        document = self.keys.jwks()
        if mode == "huge":
            document["padding"] = "x" * (6 * 1024 * 1024)
        return jsonify(document)

    def metadata_response(self):
        self.count("metadata_requests")
        if self.metadata_mode == "down":
            return Response("down", status=503)
        return jsonify(self.metadata())

    def set_modes(self, body):
        jwks, metadata = body.get("mode", self.jwks_mode), body.get("metadata", self.metadata_mode)
        if jwks not in JWKS_MODES or metadata not in ("normal", "down"):
            return jsonify({"error": f"unknown mode in {body}"}), 400
        self.jwks_mode, self.metadata_mode = jwks, metadata
        return jsonify({"mode": jwks, "metadata": metadata})


LOGIN_FORM = """<!doctype html><title>Sign in</title>
<form method="post" action="/authorize">{hidden}
<label>Username <input name="username"></label>
<label>Password <input name="password" type="password"></label>
<button>Sign in</button></form>
"""


def login_form(params):
    hidden = "".join(f'\n<input type="hidden" name="{escape(k)}" value="{escape(v)}">'
                     for k, v in params.items(multi=True))
    return LOGIN_FORM.format(hidden=hidden)


def authorize(provider):
    """The authorization endpoint: the login form, or with credentials the redirect with a code."""
    try:
        grant = provider.get_consent_grant(end_user=None)
    except OAuth2Error as error:
        return provider.handle_error_response(None, error)
    if "username" not in request.values:
        return login_form(request.args)
    user = sign_in(request.values["username"], request.values.get("password", ""))
    if user is None:
        return "<!doctype html><title>Sign-in failed</title><p>Wrong username or password.</p>", 401
    return provider.create_authorization_response(grant_user=user, grant=grant)


def create_app(provider):
    app = Flask(__name__)
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        app.add_url_rule(path, path, provider.metadata_response)
    app.add_url_rule("/jwks", "jwks", provider.jwks_response)
    app.add_url_rule("/authorize", "authorize", lambda: authorize(provider), methods=["GET", "POST"])
    app.add_url_rule("/token", "token", provider.create_token_response, methods=["POST"])
    app.add_url_rule("/register", "register", lambda: provider.create_endpoint_response("client_registration"),
                     methods=["POST"])
    app.add_url_rule("/revoke", "revoke", lambda: provider.create_endpoint_response("revocation"), methods=["POST"])

    @app.post("/introspect")
    def introspect():
        provider.count("introspection_requests")
        return provider.create_endpoint_response("introspection")

    @app.post("/test/mint")
    def mint():
        try:
            return jsonify({"token": provider.mint(request.get_json())})
        except (KeyError, ValueError) as error:
            return jsonify({"error": f"bad mint request: {error!r}"}), 400

    @app.post("/test/jwks-mode")
    def jwks_mode():
        return provider.set_modes(request.get_json())

    @app.post("/test/rotate")
    def rotate():
        return jsonify({"kid": provider.keys.rotate(bool((request.get_json(silent=True) or {}).get("drop_old")))})

    @app.get("/test/stats")
    def stats():
        with provider.stats_lock:
            return jsonify(provider.stats)

    return app


def write_private(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def write_atomically(path, text):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url_file")
    parser.add_argument("--introspection-credentials")
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    secret = secrets.token_urlsafe(32)
    provider = Provider(secret)
    server = make_server("127.0.0.1", 0, create_app(provider), threaded=True)
    provider.serve_as(f"http://127.0.0.1:{server.port}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if args.introspection_credentials:
        write_private(args.introspection_credentials, f"{RESOURCE_SERVER}:{secret}\n")
    write_atomically(args.url_file, provider.issuer)
    print(f"oauth_provider: serving {provider.issuer}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
