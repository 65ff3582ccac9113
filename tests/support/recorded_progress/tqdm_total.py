"""A real tqdm loop with a total and a postfix, its bar written to a pipe or a file."""

import math
import sys
import time

from tqdm import tqdm

with tqdm(total=40, desc="train", mininterval=0, file=sys.stderr) as bar:
    for step in range(1, 41):
        time.sleep(0.01)
        bar.set_postfix(loss=round(2.0 * math.exp(-step / 10), 4), lr=0.1, refresh=False)
        bar.update(1)
print("done", flush=True)
