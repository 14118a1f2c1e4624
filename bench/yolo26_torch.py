"""YOLO26 rebuilt in plain PyTorch (no Ultralytics) from a safetensors of the checkpoint (`lab convert yolo26n.pt
OUT.safetensors`): the modules of spec/yolo26.md, shared by the inference comparison (compare_torch.py) and the
training comparison (torch_train_step.py).

- build_model(sd): inference, each Conv's BatchNorm (eps 1e-3) folded into it as Ultralytics' fused model does,
  the one-to-one head and the end-to-end top-k post-process; returns [B, 300, 6] detections.
- build_train_model(sd): training, unfused (Conv2d without bias + BatchNorm2d, to be kept in eval mode: frozen
  statistics), both heads; its parameters are named as the checkpoint's state dict (`model.0.conv.weight`,
  `model.23.one2one_cv3.2.2.bias`, ...) and it returns both heads' raw outputs, the one-to-one head reading
  detached features as Ultralytics' end-to-end head does.
Attention goes through scaled_dot_product_attention in both.
"""
import json
import struct

import torch
import torch.nn.functional as F
from torch import nn

STRIDES = (8, 16, 32)


def load_safetensors(path):
    """({name: float32 tensor}, metadata) of a safetensors file (F16, BF16, F32, F64, I32, I64 entries)."""
    dtypes = {"F16": torch.float16, "F32": torch.float32, "BF16": torch.bfloat16, "F64": torch.float64,
              "I64": torch.int64, "I32": torch.int32}
    with open(path, "rb") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
        data = f.read()
    tensors = {}
    for key, info in header.items():
        if key == "__metadata__" or info["dtype"] not in dtypes:
            continue
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[begin:end]), dtype=dtypes[info["dtype"]])
        tensors[key] = t.reshape(info["shape"]).float()
    return tensors, header.get("__metadata__", {})


