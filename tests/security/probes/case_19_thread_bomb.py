
import threading
stop = threading.Event()
threads, err = [], None
for _ in range(10_000):
    th = threading.Thread(target=stop.wait, daemon=True)
    try:
        th.start()
    except RuntimeError as e:
        err = str(e)
        break
    threads.append(th)
stop.set()
result = {"threads": len(threads), "error": err}
