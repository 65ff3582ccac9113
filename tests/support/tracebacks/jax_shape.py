"""A jitted step given arrays whose shapes do not match: JAX's own error, as a task prints it."""

import jax
import jax.numpy as jnp


@jax.jit
def step(w, x):
    return jnp.dot(x, w).sum()


print("step 0 loss 0.5", flush=True)
step(jnp.ones((3, 2)), jnp.ones((4, 5)))
