#!/usr/bin/env python3
"""Draws docs/viewer/scene.png: a stop sign and a wall clock (640 x 480), the project's own test picture for
the viewer's Pipeline panel and its screenshots (the shared sample photos are AGPL data and stay out of the
repository). yolo26n finds both objects in it. Plain Python: writes the PNG with zlib, no imaging library.
Usage: scripts/make-scene.py [OUT.png]"""
import math
import struct
import sys
import zlib

W, H = 640, 480
img = [[(135, 190, 235)] * W for _ in range(H)]
def put(x, y, c):
    if 0 <= x < W and 0 <= y < H: img[y][x] = c
def rect(x0, y0, x1, y1, c):
    for y in range(y0, y1):
        for x in range(x0, x1): put(x, y, c)
# ground
rect(0, 330, W, H, (110, 110, 105))
# stop sign
cx, cy, R = 200, 150, 80
def in_oct(x, y, r):
    dx, dy = abs(x - cx), abs(y - cy)
    return dx <= r and dy <= r and dx + dy <= r * 1.3
rect(cx - 6, cy, cx + 6, 340, (90, 90, 90))
for y in range(cy - R - 2, cy + R + 3):
    for x in range(cx - R - 2, cx + R + 3):
        if in_oct(x, y, R): put(x, y, (240, 240, 240))
        if in_oct(x, y, R - 6): put(x, y, (200, 20, 30))
FONT = {'S': ["111","100","111","001","111"], 'T': ["111","010","010","010","010"],
        'O': ["111","101","101","101","111"], 'P': ["111","101","111","100","100"]}
s = 9
x = cx - 2 * 4 * s + s // 2
for ch in "STOP":
    g = FONT[ch]
    for r, row in enumerate(g):
        for c, v in enumerate(row):
            if v == '1': rect(x + c * s, cy - 22 + r * s, x + c * s + s, cy - 22 + r * s + s, (250, 250, 250))
    x += 4 * s
# clock
kx, ky, kr = 470, 170, 70
for y in range(ky - kr - 8, ky + kr + 8):
    for x in range(kx - kr - 8, kx + kr + 8):
        d = math.hypot(x - kx, y - ky)
        if d <= kr + 6: put(x, y, (40, 40, 40))
        if d <= kr: put(x, y, (250, 250, 245))
for h in range(12):
    a = h * math.pi / 6
    for t in range(int(kr * 0.8), int(kr * 0.95)):
        for w in range(-2, 3):
            put(int(kx + t * math.sin(a) + w * math.cos(a)), int(ky - t * math.cos(a) + w * math.sin(a)), (20, 20, 20))
def hand(a, L, wdt):
    for t in range(0, L):
        for w in range(-wdt, wdt + 1):
            put(int(kx + t * math.sin(a) + w * math.cos(a)), int(ky - t * math.cos(a) + w * math.sin(a)), (20, 20, 20))
hand(math.radians(300), int(kr * 0.5), 3)
hand(math.radians(60), int(kr * 0.75), 2)
raw = b''.join(b'\x00' + bytes(v for p in row for v in p) for row in img)
def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
png = b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', W, H, 8, 2, 0, 0, 0)) + chunk(b'IDAT', zlib.compress(raw, 9)) + chunk(b'IEND', b'')
out = sys.argv[1] if len(sys.argv) > 1 else 'docs/viewer/scene.png'
open(out, 'wb').write(png)
