# SPDX-License-Identifier: MIT
"""Writes the committed NumPy fixtures of tests/data/numpy with the installed NumPy (1.24 when committed).
Usage: make_numpy_fixtures.py OUTPUT_DIR"""
import os
import sys

import numpy as np

out = sys.argv[1]
np.save(os.path.join(out, "f4_c.npy"), np.arange(12, dtype="<f4").reshape(3, 4) / 4)
np.save(os.path.join(out, "i8_fortran.npy"), np.asfortranarray(np.arange(6, dtype="<i8").reshape(2, 3) - 3))
np.save(os.path.join(out, "f8_big.npy"), np.array([1.5, -2.0, 1e300], dtype=">f8"))
np.save(os.path.join(out, "c8_big.npy"), np.array([1 + 2j, -3.5 - 0.25j], dtype=">c8"))
np.save(os.path.join(out, "bool_0d.npy"), np.bool_(True))
np.save(os.path.join(out, "u2_empty.npy"), np.zeros((2, 0), dtype="<u2"))
for version in [(2, 0), (3, 0)]:
    with open(os.path.join(out, "i2_v%d.npy" % version[0]), "wb") as f:
        np.lib.format.write_array(f, np.array([1, -2, 300], dtype="<i2"), version=version)
np.save(os.path.join(out, "object.npy"), np.array([None, 1], dtype=object), allow_pickle=True)
np.save(os.path.join(out, "structured.npy"), np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]))
np.save(os.path.join(out, "unicode.npy"), np.array(["ab", "c"]))
arrays = {"w": np.arange(6, dtype="<f4").reshape(2, 3), "b": np.array([1, 2], dtype="<i8"), "s": np.float64(0.5)}
np.savez(os.path.join(out, "stored.npz"), **arrays)
np.savez_compressed(os.path.join(out, "deflated.npz"), **arrays)
