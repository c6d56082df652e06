"""PyTorch's GradScaler on a scripted run, for loom's GradScaler test.

torch.cuda.amp.GradScaler is the algorithm; PyTorch 1.13 has its two device
kernels (_amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_) for
CUDA only and disables the scaler without a GPU.  Here the scaler is forced
on and the two kernels are given in Python, transcribed from ATen's CUDA
kernels (AmpKernels.cu): unscale multiplies every gradient by inv_scale and
sets found_inf to 1 on any inf/NaN; update backs off on found_inf (tracker
reset), else counts a clean step and grows the scale when the count reaches
growth_interval (if the grown scale is finite; tracker reset either way).  The CUDA assertions of GradScaler.scale and of its
per-device replicator are dropped (CpuGradScaler, CpuReplicator).

  python3 grad_scaler_reference.py
prints per step: "step scale growth_tracker skipped w0 w1 w2" (after update).
The run: w (3) float32, SGD lr 0.1; loss = (w * c).sum() with c = (1, -2, 3)
except c[1] = inf at steps 2, 3, 9 and NaN at step 14; init_scale 1024,
growth_interval 3; unscale_ is called explicitly on even steps.
"""
import math

import torch
import torch.cuda.amp.grad_scaler as grad_scaler
from torch.cuda.amp import GradScaler


def unscale(grads, found_inf, inv_scale):
    for g in grads:
        if not torch.isfinite(g).all():
            found_inf.fill_(1.0)
        g.mul_(inv_scale)


def update_scale(scale, tracker, found_inf, growth, backoff, interval):
    if found_inf.item() > 0:
        scale.mul_(backoff)
        tracker.fill_(0)
    else:
        successful = tracker.item() + 1
        if successful == interval:
            grown = float(torch.tensor(scale.item() * growth, dtype=torch.float32))
            if math.isfinite(grown):
                scale.fill_(grown)
            tracker.fill_(0)
        else:
            tracker.fill_(successful)
    return scale


torch._amp_foreach_non_finite_check_and_unscale_ = unscale
torch._amp_update_scale_ = update_scale


class CpuReplicator(grad_scaler._MultiDeviceReplicator):
    """The per-device copy cache without its CUDA assertion."""

    def __init__(self, master_tensor):  # pylint: disable=super-init-not-called
        self.master = master_tensor
        self._per_device_tensors = {}


grad_scaler._MultiDeviceReplicator = CpuReplicator


class CpuGradScaler(GradScaler):
    """GradScaler.scale without its CUDA assertion (the single-tensor branch)."""

    def scale(self, outputs):
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._lazy_init_scale_growth_tracker(outputs.device)
        return outputs * self._scale.to(device=outputs.device, non_blocking=True)


def main():
    w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    available = torch.cuda.is_available
    torch.cuda.is_available = lambda: True  # or __init__ disables the scaler
    scaler = CpuGradScaler(init_scale=1024.0, growth_interval=3)
    torch.cuda.is_available = available
    for step in range(20):
        c = torch.tensor([1.0, -2.0, 3.0])
        if step in (2, 3, 9):
            c[1] = float("inf")
        if step == 14:
            c[1] = float("nan")
        opt.zero_grad()
        before = w.detach().clone()
        scaler.scale((w * c).sum()).backward()
        if step % 2 == 0:
            scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        skipped = int(torch.equal(before, w.detach()))
        print(step, repr(scaler.get_scale()), scaler._get_growth_tracker(), skipped,
              *[repr(v) for v in w.detach().tolist()])


if __name__ == "__main__":
    main()
