"""Sums an ncu CSV (``ncu --metrics gpu__time_duration.sum --csv ...``) by kernel name.

Usage: python3 bench/kernel_times.py ncu.csv
"""
import csv
import sys
from collections import defaultdict

total, count = defaultdict(float), defaultdict(int)
with open(sys.argv[1]) as f:
    lines = [l for l in f if l.startswith('"')]
for row in csv.DictReader(lines):
    if row.get("Metric Name") != "gpu__time_duration.sum":
        continue
    name = row["Kernel Name"].split("(")[0]
    scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3}.get(row["Metric Unit"], 1.0)
    total[name] += float(row["Metric Value"].replace(",", "")) * scale
    count[name] += 1
all_us = sum(total.values())
print(f"{'kernel':<28} {'launches':>8} {'total us':>10} {'share':>6}")
for name in sorted(total, key=total.get, reverse=True):
    print(f"{name:<28} {count[name]:>8} {total[name]:>10.0f} {total[name] / all_us:>6.1%}")
print(f"{'all':<28} {sum(count.values()):>8} {all_us:>10.0f}")
