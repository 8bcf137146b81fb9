"""Matplotlib backend of the sandbox (MPLBACKEND=module://cem_matplotlib): Agg rendering, and a
show() that sends every open figure back as a PNG image of the execution, then closes it.

Why a backend and not a patch of pyplot.show: user code imports pyplot whenever it likes, and a
backend is the one place matplotlib itself asks at that moment. The harness renders figures that
are still open when the code ends the same way (see harness.py, _send_open_figures).

In a process that is not the harness (a subprocess of user code) there is nowhere to send an
image: show() then does what Agg's does, nothing.
"""

import io
import sys

from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase

# Figures sent so far: names them "figure 1", "figure 2", ... in the order they are sent
# (matplotlib reuses its numbers once show() has closed a figure).
_sent = 0


def send_figures():
    """Renders each open figure as PNG, hands it to the harness and closes it; returns how many
    were sent."""
    runtime = sys.modules.get("cem_runtime")
    send = getattr(runtime, "show_image", None)
    if send is None:
        return 0
    import matplotlib.pyplot as plt

    global _sent
    sent = 0
    for number in plt.get_fignums():
        figure = plt.figure(number)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        plt.close(figure)
        _sent += 1
        send(buffer.getvalue(), source=f"figure {_sent}")
        sent += 1
    return sent


def show(*args, **kwargs):
    send_figures()
