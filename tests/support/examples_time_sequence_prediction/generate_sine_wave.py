"""pytorch/examples ``time_sequence_prediction/generate_sine_wave.py``, ported to zgrad for
``tests/examples/test_examples_time_sequence_prediction.py``: ``torch`` renamed to ``zgrad``, and
6 waves of 40 points (N, L) instead of 100 of 1000. It writes ``traindata.pt`` (the float64 array,
with ``zgrad.save``) for ``train.py``."""

import numpy as np
import zgrad

np.random.seed(2)

T = 20
L = 40
N = 6

x = np.empty((N, L), 'int64')
x[:] = np.array(range(L)) + np.random.randint(-4 * T, 4 * T, N).reshape(N, 1)
data = np.sin(x / 1.0 / T).astype('float64')
zgrad.save(data, open('traindata.pt', 'wb'))
