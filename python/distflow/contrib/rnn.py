"""tf.contrib.rnn: the RNN cells and static_rnn / static_bidirectional_rnn
(distflow/rnn.py); other names raise NotImplementedError naming them."""
from distflow.rnn import (  # noqa: F401
    BasicLSTMCell, BasicRNNCell, DropoutWrapper, GRUCell, LSTMCell, LSTMStateTuple, MultiRNNCell, RNNCell,
    ResidualWrapper, static_bidirectional_rnn, static_rnn)


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotImplementedError(f"distflow.compat.v1 has no tf.contrib.rnn.{name} yet")
