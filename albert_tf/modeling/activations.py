"""Activation functions named by the original's `hidden_act`."""

import tensorflow as tf


def gelu_tanh(x):
  """GELU, tanh approximation: the original `modeling.gelu`."""
  return tf.nn.gelu(x, approximate=True)


def gelu_exact(x):
  return tf.nn.gelu(x, approximate=False)


# The names the original's `hidden_act` may take (AlbertConfig.validate).
ACTIVATIONS = {
    "gelu": gelu_tanh,
    "gelu_new": gelu_tanh,
    "gelu_exact": gelu_exact,
    "relu": tf.nn.relu,
    "tanh": tf.math.tanh,
    "swish": tf.nn.silu,
    "silu": tf.nn.silu,
    "linear": tf.identity,
}


# Ours -> the name of the same function in the original's
# `modeling.get_activation`, which knows only these four.
ORIGINAL_NAMES = {"gelu": "gelu", "gelu_new": "gelu", "relu": "relu",
                  "tanh": "tanh", "linear": "linear"}


def get_activation(name: str):
  """Maps an activation name to a function; unknown names are a ValueError."""
  try:
    return ACTIVATIONS[name]
  except KeyError:
    raise ValueError(f"hidden_act: unknown activation {name!r}; expected one "
                     f"of {sorted(ACTIVATIONS)}") from None
