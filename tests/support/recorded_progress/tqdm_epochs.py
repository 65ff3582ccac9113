"""A real tqdm loop with a new bar each epoch, its description naming the epoch (`Epoch 2/3`), as
PyTorch loops often draw it; each bar closes with a newline."""

import sys
import time

from tqdm import tqdm

for epoch in range(1, 4):
    loss = 1.0 / epoch
    with tqdm(range(12), desc=f"Epoch {epoch}/3", mininterval=0, file=sys.stderr) as bar:
        for _ in bar:
            time.sleep(0.005)
            loss *= 0.95
            bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
