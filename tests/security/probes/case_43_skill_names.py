
out = []
for name in names:
    try:
        save_skill(name, "x = 1")
        out.append("saved")
    except RuntimeError as e:
        out.append("Invalid skill name" in str(e))
result = out
