"""A 2-layer transformer encoder trained for a few steps under torch.compile with Inductor (bench/fx.py --torch-run
runs it plainly and under `agdb fx --torch`)."""
import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.TransformerEncoder(
    torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True),
    num_layers=2)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = torch.compile(lambda x: model(x).pow(2).mean(), backend="inductor")
for _ in range(3):
    loss = step(torch.randn(4, 8, 32))
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"loss {loss.item():.4f}")
