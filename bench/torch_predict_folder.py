"""An Ultralytics-style `predict` over a folder of images in plain PyTorch + OpenCV, for compare_torch.py's
`lab detect` row: the same steps Ultralytics' predictor runs per image with its defaults (batch 1, float32,
eager, `imgsz` 640, minimum-rectangle letterbox), written out so they can be timed where Ultralytics is not
installed: cv2.imread (BGR), letterbox (cv2.resize linear + cv2.copyMakeBorder with 114 grey, padding split
in half as Ultralytics rounds it), BGR -> RGB CHW float / 255 on the GPU, the forward, the boxes above `conf`
mapped back to the original image, boxes and labels drawn with cv2, cv2.imwrite of the annotated image.
"""
import os
import time


def letterbox(cv2, image, imgsz, stride=32):
    """(padded image, scale, left, top): the minimum rectangle of `stride` around the scaled image."""
    h0, w0 = image.shape[:2]
    r = min(imgsz / h0, imgsz / w0)
    new_w, new_h = int(round(w0 * r)), int(round(h0 * r))
    dw, dh = (imgsz - new_w) % stride / 2, (imgsz - new_h) % stride / 2
    if (new_w, new_h) != (w0, h0):
        image = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    image = cv2.copyMakeBorder(image, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(114, 114, 114))
    return image, r, left, top


def predict_folder(torch, model, files, out_dir, device, imgsz=640, conf=0.25):
    """Runs the predict loop over `files` (the first one twice: warm-up), writing annotated images to
    out_dir. Returns (images, seconds of wall time, detections kept)."""
    import cv2  # opencv-python(-headless)

    os.makedirs(out_dir, exist_ok=True)

    def one(path):
        original = cv2.imread(path)
        if original is None:
            raise RuntimeError(f"cannot read {path}")
        padded, r, left, top = letterbox(cv2, original, imgsz)
        x = torch.from_numpy(padded[..., ::-1].transpose(2, 0, 1).copy()).to(device)
        x = x.float().div_(255).unsqueeze(0)
        rows = model(x)[0]
        rows = rows[rows[:, 4] > conf].cpu().tolist()
        for x1, y1, x2, y2, score, cls in rows:
            p1 = (int((x1 - left) / r), int((y1 - top) / r))
            p2 = (int((x2 - left) / r), int((y2 - top) / r))
            cv2.rectangle(original, p1, p2, (56, 56, 255), 2)
            cv2.putText(original, f"{int(cls)} {score:.2f}", (p1[0], max(p1[1] - 4, 10)),
                        cv2.FONT_HERSHEY_SIMPLEX, 0.6, (255, 255, 255), 2)
        cv2.imwrite(os.path.join(out_dir, os.path.basename(path)), original)
        return len(rows)

    with torch.inference_mode():
        one(files[0])
        torch.cuda.synchronize()
        start = time.perf_counter()
        kept = sum(one(path) for path in files)
        torch.cuda.synchronize()
        return len(files), time.perf_counter() - start, kept
