
import os
hits = {"environ_values": [k for k, v in os.environ.items() if marker in v],
        "environ_names": [k for k in names if k in os.environ], "proc": {}}
readable = 0
for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]:
    try:
        data = open(f"/proc/{pid}/environ", "rb").read()
    except OSError:
        continue
    readable += 1
    found = [k for k in names if (k + "=").encode() in data] + (["marker"] if marker.encode() in data else [])
    if found:
        hits["proc"][pid] = found
hits["readable_environs"] = readable
hits["has_path"] = "PATH" in os.environ
result = hits
