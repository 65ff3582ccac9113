"""A real tqdm loop over a generator (no total): `120it [...]`, with a postfix."""

import sys
import time

from tqdm import tqdm


def batches():
    for i in range(25):
        time.sleep(0.01)
        yield i


bar = tqdm(batches(), mininterval=0, file=sys.stderr)
for i in bar:
    bar.set_postfix(loss=1.0 / (i + 1), refresh=False)
bar.close()
