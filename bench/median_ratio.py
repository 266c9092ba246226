#!/usr/bin/env python3
"""Median of two series of tokens/s and their ratio (the compare_* scripts).

    median_ratio.py LABEL_A LABEL_B A1 A2 ... -- B1 B2 ...
"""
import statistics
import sys

label_a, label_b, *values = sys.argv[1:]
i = values.index("--")
a = [float(x) for x in values[:i]]
b = [float(x) for x in values[i + 1:]]
ma, mb = statistics.median(a), statistics.median(b)
print(f"median: {label_a} {ma:.0f} tok/s, {label_b} {mb:.0f} tok/s, ratio {ma / mb:.2f}x")
