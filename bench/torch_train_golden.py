"""The checks torch_train_step.py runs before it times anything: the PyTorch training port (yolo26_torch's
build_train_model, yolo26_loss_torch's E2ELoss, yolo26_train_torch's optimizer) on bus.jpg's golden input
(`bus640_golden_0.safetensors` key `input`) with the five labels in the 640 frame as `bus_loss.json` gives them,
float32 with TF32 off, against Ultralytics 8.4.104's numbers:
- the same 366 parameter names and shapes as `bus_train_golden.json`;
- the six loss components and the total equal `bus_loss.json`'s within 1e-3 relative;
- every parameter's gradient L2 norm and `grad_norm_total` equal `bus_train_golden.json`'s within 1e-2 relative,
  and every gradient within 1e-2 relative L2 of `bus_train_golden.safetensors` (bf16);
- the loss after each of three AdamW and three SGD steps (the golden's learning rates, Ultralytics' groups,
  clip 10) within 2 % of the golden's, the bound issue 20 sets for our engine.
"""
import copy
import json
import os

import torch

from yolo26_loss_torch import E2ELoss
from yolo26_torch import build_train_model, load_safetensors
from yolo26_train_torch import TrainStep

LOSS_TOL, NORM_TOL, GRAD_TOL, STEPS_TOL = 1e-3, 1e-2, 1e-2, 0.02
SHOWN = ("model.0.conv.weight", "model.2.cv1.bn.weight", "model.10.m.0.attn.qkv.conv.weight",
         "model.22.m.0.1.attn.proj.conv.weight", "model.23.cv2.2.2.weight", "model.23.cv3.2.2.bias",
         "model.23.one2one_cv3.0.2.weight")


def bus_labels(loss_json, imgsz, device):
    """(classes [1, G], xyxy pixels [1, G, 4], mask [1, G]) from bus_loss.json's `labels_normalised_640`."""
    rows = torch.tensor(loss_json["labels_normalised_640"], dtype=torch.float64)
    centre, size = rows[:, 1:3] * imgsz, rows[:, 3:5] * imgsz
    xyxy = torch.cat((centre - size / 2, centre + size / 2), 1).float()
    cls = rows[:, 0].long()
    return cls[None].to(device), xyxy[None].to(device), torch.ones_like(cls, dtype=torch.bool)[None].to(device)


def relative(ours, golden):
    return abs(ours - golden) / max(abs(golden), 1e-12)


class Verdict:
    """Collects checks; each prints one line with PASS / FAIL."""

    def __init__(self):
        self.failed = 0

    def check(self, what, ours, golden, error, tol):
        ok = error <= tol
        self.failed += not ok
        print(f"  {'PASS' if ok else 'FAIL'} {what}: {ours:.8g} vs golden {golden:.8g} (error {error:.2e}, "
              f"tol {tol:g})")

    def bound(self, what, value, tol):
        ok = value <= tol
        self.failed += not ok
        print(f"  {'PASS' if ok else 'FAIL'} {what}: {value:.2e} (tol {tol:g})")


def check_structure(model, golden, verdict):
    ours = {name: list(p.shape) for name, p in model.named_parameters()}
    theirs = {name: t["shape"] for name, t in golden["tensors"].items()}
    differ = sorted(set(ours) ^ set(theirs)) + sorted(n for n in set(ours) & set(theirs) if ours[n] != theirs[n])
    ok = not differ
    verdict.failed += not ok
    print(f"  {'PASS' if ok else 'FAIL'} parameters: {len(ours)} named tensors, golden {len(theirs)}"
          + ("" if ok else f"; differing names or shapes: {differ[:5]}"))


