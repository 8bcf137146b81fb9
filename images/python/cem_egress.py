"""The sandbox's way out: a forwarder from a loopback port to the server's egress proxy.

The sandbox has no network interface but lo. When an execution may reach hosts (the upstreams
file's "egress" entries), the server binds a Unix socket in this container's own read-only
directory /mnt/egress for that execution alone, and the harness calls start(): a thread listens
on 127.0.0.1 and carries each connection, byte for byte, to that socket; HTTPS_PROXY and
HTTP_PROXY name the port, so urllib, pandas, requests, httpx, pip and curl use it unchanged. The server terminates their TLS with its own authority, whose
certificate is /mnt/egress/ca.pem: the only root these variables name. Libraries that ignore
proxy variables by default (aiohttp without trust_env=True, fsspec's HTTP without it) reach
nothing: there is no route out.

Run as a program (`python3 cem_egress.py COMMAND...`) it starts the same forwarder and runs
COMMAND with those variables: the package installer's pip goes out this way.
"""

import os
import socket
import subprocess
import sys
import threading

EGRESS_DIR = "/mnt/egress"
SOCKET = os.path.join(EGRESS_DIR, "proxy.sock")
CA_FILE = os.path.join(EGRESS_DIR, "ca.pem")
CHUNK = 256 * 1024


def _pump(src, dst):
    """Copies src to dst until src ends, then ends dst's sending side."""
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    try:
        while True:
            n = src.recv_into(buf)
            if not n:
                break
            dst.sendall(view[:n])
    except OSError:
        pass
    finally:
        for end in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                end[0].shutdown(end[1])
            except OSError:
                pass


def _carry(client):
    """One connection: to the proxy socket, both ways."""
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(SOCKET)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener):
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_carry, args=(client,), daemon=True).start()


def environment(port, http):
    """The variables that send HTTP clients through the forwarder on `port`."""
    proxy = f"http://127.0.0.1:{port}"
    # Every host goes through the proxy, loopback names included: the sandbox's own loopback
    # serves nothing, and an entry for the host's needs "private": true.
    # Plain http:// goes to the proxy too, entry or not: it answers what no entry allows with
    # a refusal that says what to change, where no proxy would leave "network unreachable".
    del http
    return {"HTTPS_PROXY": proxy, "https_proxy": proxy, "HTTP_PROXY": proxy, "http_proxy": proxy,
            "NO_PROXY": "", "no_proxy": "", "SSL_CERT_FILE": CA_FILE,
            "REQUESTS_CA_BUNDLE": CA_FILE, "CURL_CA_BUNDLE": CA_FILE, "PIP_CERT": CA_FILE}


def start(http):
    """Starts the forwarder and sets this process's proxy variables (children inherit them).
    Returns the variables; none when the execution has no socket."""
    if not os.path.exists(SOCKET):
        return {}
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    threading.Thread(target=_serve, args=(listener,), daemon=True).start()
    env = environment(listener.getsockname()[1], http)
    os.environ.update(env)
    return env


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: cem_egress.py COMMAND [ARGS...]")
    start(os.environ.get("CEM_EGRESS_HTTP") == "1")
    sys.exit(subprocess.call(sys.argv[1:]))
