#!/usr/bin/env python3
"""Plots iterative-study's CSV (bench/iterative_study.cc): relative error against the true
phantom per iteration for each method (the semi-convergence curves), log-scaled iterations.

    python3 bench/plot_iterative_study.py study.csv study.png
"""
import csv
import sys
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(csv_path, png_path):
    curves = OrderedDict()
    with open(csv_path) as f:
        for row in csv.DictReader(f):
            curves.setdefault(row["method"], []).append(
                (int(row["iteration"]), float(row["relative_error"])))
    fig, ax = plt.subplots(figsize=(8, 5), dpi=120)
    for method, points in curves.items():
        iterations = [p[0] for p in points]
        errors = [p[1] for p in points]
        best = min(range(len(errors)), key=errors.__getitem__)
        line, = ax.plot(iterations, errors, label=f"{method} (best {errors[best]:.3f} at {iterations[best]})")
        ax.plot([iterations[best]], [errors[best]], "o", color=line.get_color())
    ax.set_xscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("relative error ||x_k - x|| / ||x||")
    ax.set_ylim(0.15, 1.0)
    ax.set_title("Semi-convergence, 256^3, 295 parallel views of 256^2, 5% noise (H100)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png_path)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
