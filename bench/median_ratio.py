#!/usr/bin/env python3
"""Median of two series of rates and their ratio (the compare_* scripts).

    median_ratio.py [--unit tok/s] LABEL_A LABEL_B A1 A2 ... -- B1 B2 ...
"""
import statistics
import sys

args = sys.argv[1:]
unit = "tok/s"
if args[:1] == ["--unit"]:
    unit, args = args[1], args[2:]
label_a, label_b, *values = args
i = values.index("--")
a = [float(x) for x in values[:i]]
b = [float(x) for x in values[i + 1:]]
ma, mb = statistics.median(a), statistics.median(b)
digits = 0 if min(ma, mb) >= 100 else 2
print(f"median: {label_a} {ma:.{digits}f} {unit}, {label_b} {mb:.{digits}f} {unit}, ratio {ma / mb:.2f}x")
