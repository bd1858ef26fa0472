#!/usr/bin/env python3
"""Each output ONNX Runtime wrote (IO/LABEL.ort.NAME.npy) beside kiln's (IO/LABEL.kiln.DEVICE.NAME.npy):
its shape, the largest difference and whether it is within the tolerances.

Usage: compare_npy.py IO LABEL DEVICE RTOL ATOL
"""
import glob
import sys

import numpy as np

io, label, device = sys.argv[1:4]
rtol, atol = float(sys.argv[4]), float(sys.argv[5])
for ort_file in sorted(glob.glob(f"{io}/{label}.ort.*.npy")):
    name = ort_file[len(f"{io}/{label}.ort."):-4]
    want, got = np.load(ort_file), np.load(f"{io}/{label}.kiln.{device}.{name}.npy")
    diff = np.abs(got.astype(np.float64) - want).max() if want.size else 0.0
    ok = got.shape == want.shape and np.allclose(got, want, rtol=rtol, atol=atol)
    print(f"{label} on {device}: output {name} {list(got.shape)}, max |kiln - ORT| {diff:.3g}"
          f" (values up to {np.abs(want).max() if want.size else 0:.3g}): "
          f"{'within' if ok else 'BEYOND'} rtol {rtol:g}, atol {atol:g}")
