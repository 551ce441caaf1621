"""Worker of benchmarks/peers.py: Opacus (PyTorch, CPU), run with benchmarks/.venvs/opacus/bin/python.

Logistic regression as one ``nn.Linear(d, 1, bias=False)`` with ``BCEWithLogitsLoss(reduction="sum")``,
trained by Opacus's standard ``PrivacyEngine.make_private(..., poisson_sampling=True)``: its
DPDataLoader draws each step's batch by Poisson sampling (every record independently with
probability q), its GradSampleModule computes per-example gradients, and its DPOptimizer clips them to
C, sums them, adds N(0, (sigma C)^2) noise and takes an SGD step (``loss_reduction="sum"``: the sum is
not divided by the batch size, as in our engine). Made as fast as Opacus allows:

- the dataset returns a whole batch by index array (``__getitems__``, one tensor gather) instead of
  one record at a time through the default collate (which costs microseconds per record in Python);
  Opacus's Poisson batch sampler is unchanged;
- ``grad_sample_mode``: the config's ``mode`` (default "hooks", Opacus's default and the fastest
  tried here; "ew" and "functorch" were slower, see peers.py);
- ``torch.set_num_threads(PEER_THREADS)``: peers.py times 1 thread and all the machine's CPUs (what
  our engine's XLA uses) and reports the faster: on this shared machine torch's 2-thread pool was
  often several times slower than 1 thread.

Prints ``PEER_RESULT <json>``; see _peer_common.py.
"""

from __future__ import annotations

import os
import platform
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peer_common import config_from_argv, emit, make_data, marginal_step_time, reset_peak, threads, vm_kb  # noqa: E402


def main() -> None:
    cfg = config_from_argv()
    warnings.filterwarnings("ignore")
    import torch
    import opacus
    from opacus import PrivacyEngine

    torch.set_num_threads(threads())
    torch.manual_seed(0)
    torch.ones(8).sum().item()
    idle_kb = vm_kb("VmHWM")

    n, d = cfg["n"], cfg["d"]
    x, y = make_data(n, d, cfg["seed"])
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    data_kb = vm_kb("VmHWM")  # peak up to here: idle + data (+ any transient copy while loading)
    loaded_kb = reset_peak()

    class Batched(torch.utils.data.Dataset):
        """A tensor dataset that gathers a whole batch at once (``__getitems__``)."""

        def __len__(self):
            return n

        def __getitem__(self, i):
            return xt[i], yt[i]

        def __getitems__(self, idx):
            idx = torch.as_tensor(idx, dtype=torch.long)
            return [(xt[idx], yt[idx])]

    def collate(batch):
        if len(batch) == 1 and batch[0][0].dim() == 2:  # one pre-gathered batch
            return batch[0]
        return torch.utils.data.default_collate(batch)

    loader = torch.utils.data.DataLoader(Batched(), batch_size=max(1, round(cfg["q"] * n)),
                                         collate_fn=collate)
    model = torch.nn.Linear(d, 1, bias=False)
    torch.nn.init.zeros_(model.weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    engine = PrivacyEngine(accountant="rdp", secure_mode=False)
    model, optimizer, loader = engine.make_private(
        module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=cfg["sigma"],
        max_grad_norm=cfg["clip"], poisson_sampling=True, loss_reduction="sum",
        grad_sample_mode=cfg.get("mode", "hooks"))
    criterion = torch.nn.BCEWithLogitsLoss(reduction="sum")

    def batches():
        while True:  # epochs of 1/q Poisson batches, one after the other
            yield from loader

    it = batches()

    def run(steps):
        for _ in range(steps):
            xb, yb = next(it)
            optimizer.zero_grad(set_to_none=True)
            if xb.shape[0]:
                criterion(model(xb).squeeze(-1), yb).backward()
            optimizer.step()
        return model

    t = marginal_step_time(run, cfg["short"], cfg["long"], cfg["repeats"])
    emit(dict(t, idle_kb=idle_kb, peak_kb=max(data_kb, vm_kb("VmHWM")),
              loaded_kb=loaded_kb, run_peak_kb=vm_kb("VmHWM"),
              version=f"opacus {opacus.__version__} (torch {torch.__version__}, {platform.python_version()})",
              detail=f"grad_sample_mode={cfg.get('mode', 'hooks')}, {torch.get_num_threads()} threads"))


if __name__ == "__main__":
    main()
