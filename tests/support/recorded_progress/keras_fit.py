"""A real Keras 3 fit of a small linear model on synthetic data: 3 epochs of 8 steps of 32.

argv[1]: verbose (1: the bar, 2: a line per epoch); argv[2] "generator": the batches come from
a tf.data generator of unknown length, so that the first epoch's bar reads `N/Unknown`. A
callback sleeps 30 ms a step so that the bar is drawn at each step, as a slow step draws it.
An `evaluate` follows the fit, as programs often end.
"""

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras
import numpy as np

verbose, source = int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "arrays"
rng = np.random.default_rng(0)
x = rng.random((256, 4)).astype("float32")
y = x @ np.array([[2.0], [-1.0], [0.5], [3.0]], dtype="float32") + 1.0
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", metrics=["mae"])
slow = keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: time.sleep(0.03))
if source == "generator":
    import tensorflow as tf

    def batches():
        for i in range(0, 256, 32):
            yield x[i : i + 32], y[i : i + 32]

    spec = (tf.TensorSpec((None, 4), tf.float32), tf.TensorSpec((None, 1), tf.float32))
    data = tf.data.Dataset.from_generator(batches, output_signature=spec)
    model.fit(data, epochs=3, verbose=verbose, callbacks=[slow])
else:
    model.fit(x, y, batch_size=32, epochs=3, verbose=verbose, callbacks=[slow])
model.evaluate(x, y, batch_size=64, verbose=verbose)
