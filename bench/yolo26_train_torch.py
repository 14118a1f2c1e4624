"""One YOLO26 training iteration in PyTorch as Ultralytics' trainer runs it, for torch_train_step.py: the
optimizer in Ultralytics' three parameter groups (biases without decay; BatchNorm weights without decay; other
weights with decay 0.0005), SGD with Nesterov momentum 0.937 or AdamW (betas 0.9, 0.999); the iteration =
zero_grad, forward of both heads, E2ELoss, backward, gradient norm clipped at 10, optimizer step, with float16
autocast and a GradScaler under AMP.
"""
import torch
from torch import nn

DECAY = 0.0005


def build_optimizer(model, name, lr):
    """Ultralytics' build_optimizer: group 0 weights with decay, 1 norm weights, 2 biases (no decay)."""
    decay, norm, bias = [], [], []
    for module in model.modules():
        for pname, param in module.named_parameters(recurse=False):
            if "bias" in pname:
                bias.append(param)
            elif isinstance(module, nn.BatchNorm2d):
                norm.append(param)
            else:
                decay.append(param)
    if name == "AdamW":
        optimizer = torch.optim.AdamW(bias, lr=lr, betas=(0.9, 0.999), weight_decay=0.0)
    elif name == "SGD":
        optimizer = torch.optim.SGD(bias, lr=lr, momentum=0.937, nesterov=True)
    else:
        raise ValueError(f"optimizer {name}: SGD or AdamW")
    optimizer.add_param_group({"params": decay, "weight_decay": DECAY})
    optimizer.add_param_group({"params": norm, "weight_decay": 0.0})
    return optimizer


class TrainStep:
    """step(images, gt_cls, gt_xyxy, mask_gt) -> the loss before the step (detached). `forward` is
    (images, gt_cls, gt_xyxy, mask_gt) -> (total, items): the model and the loss, eager or compiled."""

    def __init__(self, model, forward, optimizer, lr, amp):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.forward = forward
        self.optimizer = build_optimizer(model, optimizer, lr)
        self.amp = amp
        self.scaler = torch.amp.GradScaler("cuda", enabled=amp)

    def __call__(self, images, gt_cls, gt_xyxy, mask_gt):
        self.optimizer.zero_grad(set_to_none=True)
        with torch.autocast(images.device.type, dtype=torch.float16, enabled=self.amp):
            total, _ = self.forward(images, gt_cls, gt_xyxy, mask_gt)
        self.scaler.scale(total).backward()
        self.scaler.unscale_(self.optimizer)
        nn.utils.clip_grad_norm_(self.params, max_norm=10.0)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return total.detach()
