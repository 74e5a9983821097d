"""pytorch/examples ``time_sequence_prediction/train.py``, ported to zgrad for
``tests/examples/test_examples_time_sequence_prediction.py``: ``torch`` renamed to ``zgrad``, and
the prediction after each step runs 20 points into the future instead of 1000. matplotlib comes
from the stand-in in ``tests/support/examples_standins/`` (``savefig`` writes the plotted lines
with ``numpy.savez``, not a PDF). It reads ``traindata.pt``, which ``generate_sine_wave.py``
beside it writes (6 sine waves of 40 points) with ``zgrad.save``:

    python tests/support/examples_time_sequence_prediction/generate_sine_wave.py
    PYTHONPATH=tests/support/examples_standins python tests/support/examples_time_sequence_prediction/train.py \
        --steps 2
"""

from __future__ import print_function
import argparse
import zgrad
import zgrad.nn as nn
import zgrad.optim as optim
import numpy as np
import matplotlib
matplotlib.use('Agg')
import matplotlib.pyplot as plt

class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future = 0):
        outputs = []
        h_t = zgrad.zeros(input.size(0), 51, dtype=zgrad.double)
        c_t = zgrad.zeros(input.size(0), 51, dtype=zgrad.double)
        h_t2 = zgrad.zeros(input.size(0), 51, dtype=zgrad.double)
        c_t2 = zgrad.zeros(input.size(0), 51, dtype=zgrad.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):# if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = zgrad.cat(outputs, dim=1)
        return outputs


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--steps', type=int, default=15, help='steps to run')
    opt = parser.parse_args()
    # set random seed to 0
    np.random.seed(0)
    zgrad.manual_seed(0)
    # load data and make training set
    data = zgrad.load('traindata.pt')
    input = zgrad.from_numpy(data[3:, :-1])
    target = zgrad.from_numpy(data[3:, 1:])
    test_input = zgrad.from_numpy(data[:3, :-1])
    test_target = zgrad.from_numpy(data[:3, 1:])
    # build the model
    seq = Sequence()
    seq.double()
    criterion = nn.MSELoss()
    # use LBFGS as optimizer since we can load the whole data to train
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
    #begin to train
    for i in range(opt.steps):
        print('STEP: ', i)
        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            print('loss:', loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with zgrad.no_grad():
            future = 20
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print('test loss:', loss.item())
            y = pred.detach().numpy()
        # draw the result
        plt.figure(figsize=(30,10))
        plt.title('Predict future values for time sequences\n(Dashlines are predicted values)', fontsize=30)
        plt.xlabel('x', fontsize=20)
        plt.ylabel('y', fontsize=20)
        plt.xticks(fontsize=20)
        plt.yticks(fontsize=20)
        def draw(yi, color):
            plt.plot(np.arange(input.size(1)), yi[:input.size(1)], color, linewidth = 2.0)
            plt.plot(np.arange(input.size(1), input.size(1) + future), yi[input.size(1):], color + ':', linewidth = 2.0)
        draw(y[0], 'r')
        draw(y[1], 'g')
        draw(y[2], 'b')
        plt.savefig('predict%d.pdf'%i)
        plt.close()