def conv2d_like(weight, stride=1, bias=True):
    """An nn.Conv2d shaped as `weight` (padding k // 2); one input channel per group of many is depthwise."""
    c_out, c_in_g, k, _ = weight.shape
    groups = c_out if c_in_g == 1 and c_out > 1 else 1
    return nn.Conv2d(c_in_g * groups, c_out, k, stride, k // 2, groups=groups, bias=bias)


def plain_conv(sd, prefix):
    """A checkpoint Conv2d with its own bias (the heads' last layers), loaded from `prefix.weight/bias`."""
    c = conv2d_like(sd[prefix + ".weight"])
    c.weight.data.copy_(sd[prefix + ".weight"])
    c.bias.data.copy_(sd[prefix + ".bias"])
    return c


class FoldedConv(nn.Module):
    """Inference Conv: Conv2d with the BatchNorm folded in (or a plain Conv2d's weight and bias) (+ SiLU)."""

    def __init__(self, sd, prefix, act=True, stride=1):
        super().__init__()
        if prefix + ".conv.weight" in sd:
            w = sd[prefix + ".conv.weight"]
            g, b = sd[prefix + ".bn.weight"], sd[prefix + ".bn.bias"]
            mean, var = sd[prefix + ".bn.running_mean"], sd[prefix + ".bn.running_var"]
            inv = g / torch.sqrt(var + 1e-3)
            w, bias = w * inv[:, None, None, None], b - mean * inv
        else:
            w, bias = sd[prefix + ".weight"], sd[prefix + ".bias"]
        self.c = conv2d_like(w, stride)
        self.c.weight.data.copy_(w)
        self.c.bias.data.copy_(bias)
        self.act = act

    def forward(self, x):
        y = self.c(x)
        return F.silu(y) if self.act else y


class ConvBN(nn.Module):
    """Training Conv as the checkpoint stores it: `conv` (no bias) -> `bn` (eps 1e-3) (+ SiLU)."""

    def __init__(self, sd, prefix, act=True, stride=1):
        super().__init__()
        w = sd[prefix + ".conv.weight"]
        self.conv = conv2d_like(w, stride, bias=False)
        self.conv.weight.data.copy_(w)
        self.bn = nn.BatchNorm2d(w.shape[0], eps=1e-3)
        for name in ("weight", "bias", "running_mean", "running_var"):
            getattr(self.bn, name).data.copy_(sd[f"{prefix}.bn.{name}"])
        self.act = act

    def forward(self, x):
        y = self.bn(self.conv(x))
        return F.silu(y) if self.act else y


def in_channels(sd, prefix):
    return sd[prefix + ".conv.weight"].shape[1]


class Bottleneck(nn.Module):
    def __init__(self, sd, p, conv):
        super().__init__()
        self.cv1, self.cv2 = conv(sd, p + ".cv1"), conv(sd, p + ".cv2")
        self.add = in_channels(sd, p + ".cv1") == sd[p + ".cv2.conv.weight"].shape[0]

    def forward(self, x):
        y = self.cv2(self.cv1(x))
        return x + y if self.add else y


class C3k(nn.Module):
    def __init__(self, sd, p, conv):
        super().__init__()
        self.cv1, self.cv2, self.cv3 = conv(sd, p + ".cv1"), conv(sd, p + ".cv2"), conv(sd, p + ".cv3")
        n = 0
        while f"{p}.m.{n}.cv1.conv.weight" in sd:
            n += 1
        self.m = nn.Sequential(*[Bottleneck(sd, f"{p}.m.{i}", conv) for i in range(n)])

    def forward(self, x):
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class Attention(nn.Module):
    def __init__(self, sd, p, conv, dim):
        super().__init__()
        self.nh = max(dim // 64, 1)
        self.hd = dim // self.nh
        self.kd = self.hd // 2
        self.qkv, self.proj = conv(sd, p + ".qkv", act=False), conv(sd, p + ".proj", act=False)
        self.pe = conv(sd, p + ".pe", act=False)

    def forward(self, x):
        b, c, h, w = x.shape
        n = h * w
        q, k, v = self.qkv(x).view(b, self.nh, 2 * self.kd + self.hd, n).split([self.kd, self.kd, self.hd], 2)
        # SDPA takes [B, heads, N, D]: queries attend over keys, values the V rows; scale key_dim ** -0.5.
        o = F.scaled_dot_product_attention(q.transpose(-2, -1), k.transpose(-2, -1), v.transpose(-2, -1))
        y = o.transpose(-2, -1).reshape(b, c, h, w) + self.pe(v.reshape(b, c, h, w))
        return self.proj(y)


class PSABlock(nn.Module):
    def __init__(self, sd, p, conv, dim):
        super().__init__()
        self.attn = Attention(sd, p + ".attn", conv, dim)
        self.ffn = nn.Sequential(conv(sd, p + ".ffn.0"), conv(sd, p + ".ffn.1", act=False))

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.ffn(x)


class C3k2(nn.Module):
    def __init__(self, sd, p, conv):
        super().__init__()
        self.cv1, self.cv2 = conv(sd, p + ".cv1"), conv(sd, p + ".cv2")
        c = sd[p + ".cv1.conv.weight"].shape[0] // 2
        blocks = []
        i = 0
        while any(k.startswith(f"{p}.m.{i}.") for k in sd):
            q = f"{p}.m.{i}"
            if q + ".cv3.conv.weight" in sd:
                blocks.append(C3k(sd, q, conv))
            elif q + ".0.cv1.conv.weight" in sd:
                blocks.append(nn.Sequential(Bottleneck(sd, q + ".0", conv), PSABlock(sd, q + ".1", conv, c)))
            else:
                blocks.append(Bottleneck(sd, q, conv))
            i += 1
        self.m = nn.ModuleList(blocks)

    def forward(self, x):
        ys = list(self.cv1(x).chunk(2, 1))
        for m in self.m:
            ys.append(m(ys[-1]))
        return self.cv2(torch.cat(ys, 1))


class SPPF(nn.Module):
    def __init__(self, sd, p, conv):
        super().__init__()
        self.cv1, self.cv2 = conv(sd, p + ".cv1", act=False), conv(sd, p + ".cv2")
        self.add = in_channels(sd, p + ".cv1") == sd[p + ".cv2.conv.weight"].shape[0]

    def forward(self, x):
        ys = [self.cv1(x)]
        for _ in range(3):
            ys.append(F.max_pool2d(ys[-1], 5, 1, 2))
        y = self.cv2(torch.cat(ys, 1))
        return x + y if self.add else y


class C2PSA(nn.Module):
    def __init__(self, sd, p, conv):
        super().__init__()
        self.cv1, self.cv2 = conv(sd, p + ".cv1"), conv(sd, p + ".cv2")
        self.c = sd[p + ".cv1.conv.weight"].shape[0] // 2
        n = 0
        while f"{p}.m.{n}.attn.qkv.conv.weight" in sd:
            n += 1
        self.m = nn.Sequential(*[PSABlock(sd, f"{p}.m.{i}", conv, self.c) for i in range(n)])

    def forward(self, x):
        a, b = self.cv1(x).split((self.c, self.c), 1)
        return self.cv2(torch.cat((a, self.m(b)), 1))


def head_branches(sd, box_prefix, cls_prefix, conv, last):
    """One head's per-level box and class branches (prefixes "model.23.cv2", "model.23.cv3" or the one2one_
    pair): box Conv -> Conv -> last, class [DWConv, Conv] -> [DWConv, Conv] -> last, named as the checkpoint."""
    box, cls = nn.ModuleList(), nn.ModuleList()
    for i in range(len(STRIDES)):
        b, c = f"{box_prefix}.{i}", f"{cls_prefix}.{i}"
        box.append(nn.Sequential(conv(sd, b + ".0"), conv(sd, b + ".1"), last(sd, b + ".2")))
        cls.append(nn.Sequential(nn.Sequential(conv(sd, c + ".0.0"), conv(sd, c + ".0.1")),
                                 nn.Sequential(conv(sd, c + ".1.0"), conv(sd, c + ".1.1")), last(sd, c + ".2")))
    return box, cls


def raw_outputs(box, cls, xs):
    """(boxes [B, 4, A] l,t,r,b in grid units, class logits [B, nc, A]) over the levels P3, P4, P5."""
    b = xs[0].shape[0]
    boxes = torch.cat([m(x).view(b, 4, -1) for m, x in zip(box, xs)], 2)
    scores = torch.cat([m(x).flatten(2) for m, x in zip(cls, xs)], 2)
    return boxes, scores


class InferenceDetect(nn.Module):
    """The one-to-one head (folded convs), box decode and the end-to-end top-k of spec/yolo26.md."""

    def __init__(self, sd, p):
        super().__init__()
        self.one2one_cv2, self.one2one_cv3 = head_branches(
            sd, p + ".one2one_cv2", p + ".one2one_cv3", FoldedConv,
            lambda s, q: FoldedConv(s, q, act=False))
        self.nc = sd[f"{p}.one2one_cv3.0.2.weight"].shape[0]

    def forward(self, xs):
        boxes, scores = raw_outputs(self.one2one_cv2, self.one2one_cv3, xs)
        anchors, strides = [], []
        for x, s in zip(xs, STRIDES):
            h, w = x.shape[2:]
            yy, xx = torch.meshgrid(torch.arange(h, device=x.device), torch.arange(w, device=x.device),
                                    indexing="ij")
            anchors.append(torch.stack((xx.flatten(), yy.flatten())).to(x.dtype) + 0.5)
            strides.append(torch.full((h * w,), s, device=x.device, dtype=x.dtype))
        a, st = torch.cat(anchors, 1), torch.cat(strides)
        xyxy = torch.cat((a - boxes[:, :2], a + boxes[:, 2:]), 1) * st  # [B, 4, A]
        prob = scores.sigmoid().transpose(1, 2)  # [B, A, nc]
        k = min(300, prob.shape[1])
        ori = prob.amax(-1).topk(k, dim=1).indices
        s = prob.gather(1, ori[..., None].expand(-1, -1, self.nc))
        top, flat = s.flatten(1).topk(k, dim=1)
        anchor = ori.gather(1, flat // self.nc)
        box = xyxy.transpose(1, 2).gather(1, anchor[..., None].expand(-1, -1, 4))
        return torch.cat((box, top[..., None], (flat % self.nc)[..., None].to(box.dtype)), -1)


class TrainDetect(nn.Module):
    """Both heads' raw outputs: {"one2many": (boxes, scores), "one2one": (boxes, scores)}; the one-to-one
    branches read detached features, so no gradient flows from them into the network below."""

    def __init__(self, sd, p):
        super().__init__()
        self.cv2, self.cv3 = head_branches(sd, p + ".cv2", p + ".cv3", ConvBN, plain_conv)
        self.one2one_cv2, self.one2one_cv3 = head_branches(sd, p + ".one2one_cv2", p + ".one2one_cv3",
                                                           ConvBN, plain_conv)

    def forward(self, xs):
        return {"one2many": raw_outputs(self.cv2, self.cv3, xs),
                "one2one": raw_outputs(self.one2one_cv2, self.one2one_cv3, [x.detach() for x in xs])}


class Yolo26(nn.Module):
    """Layers 0..22 of the yolo26 config in `model` (upsample and concat have no module) and the head as
    `model.23`, so the state dict's names are the checkpoint's."""

    KINDS = {0: "conv", 1: "conv", 3: "conv", 5: "conv", 7: "conv", 17: "conv", 20: "conv", 9: SPPF, 10: C2PSA}
    CONCAT = {12: 6, 15: 4, 18: 13, 21: 10}  # layer: the earlier layer whose output it appends

    def __init__(self, sd, conv, detect):
        super().__init__()
        self.model = nn.ModuleDict()
        for i in range(23):
            if i in (11, 14) or i in self.CONCAT:
                continue
            p = f"model.{i}"
            kind = self.KINDS.get(i, C3k2)
            self.model[str(i)] = conv(sd, p, stride=2) if kind == "conv" else kind(sd, p, conv)
        self.model["23"] = detect(sd, "model.23")

    def forward(self, x):
        y = {}
        for i in range(23):
            if i in (11, 14):
                x = F.interpolate(x, scale_factor=2.0, mode="nearest")
            elif i in self.CONCAT:
                x = torch.cat((x, y[self.CONCAT[i]]), 1)
            else:
                x = self.model[str(i)](x)
            y[i] = x
        return self.model["23"]([y[16], y[19], y[22]])


def build_model(sd):
    """The inference network: folded convs, the one-to-one head, [B, 300, 6] detections."""
    return Yolo26(sd, FoldedConv, InferenceDetect)


def build_train_model(sd):
    """The training network: Conv + BatchNorm2d (keep it in eval mode: frozen statistics), both heads."""
    return Yolo26(sd, ConvBN, TrainDetect)
