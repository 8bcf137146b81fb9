
import struct
out = {}
for label, name in (("public", "example.com"), ("google", "dns.google"), ("metadata", "metadata.google.internal")):
    try:
        socket.getaddrinfo(name, 80)
        out[label] = "resolved"
    except socket.gaierror:
        out[label] = "gaierror"
    except OSError as e:
        out[label] = _name(e)
servers = [l.split()[1] for l in open("/etc/resolv.conf").read().splitlines() if l.startswith("nameserver")]
resolvers = {f"resolv_conf_{i}": [ip, 53] for i, ip in enumerate(servers)}
resolvers.update(public_resolvers)
out["resolvers"] = probe(resolvers)
result = out
