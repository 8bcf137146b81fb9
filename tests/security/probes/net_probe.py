
import errno, socket
def _name(e):
    if isinstance(e, socket.timeout):
        return "timeout"
    return errno.errorcode.get(e.errno, str(e.errno))
def probe(targets, family=socket.AF_INET):
    out = {}
    for label, (host, port) in targets.items():
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect((host, port))
            out[label + "_tcp"] = "connected"
        except OSError as e:
            out[label + "_tcp"] = _name(e)
        finally:
            s.close()
        u = socket.socket(family, socket.SOCK_DGRAM)
        try:
            u.sendto(b"x", (host, port))
            out[label + "_udp"] = "sent"
        except OSError as e:
            out[label + "_udp"] = _name(e)
        finally:
            u.close()
    return out
