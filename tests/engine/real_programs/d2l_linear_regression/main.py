# Vendored from https://github.com/d2l-ai/d2l-en, chapter_linear-networks/linear-regression-concise.md, tag v0.17.6 (commit 0f920da87c3d3eb6a6802469fd3e89b7d4f43160).
# Licence: the book's sample code is under a modified MIT licence (MIT-0), Copyright 2019 Amazon.com, Inc. or
# its affiliates; the notice is in ../licenses/d2l-en.LICENSE-SAMPLECODE.
# Edits (sizes only; each changed line marked "# EDIT"):
# - the chapter's PyTorch code cells (`#@tab pytorch` and `#@tab all`), in order, form main.py; the prose and
#   the other frameworks' cells are left out. d2l/ is the book's library (see d2l/torch.py for its edits).
# - 100 synthetic examples instead of 1000.
from d2l import torch as d2l
import numpy as np
import torch
from torch.utils import data

true_w = d2l.tensor([2, -3.4])
true_b = 4.2
features, labels = d2l.synthetic_data(true_w, true_b, 100)  # EDIT

def load_array(data_arrays, batch_size, is_train=True):  #@save
    """Construct a PyTorch data iterator."""
    dataset = data.TensorDataset(*data_arrays)
    return data.DataLoader(dataset, batch_size, shuffle=is_train)

batch_size = 10
data_iter = load_array((features, labels), batch_size)

next(iter(data_iter))

# `nn` is an abbreviation for neural networks
from torch import nn
net = nn.Sequential(nn.Linear(2, 1))

net[0].weight.data.normal_(0, 0.01)
net[0].bias.data.fill_(0)

loss = nn.MSELoss()

trainer = torch.optim.SGD(net.parameters(), lr=0.03)

num_epochs = 3
for epoch in range(num_epochs):
    for X, y in data_iter:
        l = loss(net(X) ,y)
        trainer.zero_grad()
        l.backward()
        trainer.step()
    l = loss(net(features), labels)
    print(f'epoch {epoch + 1}, loss {l:f}')

w = net[0].weight.data
print('error in estimating w:', true_w - d2l.reshape(w, true_w.shape))
b = net[0].bias.data
print('error in estimating b:', true_b - b)
