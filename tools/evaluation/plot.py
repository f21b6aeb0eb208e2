#!/usr/bin/python3
"""Draws the paper's evaluation figures from a results folder written by scripts/evaluate.sh.

Usage: MPLBACKEND=Agg /usr/bin/python3 tools/evaluation/plot.py --results DIR --out DIR

Writes fig3 ... fig14 as SVG and PNG and table3.md into --out. Every value is read through
fields.Record, so each field a figure reads is declared in fields.json (which the CI test checks
against real bench output). Each panel says whether it is PREDICTED (planner, predictor or
simulator on analytic or Metis profiles) or MEASURED (this CPU; heterogeneity EMULATED).
Needs Debian's python3-matplotlib.
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fields  # noqa: E402
import table3  # noqa: E402

FAMILIES = [("910b2-910b4", "910B2/910B4"), ("a100-rtx3090", "A100/RTX3090")]
MODEL = {"gpt3-350m": "350M", "gpt3-1.3b": "1.3B", "gpt3-2.6b": "2.6B", "gpt3-6.7b": "6.7B",
         "gpt3-13b": "13B", "gpt3-70b": "70B"}
STYLE = {  # method: (legend label, colour)
    "eth": ("ETH (HPP)", "#1f77b4"),
    "layer": ("layer-balanced (Metis/HexiScale-style)", "#ff7f0e"),
    "layer_unlimited": ("layer-balanced, unlimited memory", "#ffbb78"),
    "uniform": ("uniform (Megatron-style)", "#8c8c8c"),
    "pure": ("TypeSplit-HPP (ETH's pure family)", "#2ca02c"),
    "metis": ("Metis (its recorded run)", "#d62728"),
    "single": ("one process (reference)", "#000000"),
}
MODES = [("block", "block-wise", "#1f77b4"), ("tensor", "tensor-wise", "#9467bd"),
         ("device", "device-wise (padded)", "#d62728")]
PREDICTED = "PREDICTED (analytic profile)"
MEASURED = "MEASURED on this CPU"


def model_label(name):
    return MODEL.get(name, name)


class Figures:
    def __init__(self, results, out):
        self.results, self.out = results, out
        self.machine = fields.load(results, "machine.json")
        self.pb = fields.load(results, "plan_bench.json")
        self.sb = fields.load(results, "sim_bench.json")
        self.rb = fields.load(results, "runtime_bench.json")
        self.runs = fields.load(results, "runs/index.json")

    def machine_text(self):
        m = self.machine
        lb, la = m["load_before"], m["load_after"]
        return (f"Machine: {m['cpu_model']}, {m['cores']} cores, load (1/5/15 min) "
                f"{lb[0]:.1f}/{lb[1]:.1f}/{lb[2]:.1f} before, {la[0]:.1f}/{la[1]:.1f}/{la[2]:.1f}"
                f" after{' (QUICK run: tiny cases)' if m['quick'] else ''}.")

    def save(self, fig, name, title, counterpart, note):
        """Title, layout above a footer (paper counterpart, note, machine), SVG and PNG."""
        fig.suptitle(title, fontsize=11)
        fig.tight_layout(rect=(0, 0.45 / fig.get_figheight(), 1, 1))
        fig.text(0.005, 0.004, f"Paper counterpart: {counterpart}. {note}\n{self.machine_text()}",
                 fontsize=7, va="bottom", ha="left", color="#444444")
        for ext in ("svg", "png"):
            fig.savefig(os.path.join(self.out, f"{name}.{ext}"), dpi=110)
        plt.close(fig)
        print(f"wrote {name}.svg/.png")

    def scenarios(self, family):
        return [r for r in self.pb.rows("scenarios[]") if r["cluster_family"] == family]


def bars(ax, groups, series, width=0.8, log=False, labels_on=None):
    """Grouped bars: series = [(label, colour, values)], values aligned with groups (None: no
    bar). labels_on: a list of per-series text lists drawn above the bars."""
    x = np.arange(len(groups))
    w = width / len(series)
    for i, (label, colour, values) in enumerate(series):
        xs = x - width / 2 + w * (i + 0.5)
        ys = [v if v is not None else 0 for v in values]
        rects = ax.bar(xs, ys, w, label=label, color=colour)
        if labels_on and labels_on[i]:
            for rect, text in zip(rects, labels_on[i]):
                if text:
                    ax.annotate(text, (rect.get_x() + rect.get_width() / 2, rect.get_height()),
                                ha="center", va="bottom", fontsize=6, rotation=90,
                                xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(x, groups)
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    if labels_on:  # room above the tallest bar for its label
        top = max((v for _, _, vs in series for v in vs if v), default=1)
        if log:
            ax.set_ylim(top=top * 8)
        else:
            ax.set_ylim(top=top * 1.3)


def fig3(F):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    for ax, (family, label) in zip(axes, FAMILIES):
        rows = F.scenarios(family)
        groups = [f"{model_label(r['model'])}\n{r['devices']} dev" for r in rows]
        series = [(STYLE[k][0] + (", real memory" if k == "layer" else ""), STYLE[k][1],
                   [r[f"methods.{k}.latency_ratio"] for r in rows])
                  for k in ("layer", "layer_unlimited", "eth")]
        bars(ax, groups, series)
        ax.axhline(1.0, ls="--", color="k", lw=1, label="ideal balance (1.0)")
        ax.set_ylabel("max / min device busy time per iteration (ratio)")
        ax.set_title(f"{label} clusters of Table 2: {PREDICTED}", fontsize=10)
    axes[0].legend(fontsize=7, loc="upper left")
    F.save(fig, "fig3-latency-gap",
           "Fig. 3: the latency gap between the busiest and the idlest device, GPT-3 350M-70B",
           "Fig. 3 (HexiScale, Metis, Metis with unlimited memory, "
           "ideal)", "Busy time = forward + backward of all the device's micro-batches, "
           "from the predictor on the analytic profile; one plan per bar.")


def fig9(F):
    fig, axes = plt.subplots(2, 3, figsize=(16, 8.4))
    for col, (family, label) in enumerate(FAMILIES):
        rows = F.scenarios(family)
        groups = [f"{model_label(r['model'])}\n{r['devices']} dev" for r in rows]
        ms = {k: [r[f"methods.{k}.iteration_ms"] for r in rows] for k in ("eth", "layer",
                                                                        "uniform")}
        speedup = [[None] * len(rows)] + [
            [f"x{v / e:.2f}" if v and e else "" for v, e in zip(ms[k], ms["eth"])]
            for k in ("layer", "uniform")]
        bars(axes[0, col], groups,
             [(STYLE[k][0], STYLE[k][1], [v / 1e3 if v else None for v in ms[k]])
              for k in ("eth", "layer", "uniform")], labels_on=speedup)
        axes[0, col].set_ylabel("iteration time (s)")
        axes[0, col].set_title(f"({'ab'[col]}) {label}: iteration time, {PREDICTED}", fontsize=9)
        bars(axes[1, col], groups,
             [(STYLE[k][0], STYLE[k][1], [r[f"methods.{k}.search_cpu_s"] for r in rows])
              for k in ("eth", "layer", "uniform")], log=True)
        axes[1, col].set_ylabel("plan search time (CPU s, log)")
        axes[1, col].set_title(f"({'de'[col]}) {label}: search time, MEASURED (1 run each)",
                               fontsize=9)
    metis = F.pb.rows("metis[]")
    groups = [f"{model_label(r['model'])}\n{r['devices']} dev\ngbs {r['gbs']}" for r in metis]
    bars(axes[0, 2], groups,
         [(STYLE["eth"][0] + " (predictor)", STYLE["eth"][1],
           [r["methods.eth.iteration_ms"] / 1e3 for r in metis]),
          (STYLE["layer"][0], STYLE["layer"][1],
           [r["methods.layer.iteration_ms"] / 1e3 for r in metis]),
          ("Metis's best plan (its own estimate)", STYLE["metis"][1],
           [r["metis_best_ms"] / 1e3 for r in metis])])
    axes[0, 2].set_ylabel("iteration time (s)")
    axes[0, 2].set_title("(c) Metis's own inputs (Metis profiles): iteration time, PREDICTED",
                         fontsize=9)
    metis_s = [r["metis_search_s"] if r["metis_search_s"] is not None
               else r["metis_search_over_s"] for r in metis]
    over = [f"> {r['metis_search_over_s']:.0f} s (stopped)" if r["metis_search_s"] is None
            else "" for r in metis]
    bars(axes[1, 2], groups,
         [(STYLE["eth"][0] + " (wall s, this machine)", STYLE["eth"][1],
           [r["methods.eth.search_wall_s"] for r in metis]),
          ("Metis (wall s, recorded: bench/data/metis-recorded.json)", STYLE["metis"][1],
           metis_s)], log=True, labels_on=[None, over])
    axes[1, 2].set_ylabel("plan search time (wall s, log)")
    axes[1, 2].set_title("(f) Metis's own inputs: search time (ETH measured, 1 run; Metis "
                         "recorded)", fontsize=9)
    for ax in axes.flat:
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=6, loc="upper left")
    F.save(fig, "fig9-iteration-and-search",
           "Fig. 9: iteration time and plan search time, GPT-3 350M-70B on the Table 2 "
           "clusters (gbs 512; 1024 for 13B and 70B)", "Fig. 9",
           "Labels above bars: that method's time over ETH's. Metis's figures were recorded by "
           "the project's peer run of Metis on the same inputs (2 cores, Python; 13B stopped at "
           "600 s).")


def fig10(F):
    fig, axes = plt.subplots(2, 2, figsize=(14, 8.4))
    agg = F.sb.rows("aggregation[]")
    models = list(dict.fromkeys(r["model"] for r in agg))
    by = {(r["model"], r["mode"]): r for r in agg}
    groups = [model_label(m) for m in models]
    bars(axes[0, 0], groups, [(label, colour, [by[(m, mode)]["sync_busy_ms"] for m in models])
                              for mode, label, colour in MODES], log=True,
         labels_on=[[f"{by[(m, mode)]['collectives']} coll." for m in models]
                    for mode, _, _ in MODES])
    axes[0, 0].set_ylabel("gradient aggregation time, busiest device (ms, log)")
    axes[0, 0].set_title(f"(a) ETH's plan, 910B2/910B4: aggregation time per mode, {PREDICTED}",
                         fontsize=9)
    rel = [(label, colour, [100 * (by[(m, mode)]["simulated_ms"] /
                                   by[(m, "block")]["simulated_ms"] - 1) for m in models])
           for mode, label, colour in MODES]
    bars(axes[0, 1], groups, rel)
    axes[0, 1].axhline(0, color="k", lw=0.8)
    axes[0, 1].set_ylabel("iteration time vs block-wise (%)")
    axes[0, 1].set_title("(b) ETH's plan, 910B2/910B4: iteration time per mode, SIMULATED "
                         "(analytic profile)", fontsize=9)
    # (c) where each method's iteration goes, predictor on the 910B2/910B4 scenarios.
    ax = axes[1, 0]
    rows = F.scenarios("910b2-910b4")
    parts = [("compute (mean device busy)", "#4c72b0"), ("bubble + imbalance", "#dddddd"),
             ("exposed gradient sync", "#c44e52"), ("optimizer", "#55a868")]
    methods = ["eth", "layer", "uniform"]
    x = np.arange(len(rows))
    w = 0.8 / len(methods)
    for i, k in enumerate(methods):
        busy = np.array([r[f"methods.{k}.busy_ms"] for r in rows]) / 1e3
        pipe = np.array([r[f"methods.{k}.pipeline_ms"] for r in rows]) / 1e3
        sync = np.array([r[f"methods.{k}.sync_exposed_ms"] for r in rows]) / 1e3
        opt = np.array([r[f"methods.{k}.optimizer_ms"] for r in rows]) / 1e3
        total = np.array([r[f"methods.{k}.iteration_ms"] for r in rows]) / 1e3
        eth_total = np.array([r["methods.eth.iteration_ms"] for r in rows]) / 1e3
        xs = x - 0.4 + w * (i + 0.5)
        bottom = np.zeros(len(rows))
        for (label, colour), v in zip(parts, [busy, pipe - busy, sync, opt]):
            ax.bar(xs, v / eth_total * 100, w, bottom=bottom, color=colour, edgecolor="white",
                   lw=0.3, label=label if i == 0 else None)
            bottom += v / eth_total * 100
        for xi, t, b in zip(xs, total, bottom):
            ax.annotate(f"{k}\n{t:.1f}s", (xi, b), ha="center", va="bottom", fontsize=5)
    ax.set_xticks(x, [f"{model_label(r['model'])}" for r in rows])
    ax.set_ylim(0, None)
    ax.set_ylabel("time, % of ETH's iteration")
    ax.set_title(f"(c) iteration breakdown of eth / layer / uniform, 910B2/910B4, {PREDICTED}",
                 fontsize=9)
    ax.set_ylim(top=ax.get_ylim()[1] * 1.1)
    ax.legend(fontsize=6, loc="lower right")
    # The asymmetric plan's rows (runtime_bench also measures a tp plan, "plan": "tp").
    meas = [r for r in F.rb.rows("aggregation[]") if r["plan"] == "asymmetric"]
    ranks = sorted(set(r["ranks"] for r in meas))
    mb = {(r["ranks"], r["mode"]): r for r in meas}
    bars(axes[1, 1], [f"{n} MPI ranks" for n in ranks],
         [(label, colour, [mb[(n, mode)]["ms"] for n in ranks]) for mode, label, colour in MODES],
         labels_on=[[f"{mb[(n, mode)]['collectives']} coll., {mb[(n, mode)]['reps']} reps"
                     for n in ranks] for mode, _, _ in MODES])
    axes[1, 1].set_ylabel("one aggregation, slowest rank (ms, median)")
    axes[1, 1].set_title(f"(d) asymmetric plan of a 9.6 M-parameter model (fp32), {MEASURED} "
                         "(MPI, shared memory)", fontsize=9)
    for a in (axes[0, 0], axes[0, 1], axes[1, 1]):
        a.legend(fontsize=7, loc="upper left")
    F.save(fig, "fig10-aggregation",
           "Fig. 10: block-wise, tensor-wise and device-wise gradient aggregation, and the "
           "iteration breakdown, GPT-3 on 910B2/910B4", "Fig. 10",
           "(d): 1 run, median of the timed repetitions shown (a warm-up left out), 4 and 8 "
           "ranks on 2 cores: per-collective latency is tiny here, unlike on accelerator links.")


def fig11(F):
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.6))
    scale = F.pb.rows("scale[]")
    for ax, (axis, xlabel, tag) in zip(axes, [("devices", "devices (half 910B2, half 910B4)", "a"),
                                              ("gbs", "global batch (samples)", "b"),
                                              ("seq", "sequence length (tokens)", "c")]):
        rows = sorted([r for r in scale if r["axis"] == axis], key=lambda r: r["value"])
        xs = [r["value"] for r in rows]
        for k in ("eth", "layer", "uniform"):
            tput = [r["gbs"] * r["seq"] / (r[f"methods.{k}.iteration_ms"] / 1e3) / 1e3
                    if r[f"methods.{k}.iteration_ms"] else np.nan for r in rows]
            ax.plot(xs, tput, "o-", color=STYLE[k][1], label=STYLE[k][0])
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(v) for v in xs])
        ax.set_xlabel(xlabel)
        ax.set_ylabel("throughput (k tokens/s)")
        ax.grid(alpha=0.3)
        base = {"devices": "gbs 1024, seq 2048", "gbs": "64 devices, seq 2048",
                "seq": "64 devices, gbs 1024"}[axis]
        ax.set_title(f"({tag}) 13B on 910B2/910B4, {base}\n{PREDICTED}", fontsize=9)
        ax.legend(fontsize=6)
    pure = F.pb.rows("pure[]")
    groups = [model_label(r["model"]) for r in pure]
    bars(axes[3], groups,
         [(STYLE[k][0], STYLE[k][1],
           [r[f"methods.{k}.iteration_ms"] / r["methods.eth.iteration_ms"] for r in pure])
          for k in ("eth", "pure", "layer")],
         labels_on=[[r["methods.eth.family"] for r in pure],
                    [f"{r['methods.pure.pipelines']} pipes" for r in pure], None])
    axes[3].set_ylim(0.9, None)
    axes[3].set_ylabel("iteration time / ETH's")
    axes[3].set_title(f"(d) ETH vs TypeSplit-HPP, A100/RTX3090 (Table 2)\n{PREDICTED}",
                      fontsize=9)
    axes[3].legend(fontsize=6, loc="upper left")
    F.save(fig, "fig11-scalability",
           "Fig. 11: scalability of GPT-3 13B in devices, global batch and sequence length; ETH "
           "against type-split HPP", "Fig. 11 (a)-(d)",
           "(d): labels give ETH's plan family (pure/mixed) and the type-split plan's pipelines.")


def fig12(F):
    fig, axes = plt.subplots(1, 2, figsize=(15, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    mem = F.pb.rows("memory[]")
    models = list(dict.fromkeys(r["model"] for r in mem))
    types = list(dict.fromkeys(r["device_type"] for r in mem))
    by = {(r["model"], r["device_type"]): r for r in mem}
    colours = {types[0]: ("#1f77b4", "#aec7e8"), types[-1]: ("#ff7f0e", "#ffbb78")}
    series, text = [], []
    for t in types:
        for key, label, shade in (("with_mo_gb", "with MO", 0), ("without_mo_gb", "w/o MO", 1)):
            series.append((f"{t} {label}", colours[t][shade],
                           [by[(m, t)][key] if (m, t) in by else None for m in models]))
            text.append(["OOM" if key == "without_mo_gb" and (m, t) in by and
                         not by[(m, t)]["fits_without_mo"] else "" for m in models])
    ax = axes[0]
    bars(ax, [model_label(m) for m in models], series, labels_on=text)
    for t in types:
        cap = next(by[(m, t)]["capacity_gb"] for m in models if (m, t) in by)
        ax.axhline(cap, ls="--", lw=1, color=colours[t][0], label=f"{t} memory ({cap:.0f} GB)")
    ax.set_ylabel("peak memory of the fullest device (GB)")
    ax.set_title("(a) ETH's plan on A100/RTX3090, with and without operator-level recompute "
                 f"(MO), {PREDICTED}", fontsize=9)
    ax.legend(fontsize=6, ncol=2, loc="upper left")
    ax = axes[1]
    runs = [r for r in F.runs.rows("runs[]") if r["kind"] == "launch"]
    names, errs, labels = [], [], []
    for r in runs:
        res = fields.load(F.results, f"runs/launch-{r['name']}.json")
        meas, pred = res["measured_iteration_ms"], res["predicted_iteration_ms"]
        names.append(f"{r['model']}\n{r['method']}")
        errs.append(100 * (pred - meas) / meas)
        labels.append(f"{meas:.0f} ms meas.\n{r['steps']} steps")
    colour = [STYLE[r["method"]][1] for r in runs]
    x = np.arange(len(names))
    rects = ax.bar(x, errs, 0.6, color=colour)
    for rect, text, e in zip(rects, labels, errs):
        ax.annotate(text, (rect.get_x() + rect.get_width() / 2, e), ha="center",
                    va="bottom" if e >= 0 else "top", fontsize=6)
    ax.axhline(0, color="k", lw=0.8)
    lo, hi = min(0, min(errs)), max(0, max(errs))
    ax.set_ylim(lo - 0.2 * (hi - lo) - 5, hi + 0.2 * (hi - lo) + 5)  # room for the labels
    ax.set_xticks(x, names, fontsize=7)
    ax.set_ylabel("predictor error: (predicted - measured) / measured (%)")
    ax.set_title(f"(b) iteration time, {MEASURED}, EMULATED 2 fast + 2 slow ranks\n"
                 "(1 run per bar, mean over its steps after the first)", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    F.save(fig, "fig12-memory-and-predictor",
           "Fig. 12: memory saved by operator-level recompute (GPT-3 on A100/RTX3090) and the "
           "predictor's error on this machine's runs", "Fig. 12",
           "(a) w/o MO: the same plan with its operator recompute sets removed (full-unit "
           "recompute kept). (b) positive = overestimate, as in the paper; cpu-emulated "
           "stretches ops 4x and 12x.")


def fig13(F):
    abl = F.pb.rows("ablation[]")
    cases = list(dict.fromkeys((r["model"], r["cluster"]) for r in abl))
    fig, axes = plt.subplots(1, len(cases) + 1, figsize=(5 * (len(cases) + 1), 4.8))
    cmap = plt.get_cmap("viridis")
    for ax, (model, cluster) in zip(axes, cases):
        rows = [r for r in abl if r["model"] == model]
        y = np.arange(len(rows))[::-1]
        times = [r["search_cpu_s"] for r in rows]
        ax.barh(y, times, 0.7, color=[cmap(i / max(1, len(rows) - 1)) for i in range(len(rows))])
        for yi, r in zip(y, rows):
            ax.annotate(f" q {r['quality']:.3f}, {r['unit_splits']} splits",
                        (r["search_cpu_s"], yi), va="center", fontsize=6)
        ax.set_yticks(y, [r["variant"] for r in rows], fontsize=7)
        ax.set_xscale("log")
        ax.set_xlim(min(times) / 2, max(times) * 30)
        ax.set_xlabel("plan search time (CPU s, log)")
        ax.set_title(f"(a) ablation, {model_label(model)} on {cluster}\nsearch time MEASURED "
                     "(1 run each)", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    ax = axes[-1]
    alpha = F.pb.rows("alpha[]")
    twin = ax.twinx()
    for j, model in enumerate(dict.fromkeys(r["model"] for r in alpha)):
        rows = [r for r in alpha if r["model"] == model]
        colour = ["#1f77b4", "#ff7f0e", "#2ca02c"][j % 3]
        ax.plot([r["alpha"] for r in rows], [r["search_cpu_s"] for r in rows], "o-",
                color=colour, label=f"{model_label(model)} search time")
        twin.plot([r["alpha"] for r in rows], [r["quality"] for r in rows], "s--",
                  color=colour, alpha=0.6, label=f"{model_label(model)} plan quality")
    ax.set_xlabel("SES tolerance alpha")
    ax.set_ylabel("plan search time (CPU s)")
    twin.set_ylabel("plan quality (best objective at 0 / at alpha)")
    ax.set_title("(b) alpha on 910B2/910B4, gbs 1024: search time\nMEASURED (1 run each), "
                 "quality PREDICTED", fontsize=9)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = twin.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=6, loc="center left")
    ax.grid(alpha=0.3)
    F.save(fig, "fig13-search-ablation",
           "Fig. 13: search optimizations CPC, SES, OSO, DPO added one by one, and the tolerance "
           "alpha (analytic profile; q: plan quality, 1 = the first row's plan)",
           "Fig. 13 (GPT-3 13B on B2/B4)",
           "Without DPO every unit split is enumerated (only practical on small models, hence "
           "350M and 1.3B); 13B's rows start from DPO.")


def fig14(F):
    runs = {r["method"]: r for r in F.runs.rows("runs[]")
            if r["model"] == "tiny" and r["method"] in ("eth", "layer", "single")}
    curves = {}
    for method, r in runs.items():
        log = fields.load(F.results, f"runs/log-{r['name']}.jsonl")
        curves[method] = [(e["step"], e["loss"]) for e in log.rows("[]")]
    data = fields.load(F.results, "runs/data-text.json")
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8), gridspec_kw={"width_ratios": [3, 2, 2]})
    n = max(len(c) for c in curves.values())
    tail = max(1, int(n * 0.8))
    labels = {"eth": "ETH plan (4 ranks, MPI)", "layer": "layer-balanced plan (4 ranks, MPI)",
              "single": "one process (same global batch)"}
    for method, c in curves.items():
        steps = [s for s, _ in c]
        loss = [v for _, v in c]
        style = "-" if method != "single" else ":"
        for ax, lo in ((axes[0], 0), (axes[1], tail)):
            ax.plot(steps[lo:], loss[lo:], style, color=STYLE[method][1], lw=1.2,
                    label=labels[method])
    axes[0].set_title(f"(a) training loss, {MEASURED} (1 run per curve)", fontsize=9)
    axes[1].set_title(f"(b) the last {n - tail} steps, zoomed", fontsize=9)
    single = dict(curves.get("single", []))
    for method in ("eth", "layer"):
        if method in curves and single:
            diff = [(s, abs(v - single[s])) for s, v in curves[method] if s in single]
            axes[2].semilogy([s for s, _ in diff], [max(d, 1e-9) for _, d in diff],
                             color=STYLE[method][1], lw=1, label=labels[method])
    axes[2].set_title("(c) |loss - one process's loss| (fp32 rounding only)", fontsize=9)
    axes[2].set_ylabel("absolute loss difference (nats, log)")
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("cross-entropy loss (nats per byte token)")
    axes[1].set_ylabel("cross-entropy loss (nats per byte token)")
    r = runs.get("eth") or next(iter(runs.values()))
    F.save(fig, "fig14-loss",
           f"Fig. 14: loss curves of model tiny (4 layers, hidden 64) on English text "
           f"({data['tokens']} byte tokens), gbs {r['gbs']} x 64 tokens; plans on cpu-emulated "
           "(EMULATED 2 fast + 2 slow ranks)",
           "Fig. 14 (ETH, HexiScale and Metis on heterogeneous clusters, ETH on a homogeneous one)",
           f"Text: {F.machine['corpus']}, tokenized by eth data --text "
           "(one token per byte). Same seed, data order and learning-rate schedule in every run.")


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*", help="figure functions to draw (fig3 ... table3)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    F = Figures(a.results, a.out)
    todo = {"fig3": fig3, "fig9": fig9, "fig10": fig10, "fig11": fig11, "fig12": fig12,
            "fig13": fig13, "fig14": fig14,
            "table3": lambda F: table3.write(F.pb, os.path.join(F.out, "table3.md"),
                                             F.machine_text())}
    for name, fn in todo.items():
        if not a.only or name in a.only:
            fn(F)
    return 0


if __name__ == "__main__":
    sys.exit(main())