def check_gradients(model, golden, golden_grads, verdict):
    """Per-tensor norms (the SHOWN ones printed, all gated), the total norm, and relative L2 to the bf16 grads."""
    worst_norm, worst_l2, total = (0.0, ""), (0.0, ""), 0.0
    for name, p in model.named_parameters():
        g = p.grad.double() if p.grad is not None else torch.zeros_like(p, dtype=torch.float64)
        norm = g.norm().item()
        total += norm * norm
        ref = golden["tensors"][name]["l2"]
        if name in SHOWN:
            verdict.check(f"|d total / d {name}|", norm, ref, relative(norm, ref), NORM_TOL)
        else:
            verdict.failed += relative(norm, ref) > NORM_TOL
        worst_norm = max(worst_norm, (relative(norm, ref), name))
        bf16 = golden_grads["grad." + name].double().to(g.device)
        worst_l2 = max(worst_l2, ((g - bf16).norm().item() / max(bf16.norm().item(), 1e-30), name))
    print(f"  {'PASS' if worst_norm[0] <= NORM_TOL else 'FAIL'} all {len(golden['tensors'])} gradient norms: "
          f"worst relative error {worst_norm[0]:.2e} ({worst_norm[1]}, tol {NORM_TOL:g})")
    verdict.bound(f"relative L2 to the bf16 gradients, worst of {len(golden['tensors'])} ({worst_l2[1]})",
                  worst_l2[0], GRAD_TOL)
    verdict.check("grad_norm_total", total ** 0.5, golden["grad_norm_total"],
                  relative(total ** 0.5, golden["grad_norm_total"]), NORM_TOL)


def check_optimizer_steps(model, forward, batch, golden, verdict):
    """Three steps of AdamW and of SGD (the golden's learning rates) on copies of the model."""
    for name, run in golden["optimizer_steps"].items():
        trained = copy.deepcopy(model)
        step = TrainStep(trained, lambda *b: forward(trained, *b), name, run["lr"], amp=False)
        losses = [step(*batch).item() for _ in range(3)]
        with torch.no_grad():
            losses.append(forward(trained, *batch)[0].item())
        ref = run["loss_before_and_after_each_step"]
        worst = max(relative(a, b) for a, b in zip(losses, ref))
        ok = worst <= STEPS_TOL
        verdict.failed += not ok
        print(f"  {'PASS' if ok else 'FAIL'} {name} lr {run['lr']:g}, loss before and after 3 steps: "
              f"{', '.join(f'{x:.5g}' for x in losses)}; golden {', '.join(f'{x:.5g}' for x in ref)} "
              f"(worst {worst:.2%}, tol {STEPS_TOL:.0%})")


def check_against_goldens(sd, goldens, device):
    """Runs every check, printing one line each; returns True when all gated ones pass."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    golden = json.load(open(os.path.join(goldens, "bus_train_golden.json")))
    loss_json = json.load(open(os.path.join(goldens, "bus_loss.json")))
    image = load_safetensors(os.path.join(goldens, "bus640_golden_0.safetensors"))[0]["input"].to(device)
    golden_grads = load_safetensors(os.path.join(goldens, "bus_train_golden.safetensors"))[0]
    model = build_train_model(sd).to(device).eval()
    loss = E2ELoss(tuple(image.shape[2:]), device)
    batch = (image, *bus_labels(loss_json, image.shape[3], device))

    def forward(m, images, *labels):
        return loss(m(images), *labels)

    print("checks on bus.jpg against Ultralytics 8.4.104 (float32, TF32 off):")
    verdict = Verdict()
    check_structure(model, golden, verdict)
    total, items = forward(model, *batch)
    total.backward()
    for head in ("one2many", "one2one"):
        for value, key in zip(items[head].tolist(), ("box_loss", "cls_loss", "l1_loss")):
            ref = loss_json[head][key]
            verdict.check(f"{head} {key}", value, ref, relative(value, ref), LOSS_TOL)
    verdict.check("total", total.item(), loss_json["total"], relative(total.item(), loss_json["total"]), LOSS_TOL)
    if not verdict.failed:
        check_gradients(model, golden, golden_grads, verdict)
    model.zero_grad(set_to_none=True)
    check_optimizer_steps(model, forward, batch, golden, verdict)
    print(f"checks: {'all passed' if not verdict.failed else f'{verdict.failed} failed'}")
    return not verdict.failed
