# Vendored from https://github.com/d2l-ai/d2l-en, chapter_multilayer-perceptrons/mlp-concise.md, tag v0.17.6 (commit 0f920da87c3d3eb6a6802469fd3e89b7d4f43160).
# Licence: the book's sample code is under a modified MIT licence (MIT-0), Copyright 2019 Amazon.com, Inc. or
# its affiliates; the notice is in ../licenses/d2l-en.LICENSE-SAMPLECODE.
# Edits (sizes only; each changed line marked "# EDIT"):
# - the chapter's PyTorch code cells (`#@tab pytorch` and `#@tab all`), in order, form main.py; the prose and
#   the other frameworks' cells are left out. d2l/ is the book's library (see d2l/torch.py for its edits).
# - batch size 10 instead of 256, 3 epochs instead of 10.
from d2l import torch as d2l
import torch
from torch import nn

net = nn.Sequential(nn.Flatten(),
                    nn.Linear(784, 256),
                    nn.ReLU(),
                    nn.Linear(256, 10))

def init_weights(m):
    if type(m) == nn.Linear:
        nn.init.normal_(m.weight, std=0.01)

net.apply(init_weights);

batch_size, lr, num_epochs = 10, 0.1, 3  # EDIT
loss = nn.CrossEntropyLoss(reduction='none')
trainer = torch.optim.SGD(net.parameters(), lr=lr)

train_iter, test_iter = d2l.load_data_fashion_mnist(batch_size)
d2l.train_ch3(net, train_iter, test_iter, loss, num_epochs, trainer)
