"""The YOLO26 training loss (Ultralytics' E2ELoss, spec/yolo26.md "Loss") in PyTorch, for torch_train_step.py.

Both heads: one-to-many with the task-aligned assigner's top-k 10, one-to-one with top-k 7 then top-k2 1; weights
0.8 / 0.2 (epoch 0); gains box 7.5, cls 0.5, L1 1.5; the total times the batch size. The assigner (alpha 0.5,
beta 6, STAL: gt sides under 8 px widened to 16 px for the candidate test) follows Ultralytics' tensor steps,
under no_grad. Everything is dense on the device over [B, G, A] (gts padded to G per image, `mask_gt` marking
real ones) and [B, A]: no Python loop over images, anchors or boxes, no boolean indexing and no host
synchronisation (the box terms run over every anchor with background anchors as unit boxes of weight 0, as
`Yolo26Loss`'s device path does). Head outputs are taken in float32 (under AMP too). CIoU's alpha is a constant
for the gradient, as in Ultralytics. The class term is PyTorch's BCEWithLogits (whose float32 rounding the
golden carries, docs/loss.md).
"""
import math

import torch
import torch.nn.functional as F

from yolo26_torch import STRIDES

EPS_CIOU = 1e-7
EPS_ASSIGN = 1e-9


def anchor_grid(height, width, device):
    """(anchor centres [A, 2] in grid units, strides [A, 1]) for levels P3, P4, P5, row-major per level."""
    points, strides = [], []
    for s in STRIDES:
        h, w = height // s, width // s
        yy, xx = torch.meshgrid(torch.arange(h, device=device, dtype=torch.float32) + 0.5,
                                torch.arange(w, device=device, dtype=torch.float32) + 0.5, indexing="ij")
        points.append(torch.stack((xx, yy), -1).view(-1, 2))
        strides.append(torch.full((h * w, 1), float(s), device=device))
    return torch.cat(points), torch.cat(strides)


def ciou(b1, b2):
    """CIoU of xyxy boxes [..., 4] (spec/yolo26.md, eps 1e-7); alpha under no_grad as Ultralytics' bbox_iou."""
    b1x1, b1y1, b1x2, b1y2 = b1.unbind(-1)
    b2x1, b2y1, b2x2, b2y2 = b2.unbind(-1)
    w1, h1 = b1x2 - b1x1, b1y2 - b1y1 + EPS_CIOU
    w2, h2 = b2x2 - b2x1, b2y2 - b2y1 + EPS_CIOU
    inter = (b1x2.minimum(b2x2) - b1x1.maximum(b2x1)).clamp(0) * (b1y2.minimum(b2y2) - b1y1.maximum(b2y1)).clamp(0)
    iou = inter / (w1 * h1 + w2 * h2 - inter + EPS_CIOU)
    cw = b1x2.maximum(b2x2) - b1x1.minimum(b2x1)
    ch = b1y2.maximum(b2y2) - b1y1.minimum(b2y1)
    c2 = cw.pow(2) + ch.pow(2) + EPS_CIOU
    rho2 = ((b2x1 + b2x2 - b1x1 - b1x2).pow(2) + (b2y1 + b2y2 - b1y1 - b1y2).pow(2)) / 4
    v = (4 / math.pi ** 2) * ((w2 / h2).atan() - (w1 / h1).atan()).pow(2)
    with torch.no_grad():
        alpha = v / (v - iou + (1 + EPS_CIOU))
    return iou - (rho2 / c2 + v * alpha)


