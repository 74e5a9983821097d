"""``zgrad.nn.modules.rnn``: PyTorch's module path for these classes of :mod:`zgrad.nn`
(re-exported: the same objects)."""

from zgrad.nn.rnn import GRU, GRUCell, LSTM, LSTMCell
from zgrad.nn.rnn_elman import RNN, RNNCell

__all__ = ["GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "RNNCell"]
from zgrad.nn.rnn import RNNBase, RNNCellBase  # noqa: E402

__all__ += ["RNNBase", "RNNCellBase"]
