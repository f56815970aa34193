"""Placement of a whole network: every op on VTA or the board's CPU by predicted cost, with a
reason (`plan_network` → `Plan` of `Step`s); fusion groups (a conv/linear with its bias, ReLU and
residual add); the exact host rewrites that let VTA take a stem or an odd-sized layer
(`transforms`: zero padding, space-to-depth, im2col), which the network runner applies and the
planner costs; the default schedule chooser `best_template_schedule`; `choose_layers`, the layers a plan asks a
chooser about (with their occurrences)."""

from codesign.place.fusion import Group, groups
from codesign.place.plan import CPU, CPU_DTYPE, HOST_KINDS, VTA, Plan, Step, choose_layers, plan_network
from codesign.place.schedules import best_template_schedule, chooser
from codesign.place.transforms import IM2COL, PAD, SPACE_TO_DEPTH, Rewrite, rewrites

__all__ = ["CPU", "CPU_DTYPE", "HOST_KINDS", "IM2COL", "PAD", "SPACE_TO_DEPTH", "VTA", "Group",
           "Plan", "Rewrite", "Step", "best_template_schedule", "choose_layers", "chooser", "groups", "plan_network", "rewrites"]
