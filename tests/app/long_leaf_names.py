"""A model whose parameters have long paths, for the 80×24 layout tests: its AccumulateGrads' names are wider
than a third of the terminal."""
from agdb import engine as torch
from agdb.engine import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder_input_projection = nn.Linear(3, 3)
        self.decoder_output_projection = nn.Linear(3, 1)

    def forward(self, x):
        return self.decoder_output_projection(self.encoder_input_projection(x).tanh())


torch.manual_seed(0)
model = Net()
loss = model(torch.ones(2, 3)).sum()
loss.backward()
