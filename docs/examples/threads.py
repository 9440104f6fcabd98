"""Two worker threads, each making its own graph and calling backward: torch's sequence number is thread-local, so
each worker's numbers start at 0, and `agdb culprits` shows which thread made which node."""
import threading

import torch


def step(scale):
    w = torch.tensor([0.5, -1.0], requires_grad=True)
    h = (w * scale).tanh()
    loss = (h * h).sum()
    loss.backward()
    print(threading.current_thread().name, "w.grad", [round(g, 4) for g in w.grad.tolist()])


for i in range(2):  # one after the other, so that the threads take their numbers in a fixed order
    worker = threading.Thread(target=step, args=(i + 1.0,), name=f"worker-{i}")
    worker.start()
    worker.join()
