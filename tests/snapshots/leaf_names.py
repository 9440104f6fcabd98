"""Leaves with names of every kind, for the leaf-names snapshot and pilot tests: an MLP's parameters, plain
variables, one name in two functions, and an expression's result."""
from agdb import engine as torch
from agdb.engine import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(2, 2)
        self.fc2 = nn.Linear(2, 1)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


def layer1(x):
    w = torch.ones(2, requires_grad=True)
    return x * w


def layer2(x):
    w = torch.full((2,), 2.0, requires_grad=True)
    return x * w


torch.manual_seed(0)
model = MLP()
x = torch.ones(1, 2)
b = torch.zeros(2, requires_grad=True)
loss = model(x).sum() + (layer1(x) + layer2(x) + b).sum() + (torch.ones(2, requires_grad=True) * 3).sum()
loss.backward()
