
import os
found = []
for top, dirs, files in os.walk("/"):
    if top in ("/proc", "/sys"):
        dirs[:] = []
        continue
    found += [os.path.join(top, n) for n in files if n.startswith(marker) or n == "mine.txt"]
result = {"paths": {p: os.path.exists(p) for p in paths}, "found": sorted(found),
          "skill_file": os.path.exists("/skills/tenant_b_only.py"),
          "skills": [s["name"] for s in list_skills()],
          "mounts": [l for l in open("/proc/self/mountinfo").read().splitlines() if any(p in l for p in paths)]}
try:
    load_skill("tenant_b_only")
    result["load"] = "loaded"
except RuntimeError as e:
    result["load"] = str(e)[:60]
