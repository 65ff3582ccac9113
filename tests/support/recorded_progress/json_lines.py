"""A real JSON-line training loop: SGD on a linear model, 2 epochs of 40 steps, a JSON line every
10 steps ({"step", "total", "epoch", "epochs", "loss", "lr"}; step and total within the epoch).
It also prints what real programs print beside progress: plain log lines, a structured log line
whose "step" is a string, and a checkpoint event with a float step. In the second epoch the
learning rate is raised each step until the loss diverges (inf, then NaN: `Infinity`, `NaN`)."""

import json
import logging
import math
import random
import sys

logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(levelname)s %(message)s")
random.seed(0)
truth, w, lr = [2.0, -1.0, 0.5, 3.0], [0.0] * 4, 0.05


def dot(a: list[float], b: list[float]) -> float:
    return sum(p * q for p, q in zip(a, b, strict=True))


print(json.dumps({"event": "start", "step": "0", "host": "worker-0"}), flush=True)
logging.info("training 2 epochs of 40 steps")
for epoch in (1, 2):
    for step in range(1, 41):
        x = [random.random() for _ in range(4)]
        err = dot(w, x) - dot(truth, x)
        loss = err * err  # inf once it overflows, then NaN
        w = [a - lr * 2 * err * b for a, b in zip(w, x, strict=True)]
        if not math.isfinite(loss):
            w = [math.nan] * 4
        if epoch == 2:
            lr *= 3.0
        if step % 10 == 0:
            line = {"step": step, "total": 40, "epoch": epoch, "epochs": 2, "loss": loss, "lr": lr}
            print(json.dumps(line), flush=True)
    checkpoint = {"event": "checkpoint", "step": float(40 * epoch), "path": f"/ckpt/{epoch}"}
    print(json.dumps(checkpoint), flush=True)
logging.info("done")
