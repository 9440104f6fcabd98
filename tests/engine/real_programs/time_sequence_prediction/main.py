# Vendored from https://github.com/pytorch/examples, time_sequence_prediction/train.py, commit 77f55b912142e11fcfdf5b530231fb9c52f181e8.
# Licence: BSD 3-Clause, Copyright (c) 2017, Pytorch contributors; the full notice is in ../licenses/pytorch-examples.LICENSE.
# Edits (sizes and data only; each changed line marked "# EDIT"):
# - file renamed train.py -> main.py (the harness runs main.py).
# - `torch.load('traindata.pt')` (written by generate_sine_wave.py of the same directory) replaced by that script's own numpy formula, inline, for N=6 waves of L=7 points instead of 100 of 1000.
# - matplotlib (import, plots and savefig: file output) removed.
# - defaults: 1 step instead of 15; 4 predicted future points instead of 1000.
from __future__ import print_function
import argparse
import torch
import torch.nn as nn
import torch.optim as optim
import numpy as np

class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, input, future = 0):
        outputs = []
        h_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 51, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 51, dtype=torch.double)

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
        outputs = torch.cat(outputs, dim=1)
        return outputs


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--steps', type=int, default=1, help='steps to run')  # EDIT
    opt = parser.parse_args()
    # set random seed to 0
    np.random.seed(0)
    torch.manual_seed(0)
    # load data and make training set
    _x = np.empty((6, 7), 'int64')  # EDIT: generate_sine_wave.py's data, inline and smaller
    _x[:] = np.array(range(7)) + np.random.randint(-4 * 20, 4 * 20, 6).reshape(6, 1)  # EDIT
    data = np.sin(_x / 1.0 / 20).astype('float64')  # EDIT
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
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
        with torch.no_grad():
            future = 4  # EDIT
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print('test loss:', loss.item())
            y = pred.detach().numpy()
        # EDIT: the plot of y (matplotlib, savefig) removed
