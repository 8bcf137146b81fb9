"""An upstream MCP server, written with the official MCP Python SDK, whose tool list grows: each
call of `grow` adds a tool `extra_N` (returning N) and then sends
`notifications/tools/list_changed` on its session, as an upstream whose tools change at run time
does. `ping` answers "pong".

    python tests/python/growing_upstream.py

Serves over stdio. Configured as an upstream by tests/listen.rs; the scripts that drive the
server (listen_tenants.py, listen_latency.py) call `grow` from sandbox code.
"""

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("growing")
grown = 0


@server.tool()
def ping() -> str:
    """Answers pong."""
    return "pong"


@server.tool()
async def grow(ctx: Context) -> int:
    """Adds a tool extra_N and tells the client its tool list changed; returns N."""
    global grown
    grown += 1
    n = grown

    def extra() -> int:
        return n

    server.add_tool(extra, name=f"extra_{n}", description=f"Added by call {n} of grow; returns {n}.")
    await ctx.session.send_tool_list_changed()
    return n


if __name__ == "__main__":
    server.run("stdio")
