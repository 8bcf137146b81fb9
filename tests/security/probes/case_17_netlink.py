
import errno, socket, struct
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 1, 4, 0x200, 0x400
def rta(kind, data):
    length = 4 + len(data)
    return struct.pack("=HH", length, kind) + data + b"\0" * ((4 - length % 4) % 4)
def request(msg_type, payload, flags=0):
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    s.bind((0, 0))
    s.send(struct.pack("=IHHII", 16 + len(payload), msg_type, flags | NLM_F_REQUEST | NLM_F_ACK, 1, 0) + payload)
    reply = s.recv(65536)
    s.close()
    kind = struct.unpack("=H", reply[4:6])[0]
    if kind != 2:
        return f"reply type {kind}"
    code = -struct.unpack("=i", reply[16:20])[0]
    return "ok" if code == 0 else errno.errorcode.get(code, str(code))
lo = socket.if_nametoindex("lo")
ifinfo = lambda index, flags, change: struct.pack("=BxHiII", socket.AF_UNSPEC, 0, index, flags, change)
new = NLM_F_CREATE | NLM_F_EXCL
out = {
    "set_lo_down": request(19, ifinfo(lo, 0, 1)),
    "new_dummy_link": request(16, ifinfo(0, 0, 0) + rta(3, b"evil0\0") + rta(18, rta(1, b"dummy\0")), new),
    "new_veth_link": request(16, ifinfo(0, 0, 0) + rta(3, b"evil1\0") + rta(18, rta(1, b"veth\0")), new),
    "new_address": request(20, struct.pack("=BBBBI", socket.AF_INET, 32, 0, 0, lo)
                           + rta(2, socket.inet_aton("10.9.9.9")) + rta(1, socket.inet_aton("10.9.9.9")), new),
    "new_default_route": request(24, struct.pack("=BBBBBBBBI", socket.AF_INET, 0, 0, 0, 254, 3, 0, 1, 0)
                                 + rta(4, struct.pack("=I", lo)), new),
    "delete_lo_address": request(21, struct.pack("=BBBBI", socket.AF_INET, 8, 0, 0, lo)
                                 + rta(2, socket.inet_aton("127.0.0.1"))),
}
out["interfaces"] = sorted(n for _, n in socket.if_nameindex())
import fcntl
with socket.socket() as s:  # SIOCGIFFLAGS: the kernel's own answer, whatever sysfs shows
    out["lo_up"] = bool(struct.unpack_from("=H", fcntl.ioctl(s, 0x8913, struct.pack("=16s16x", b"lo")), 16)[0] & 1)
try:
    out["lo_up_sysfs"] = bool(int(open("/sys/class/net/lo/flags").read(), 16) & 1)
except FileNotFoundError:
    out["lo_up_sysfs"] = "absent"
out["routes"] = open("/proc/net/route").read().splitlines()[1:]
result = out
