#!/usr/bin/env python3
"""Reference detection metrics for tests/test_metrics_reference.cpp and the `lab val` end-to-end test.

usage: reference_metrics.py GT.json DETECTIONS.json
GT.json is a COCO ground-truth document (images, annotations with bbox [x, y, w, h], area, iscrowd 0,
categories), DETECTIONS.json a COCO results list (image_id, category_id, bbox, score). Prints one JSON object:
  "coco": stats[0] and stats[1] of pycocotools' COCOeval (IoU 0.50:0.05:0.95, 101 recall points, maxDets 100,
          area all), i.e. mAP50-95 and mAP50;
  "ultralytics": precision, recall, mAP50, mAP50-95 overall and per class, by a numpy transcription of the
          formulas of Ultralytics' validator (match_predictions, ap_per_class, compute_ap, smooth), written
          independently of the C++ code it checks.
"""
import contextlib
import json
import sys

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)
EPS = 1e-16


def coco_map(gt_path, dt_path):
    with contextlib.redirect_stdout(sys.stderr):  # COCO and COCOeval print progress
        gt = COCO(gt_path)
        evaluator = COCOeval(gt, gt.loadRes(dt_path), "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        evaluator.summarize()
    return {"map50_95": float(evaluator.stats[0]), "map50": float(evaluator.stats[1])}


def box_iou(truths, predictions, eps=1e-7):
    """IoU of xyxy boxes, [len(truths), len(predictions)]."""
    t1, t2 = truths[:, None, :2], truths[:, None, 2:]
    p1, p2 = predictions[None, :, :2], predictions[None, :, 2:]
    inter = (np.minimum(t2, p2) - np.maximum(t1, p1)).clip(0).prod(2)
    return inter / ((t2 - t1).prod(2) + (p2 - p1).prod(2) - inter + eps)


def match_predictions(pred_classes, true_classes, iou):
    correct = np.zeros((pred_classes.shape[0], len(IOU_THRESHOLDS)), dtype=bool)
    iou = iou * (true_classes[:, None] == pred_classes)
    for i, threshold in enumerate(IOU_THRESHOLDS):
        matches = np.array(np.nonzero(iou >= threshold)).T  # (truth, prediction) pairs
        if matches.shape[0] > 1:
            matches = matches[iou[matches[:, 0], matches[:, 1]].argsort()[::-1]]
            matches = matches[np.unique(matches[:, 1], return_index=True)[1]]
            matches = matches[np.unique(matches[:, 0], return_index=True)[1]]
        if matches.shape[0]:
            correct[matches[:, 1], i] = True
    return correct


def compute_ap(recall, precision):
    mrec = np.concatenate(([0.0], recall, [1.0]))
    mpre = np.flip(np.maximum.accumulate(np.flip(np.concatenate(([1.0], precision, [0.0])))))
    x = np.linspace(0, 1, 101)
    return float(np.trapezoid(np.interp(x, mrec, mpre), x))


def smooth(y, fraction):
    nf = round(len(y) * fraction * 2) // 2 + 1
    ends = np.ones(nf // 2)
    return np.convolve(np.concatenate((ends * y[0], y, ends * y[-1])), np.ones(nf) / nf, mode="valid")


def ultralytics_metrics(gt_path, dt_path):
    gt, dt = json.load(open(gt_path)), json.load(open(dt_path))
    xyxy = lambda b: [b[0], b[1], b[0] + b[2], b[1] + b[3]]
    tp, conf, pred_cls, target_cls = [], [], [], []
    for image in gt["images"]:
        truths = [a for a in gt["annotations"] if a["image_id"] == image["id"]]
        preds = [d for d in dt if d["image_id"] == image["id"]]
        preds = [preds[i] for i in np.argsort([-d["score"] for d in preds], kind="stable")]
        t_cls = np.array([a["category_id"] for a in truths], dtype=float)
        p_cls = np.array([d["category_id"] for d in preds], dtype=float)
        correct = np.zeros((len(preds), len(IOU_THRESHOLDS)), dtype=bool)
        if truths and preds:
            iou = box_iou(np.array([xyxy(a["bbox"]) for a in truths]), np.array([xyxy(d["bbox"]) for d in preds]))
            correct = match_predictions(p_cls, t_cls, iou)
        tp.append(correct)
        conf.append(np.array([d["score"] for d in preds], dtype=float))
        pred_cls.append(p_cls)
        target_cls.append(t_cls)
    tp, conf, pred_cls, target_cls = (np.concatenate(v) for v in (tp, conf, pred_cls, target_cls))
    order = np.argsort(-conf, kind="stable")
    tp, conf, pred_cls = tp[order], conf[order], pred_cls[order]
    classes, counts = np.unique(target_cls, return_counts=True)
    px = np.linspace(0, 1, 1000)
    ap = np.zeros((len(classes), len(IOU_THRESHOLDS)))
    p_curve, r_curve = np.zeros((len(classes), 1000)), np.zeros((len(classes), 1000))
    for ci, c in enumerate(classes):
        mine = pred_cls == c
        if mine.sum() == 0:
            continue
        tpc, fpc = tp[mine].cumsum(0), (1 - tp[mine]).cumsum(0)
        recall, precision = tpc / (counts[ci] + EPS), tpc / (tpc + fpc)
        r_curve[ci] = np.interp(-px, -conf[mine], recall[:, 0], left=0)
        p_curve[ci] = np.interp(-px, -conf[mine], precision[:, 0], left=1)
        for j in range(len(IOU_THRESHOLDS)):
            ap[ci, j] = compute_ap(recall[:, j], precision[:, j])
    f1 = 2 * p_curve * r_curve / (p_curve + r_curve + EPS)
    best = smooth(f1.mean(0), 0.1).argmax()
    p, r = p_curve[:, best], r_curve[:, best]
    return {
        "precision": float(p.mean()), "recall": float(r.mean()),
        "map50": float(ap[:, 0].mean()), "map50_95": float(ap.mean()),
        "classes": [{"category_id": int(c), "precision": float(p[i]), "recall": float(r[i]),
                     "map50": float(ap[i, 0]), "map50_95": float(ap[i].mean())} for i, c in enumerate(classes)],
    }


def main():
    gt_path, dt_path = sys.argv[1], sys.argv[2]
    print(json.dumps({"coco": coco_map(gt_path, dt_path), "ultralytics": ultralytics_metrics(gt_path, dt_path)}))


if __name__ == "__main__":
    main()
