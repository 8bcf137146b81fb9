"""The official MCP Python SDK's OAuth client (`OAuthClientProvider`) through the whole
authorization flow of the server's streamable HTTP endpoint: the 401 challenge, the protected
resource metadata (RFC 9728), the authorization server's metadata, dynamic client registration,
the authorization code grant with PKCE and the resource indicator, and the token exchange. The
user signs in over HTTP: a GET on the authorization URL the SDK hands over, with `username` and
`password` added, answers 302 to the redirect URI with the code (the redirect is never followed,
so nothing listens there). Then, on a legacy session and on a 2026-07-28 one, `execute_code` and
the tenant's workspace are used with the token.

    python tests/python/oauth_client.py SERVER_MCP_URL USER PASSWORD [--scope S]

`--scope` replaces the scope of the first authorization request, which the SDK takes from the
server's challenge or metadata; a step-up the server asks for later (403 insufficient_scope) is
authorized as the SDK asks. The last line on stdout is one JSON object of what the flow did:
unauthorized_first, metadata_fetched, registered, pkce (all checked true), resource (the
`resource` parameter sent), scopes_requested (the scope of each authorization request), eras,
and token_audience, token_subject, token_scope (read, unverified, from the last access token).
Exits non-zero with a message, after the HTTP exchanges so far, on the first mismatch.
"""

import argparse
import asyncio
import base64
import hashlib
import json
import os
import sys
import traceback
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx2
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from original_examples import ERAS, check, client_for, payload  # noqa: E402

# Where the authorization server sends the code. Never requested: the sign-in reads the 302.
REDIRECT_URI = "http://127.0.0.1:33418/callback"


class MemoryStorage(TokenStorage):
    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


def with_params(url, params):
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=urlencode({**dict(parse_qsl(parts.query)), **params})))


def query_of(url):
    return dict(parse_qsl(urlsplit(url).query))


def jwt_claims(token):
    """The claims of a JWT, unverified; {} for an opaque token."""
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    return json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))


class Flow:
    """The sign-in, and what the OAuth flow did as the SDK's HTTP client's event hooks saw it."""

    def __init__(self, mcp_url, user, password, scope):
        self.mcp_url = httpx2.URL(mcp_url)
        self.credentials = {"username": user, "password": password}
        self.scope = scope
        self.exchanges = []  # (request, status, WWW-Authenticate) of every request sent
        self.token_forms = []
        self.sign_ins = []  # the authorization URLs requested, as sent
        self.location = None

    async def on_request(self, request):
        if request.headers.get("content-type") == "application/x-www-form-urlencoded":
            form = dict(parse_qsl(request.content.decode()))
            if "grant_type" in form:
                self.token_forms.append(form)

    async def on_response(self, response):
        self.exchanges.append((response.request, response.status_code, response.headers.get("www-authenticate", "")))

    async def redirect_handler(self, authorization_url):
        """Signs in: the authorization URL with the credentials (and on the first, `--scope`),
        answered by a redirect."""
        scope = {"scope": self.scope} if self.scope and not self.sign_ins else {}
        self.sign_ins.append(with_params(authorization_url, scope))
        async with httpx2.AsyncClient(timeout=30) as http:
            r = await http.get(with_params(self.sign_ins[-1], self.credentials))
        check(r.status_code == 302,
              f"signing in as {self.credentials['username']} answered {r.status_code}, not 302: {r.text[:500]}")
        self.location = r.headers["location"]
        check(self.location.startswith(REDIRECT_URI), f"the sign-in redirected elsewhere: {self.location}")

    async def callback_handler(self):
        params = query_of(self.location)
        check("code" in params, f"the sign-in redirected without a code: {self.location}")
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    def trace(self):
        return [f"{req.method} {req.url.copy_with(query=None)} -> {status} {www}".rstrip()
                for req, status, www in self.exchanges]

    def sent(self, method, path_prefix, status, same_origin=False):
        return any(req.method == method and req.url.path.startswith(path_prefix) and got == status
                   and (not same_origin or req.url.netloc == self.mcp_url.netloc)
                   for req, got, _ in self.exchanges)

    def summary(self, tokens, eras):
        check(self.sign_ins and tokens, "no OAuth flow happened: the server never asked for a token")
        asked = query_of(self.sign_ins[-1])
        codes = [f for f in self.token_forms if f["grant_type"] == "authorization_code"]
        check(codes, "no authorization code was exchanged for a token")
        verifier = codes[-1].get("code_verifier", "")
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        check(codes[-1].get("resource") == asked.get("resource"),
              f"the token request's resource {codes[-1].get('resource')} is not the authorization's {asked.get('resource')}")
        first = next((status, www) for req, status, www in self.exchanges if req.url == self.mcp_url)
        claims = jwt_claims(tokens.access_token)
        return {
            "unauthorized_first": first[0] == 401 and first[1].startswith("Bearer") and "resource_metadata=" in first[1],
            "metadata_fetched": self.sent("GET", "/.well-known/oauth-protected-resource", 200, same_origin=True),
            "registered": self.sent("POST", "/register", 201),
            "pkce": bool(verifier) and asked.get("code_challenge_method") == "S256"
                    and asked.get("code_challenge") == challenge,
            "resource": asked.get("resource"),
            "scopes_requested": [query_of(url).get("scope") for url in self.sign_ins],
            "eras": eras,
            "token_audience": claims.get("aud"),
            "token_subject": claims.get("sub"),
            "token_scope": claims.get("scope", tokens.scope),
        }


