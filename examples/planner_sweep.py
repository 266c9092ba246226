"""Planner sweep, notebook style: how the best plan of a model changes with
the number of cards, from Python.

Run from the repository root after `make build` (Debian's Python):

    PYTHONPATH=build/python /usr/bin/python3 examples/planner_sweep.py [OUT.png]

Each `# %%` block is a notebook cell (Jupyter, VS Code). The figure goes to
OUT.png (default build/planner_sweep.png), drawn with matplotlib's Agg
backend (no display needed).
"""

# %% Setup
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import tessera  # noqa: E402

MODEL = "configs/models/gpt3-175b.toml"
CLUSTER = "configs/clusters/a100-dgx.toml"
DEVICES = [128, 256, 512, 1024, 2048, 3072]  # the cluster spec has 3072 cards
TOKENS = 3e11  # GPT-3's token budget: adds wall-clock days and card-hours
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join("build", "planner_sweep.png")

# %% Search the fastest plan that fits for each card count (tessera plan search)
rows = []
for devices in DEVICES:
    try:
        found = tessera.plan.search(model=MODEL, cluster=CLUSTER, devices=devices, tokens=TOKENS, top=1)
    except tessera.Error as e:  # no plan fits: e.result has the candidate counts
        print("{:5d} cards: {}".format(devices, e))
        continue
    best = found["plans"][0]
    rows.append((devices, best, found["cost"]))
    p = best["plan"]
    print("{:5d} cards: dp {:3d} tp {} pp {:2d} mb {}  step {:6.2f} s  MFU {:4.1f}%  {:6.1f} days".format(
        devices, p["dp"], p["tp"], p["pp"], p["micro_batch"], best["step_time_s"], 100 * best["mfu"],
        found["cost"]["wall_clock_s"] / 86400))

# %% The same plans, priced one by one (tessera plan evaluate): the search's winner is reproducible
devices, best, _ = rows[-1]
p = best["plan"]
again = tessera.plan.evaluate(model=MODEL, cluster=CLUSTER, dp=p["dp"], tp=p["tp"], pp=p["pp"], ep=p["ep"],
                              vpp=p["vpp"], micro_batch=p["micro_batch"], zero=p["zero"], recompute=p["recompute"],
                              precision=p["precision"], schedule=p["schedule"], no_sp=not p["sequence_parallel"],
                              no_flash=not p["flash_attention"], offload=p["offload_optimizer"],
                              no_overlap=not p["overlap_grad_reduce"], global_batch=p["global_batch"])
print("evaluate of the {}-card winner: step {:.2f} s (search: {:.2f} s)".format(devices, again["step_time_s"],
                                                                              best["step_time_s"]))

# %% Plot: step time, MFU and the run's cost against cards
fig, (ax_time, ax_mfu, ax_days) = plt.subplots(1, 3, figsize=(15, 4))
xs = [d for d, _, _ in rows]
ax_time.plot(xs, [b["step_time_s"] for _, b, _ in rows], "o-")
ax_time.set_yscale("log")
ax_time.set_xlabel("cards")
ax_time.set_ylabel("step time of the best plan (s)")
ax_time.set_title("GPT-3 175B on A100 DGX: best plan per card count")
for d, b, _ in rows:
    p = b["plan"]
    ax_time.annotate("tp{} pp{}".format(p["tp"], p["pp"]), (d, b["step_time_s"]), textcoords="offset points",
                     xytext=(4, 4), fontsize=8)
ax_mfu.plot(xs, [100 * b["mfu"] for _, b, _ in rows], "s-", color="tab:green")
ax_mfu.set_xlabel("cards")
ax_mfu.set_ylabel("MFU (%)")
ax_mfu.set_ylim(0, 100)
ax_mfu.set_title("model FLOPs utilization")
ax_days.plot(xs, [c["card_hours"] / 1e3 for _, _, c in rows], "^-", color="tab:red", label="with failures")
ax_days.plot(xs, [c["ideal_card_hours"] / 1e3 for _, _, c in rows], "^--", color="tab:gray", label="ideal")
for d, _, c in rows:
    ax_days.annotate("{:.1f} d, goodput {:.3f}".format(c["wall_clock_s"] / 86400, c["goodput"]),
                     (d, c["card_hours"] / 1e3), textcoords="offset points", xytext=(-30, 8), fontsize=7)
ax_days.set_xlabel("cards")
ax_days.set_ylabel("thousand card-hours for {:.0e} tokens".format(TOKENS))
ax_days.set_title("cost of the run (days, goodput)")
ax_days.legend(loc="lower right")
for ax in (ax_time, ax_mfu, ax_days):
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([str(x) for x in xs])
fig.tight_layout()
os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
fig.savefig(out, dpi=100)
print("wrote", out)
