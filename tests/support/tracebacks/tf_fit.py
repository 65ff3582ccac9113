"""A Keras model fitted on labels of the wrong shape: TensorFlow's own error, as a task prints it."""

import numpy as np
import tensorflow as tf

model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(3)])
model.compile(optimizer="sgd", loss="categorical_crossentropy")
print("step 0 loss 1.0986", flush=True)
model.fit(np.ones((8, 4)), np.ones((8, 5)), epochs=1, verbose=0)
