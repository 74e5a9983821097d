"""``zgrad.nn.functional``: stateless layer functions and losses."""

from zgrad.ops import cross_entropy, linear, log_softmax, mse_loss, relu, sigmoid, softmax, tanh

__all__ = ["cross_entropy", "linear", "log_softmax", "mse_loss", "relu", "sigmoid", "softmax", "tanh"]
