
import errno, socket
out = {}
for label, family, kind, proto in (
        ("packet_raw", socket.AF_PACKET, socket.SOCK_RAW, 0x0300),
        ("packet_dgram", socket.AF_PACKET, socket.SOCK_DGRAM, 0x0300),
        ("inet_raw_icmp", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
        ("inet_raw_tcp", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP),
        ("inet_raw_ip", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW),
        ("inet6_raw_icmp", socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
        ("alg", 38, socket.SOCK_SEQPACKET, 0),
        ("vsock", 40, socket.SOCK_STREAM, 0)):
    try:
        socket.socket(family, kind, proto).close()
        out[label] = "opened"
    except OSError as e:
        out[label] = errno.errorcode.get(e.errno, str(e.errno))
result = out