def innermost(error):
    """The first exception inside (nested) exception groups: the one that says what failed."""
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


async def use_tools(client, mode, label):
    r = await client.call_tool("execute_code", {"code": "result = 6 * 7"})
    p = payload(r)
    check(not r.is_error and p.get("result") == 42, f"{label}: execute_code: {p}")
    name = f"oauth-{mode}.txt"
    r = await client.call_tool("write_workspace_file", {"filename": name, "content": f"written over OAuth ({label})"})
    check(not r.is_error and payload(r)["success"], f"{label}: write_workspace_file: {payload(r)}")
    files = payload(await client.call_tool("list_workspace_files", {}))["files"]
    check(name in files, f"{label}: {name} missing from the workspace: {files}")
    print(f"{label}: execute_code and the workspace ok", flush=True)


async def main(url, user, password, scope):
    flow = Flow(url, user, password, scope)
    try:
        await run(flow, url, user)
    except Exception:
        print("oauth_client.py: the HTTP exchanges until the failure:", *flow.trace(), sep="\n  ", file=sys.stderr)
        raise


async def run(flow, url, user):
    storage = MemoryStorage()
    metadata = OAuthClientMetadata(client_name="cem oauth_client.py", redirect_uris=[REDIRECT_URI],
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                                   token_endpoint_auth_method="none")
    oauth = OAuthClientProvider(url, metadata, storage, flow.redirect_handler, flow.callback_handler)
    hooks = {"request": [flow.on_request], "response": [flow.on_response]}
    eras = []
    async with httpx2.AsyncClient(auth=oauth, event_hooks=hooks, timeout=httpx2.Timeout(120)) as http:
        for mode in ERAS:
            label = f"{user} {mode}"
            async with client_for(streamable_http_client(url, http_client=http), mode, label) as client:
                await use_tools(client, mode, label)
            eras.append(mode)
    summary = flow.summary(storage.tokens, eras)
    failed = [k for k in ("unauthorized_first", "metadata_fetched", "registered", "pkce") if not summary[k]]
    check(not failed, f"the OAuth flow missed {failed}: {summary}")
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("user")
    parser.add_argument("password")
    parser.add_argument("--scope")
    args = parser.parse_args()
    try:
        asyncio.run(main(args.url, args.user, args.password, args.scope))
    except Exception as error:
        traceback.print_exc()
        sys.exit(f"oauth_client.py failed: {innermost(error)!r}")
