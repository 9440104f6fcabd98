"""A small MLP trained for three steps with SGD: AccumulateGrad ties among the parameters, every step."""
import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.ones(5, 3)
for step in range(3):
    opt.zero_grad()
    loss = model(data).pow(2).mean()
    loss.backward()
    opt.step()
    print("step", step, "loss", round(loss.item(), 4))