@torch.no_grad()
def assign(scores, pred_px, anchor_px, gt_cls, gt_xyxy, mask_gt, topk, topk2):
    """Ultralytics' TaskAlignedAssigner over a batch. scores [B, A, nc] (sigmoid), pred_px [B, A, 4] xyxy
    pixels, anchor_px [A, 2], gt_cls [B, G] (int64), gt_xyxy [B, G, 4] pixels, mask_gt [B, G] bool.
    Returns (gt index [B, A], foreground [B, A] bool, target score [B, A] of the gt's class)."""
    G = gt_cls.shape[1]
    # select_candidates_in_gts with STAL: a real gt's side under stride 8 becomes 16 for this test only.
    centre, size = (gt_xyxy[..., :2] + gt_xyxy[..., 2:]) / 2, gt_xyxy[..., 2:] - gt_xyxy[..., :2]
    size = torch.where((size < STRIDES[0]) & mask_gt[..., None], float(STRIDES[1]), size)
    lt, rb = centre - size / 2, centre + size / 2
    deltas = torch.cat((anchor_px - lt[:, :, None], rb[:, :, None] - anchor_px), -1)  # [B, G, A, 4]
    mask = (deltas.amin(-1) > EPS_ASSIGN) & mask_gt[..., None]  # [B, G, A]
    # get_box_metrics: CIoU(gt, pred) clamped at 0 and the predicted score of the gt's class, where masked.
    overlaps = torch.where(mask, ciou(gt_xyxy[:, :, None], pred_px[:, None]).clamp(0), 0.0)
    cls_scores = scores.gather(2, gt_cls[:, None].expand(-1, scores.shape[1], -1)).transpose(1, 2)
    align = torch.where(mask, cls_scores, 0.0).pow(0.5) * overlaps.pow(6.0)
    # select_topk_candidates: each real gt's top-k anchors by alignment, kept where they are candidates.
    top = torch.zeros_like(align).scatter_(-1, align.topk(topk, dim=-1).indices, 1.0)
    mask_pos = top * mask
    # select_highest_overlaps: an anchor claimed twice goes to the gt of highest overlap (first on ties).
    multi = mask_pos.sum(1, keepdim=True) > 1
    best = F.one_hot(overlaps.argmax(1), G).transpose(1, 2).to(mask_pos.dtype)
    mask_pos = torch.where(multi, best, mask_pos)
    if topk2 != topk:
        keep = torch.zeros_like(mask_pos).scatter_(-1, (align * mask_pos).topk(topk2, dim=-1).indices, 1.0)
        mask_pos = mask_pos * keep
    fg = mask_pos.sum(1) > 0
    gt_index = mask_pos.argmax(1)
    # Soft targets: align * (max overlap of the gt) / (max align of the gt + eps) over its final positives.
    align = align * mask_pos
    max_align = align.amax(-1, keepdim=True)
    max_overlap = (overlaps * mask_pos).amax(-1, keepdim=True)
    score = (align * max_overlap / (max_align + EPS_ASSIGN)).amax(1)
    return gt_index, fg, score


class E2ELoss:
    """loss(heads, gt_cls, gt_xyxy, mask_gt) -> (total = B * (0.8 o2m + 0.2 o2o) for backward, per-head items
    {"one2many": [box, cls, l1], "one2one": [...]} after the gains, per image as Ultralytics' loss items).
    The anchors and the L1 scale are made once for the input size imgsz = (H, W) in pixels."""

    TOPK = {"one2many": (10, 10), "one2one": (7, 1)}
    WEIGHTS = {"one2many": 0.8, "one2one": 0.2}  # epoch 0
    GAINS = (7.5, 0.5, 1.5)  # box, cls, l1

    def __init__(self, imgsz, device):
        height, width = imgsz
        self.anchors, self.strides = anchor_grid(height, width, device)
        # L1 on distances: x terms over the width, y terms over the height, in pixels.
        self.l1_scale = self.strides / torch.tensor([width, height, width, height], device=device)
        self.unit_box = torch.tensor([0.0, 0.0, 1.0, 1.0], device=device)
        self.gains = torch.tensor(self.GAINS, device=device)

    def __call__(self, heads, gt_cls, gt_xyxy, mask_gt):
        items = {name: self.head_loss(*heads[name], gt_cls, gt_xyxy, mask_gt, *self.TOPK[name])
                 for name in self.TOPK}
        total = sum(self.WEIGHTS[name] * items[name].sum() for name in items) * gt_cls.shape[0]
        return total, items

    def head_loss(self, boxes, logits, gt_cls, gt_xyxy, mask_gt, topk, topk2):
        """One head's [box, cls, l1]. boxes [B, 4, A] (l, t, r, b in grid units), logits [B, nc, A]."""
        anchors, strides = self.anchors, self.strides
        dist = boxes.float().permute(0, 2, 1)  # [B, A, 4]
        logits = logits.float().permute(0, 2, 1)  # [B, A, nc]
        pred = torch.cat((anchors - dist[..., :2], anchors + dist[..., 2:]), -1)  # xyxy, grid units
        gt_index, fg, score = assign(logits.detach().sigmoid(), pred.detach() * strides, anchors * strides,
                                     gt_cls, gt_xyxy, mask_gt, topk, topk2)
        weight = score * fg  # the positives' target scores, 0 on background
        target_scores = F.one_hot(gt_cls.gather(1, gt_index), logits.shape[-1]) * weight[..., None]
        tss = target_scores.sum().clamp(min=1)
        cls = F.binary_cross_entropy_with_logits(logits, target_scores, reduction="none").sum() / tss
        # Box terms over every anchor, background anchors as unit boxes (weight 0: no loss, no gradient).
        fg4 = fg[..., None]
        target = torch.where(fg4, gt_xyxy.gather(1, gt_index[..., None].expand(-1, -1, 4)) / strides,
                             self.unit_box)  # grid units
        box = ((1 - ciou(torch.where(fg4, pred, self.unit_box), target)) * weight).sum() / tss
        # L1 on distances (reg_max 1): |pred - target| * stride / image size, mean of the 4.
        target_ltrb = torch.cat((anchors - target[..., :2], target[..., 2:] - anchors), -1)
        l1 = (((dist - target_ltrb).abs() * self.l1_scale).mean(-1) * weight).sum() / tss
        return torch.stack((box, cls, l1)) * self.gains
