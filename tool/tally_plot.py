#!/usr/bin/env python3
"""Draws a result that `tally bench`, `contention`, `race`, `advise` or `lab` saved with --json as a
PNG or SVG picture (matplotlib). The `tally` binary runs this script for `--plot FILE` and for
`tally plot RESULTS -o FILE`; it can also be run by hand:

    python3 tally_plot.py results.json out.png

What is drawn depends on the kind of result: the document's "command" field, or, for files
written before that field existed, the fields of its rows.
  bench:       bars per strategy for each distribution, as a fraction of the read bandwidth
               measured in the same run; one panel per (operation, sample type, bins, bins kind) case:
               even bins over the exact or the data's general range, range bins' log or random edges.
  advise:      the same bars for its one input, with the recommendation in the title.
  contention:  operations per second against the number of distinct addresses, log-log; one
               panel per operation (and memory, where rows say), one line per method.
  race:        updates lost against the number of threads; racy variants are labelled wrong.
  lab:         one horizontal bar per claim, labelled with its lesson, coloured by verdict: speedups (x) in
               one panel with a line at 1x, the fraction of updates racy variants lost in another.

Exit codes: 0 drawn; 2 bad arguments or input (unknown kind, unreadable JSON); 4 matplotlib is
missing (the caller turns this into advice on installing it); 5 the picture cannot be written
("cannot write 'OUT': REASON", the system's reason; the binary names its own target instead, as
it has the script draw into a temporary file that it renames once the script has succeeded).
"""
import json
import os
import re
import sys
import textwrap

EXIT_BAD_INPUT = 2
EXIT_NO_MATPLOTLIB = 4
EXIT_CANNOT_WRITE = 5
FORMATS = (".png", ".svg")


class BadInput(Exception):
    """An input the script cannot draw: reported on stderr, exit code 2."""


# ---- reading and classifying a result --------------------------------------------------------

def result_kind(doc):
    """bench, contention or race: the "command" field, else guessed from the rows' fields."""
    if not isinstance(doc, dict):
        raise BadInput("the JSON document is not an object with a \"rows\" list (not a tally result)")
    if "command" in doc:
        return str(doc["command"])
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows or not isinstance(rows[0], dict):
        raise BadInput("no \"command\" field and no rows to recognize the result by (not a tally result?)")
    fields = set(rows[0])
    if {"strategy", "distribution", "read_fraction"} <= fields:
        return "bench"
    if {"op", "method", "addresses", "ops_per_s"} <= fields:
        return "contention"
    if {"experiment", "variant", "lost"} <= fields:
        return "race"
    if {"claim", "figure", "unit", "verdict"} <= fields:
        return "lab"
    raise BadInput("no \"command\" field, and the rows match no known result (bench, contention, race, lab)")


def subtitle(doc):
    """device | date | tally version and backend: the line under every picture's title."""
    parts = [doc.get("device", "unknown device")]
    if doc.get("date"):
        parts.append(doc["date"].replace("T", " ").replace("Z", " UTC"))
    parts.append("tally {} ({} backend)".format(doc.get("tally_version", "?"), doc.get("backend", "?")))
    return " | ".join(parts)


def count_text(n):
    """2^28 for powers of two, 4.2M / 1000 otherwise: how sizes read in titles."""
    n = int(n)
    if n >= 1024 and n & (n - 1) == 0:
        return "2^{}".format(n.bit_length() - 1)
    if n >= 10**6:
        return "{:g}M".format(n / 1e6)
    return str(n)


def grid(count, most_columns):
    columns = max(1, min(most_columns, count))
    return columns, (count + columns - 1) // columns


def new_figure(plt, panels, most_columns, panel_width, panel_height):
    """A figure of `panels` axes in a grid; add_header makes room above them for the title and legend."""
    columns, rows = grid(panels, most_columns)
    fig, axes = plt.subplots(rows, columns, figsize=(panel_width * columns, panel_height * rows), squeeze=False)
    fig.tally_panels_height = panel_height * rows
    flat = [ax for row in axes for ax in row]
    for ax in flat[panels:]:
        ax.set_visible(False)
    return fig, flat[:panels]


def add_header(fig, title, doc, handles, labels, legend_columns, extra_top=0.0):
    """The title, the device line and one legend for every panel, above the panels (never over data);
    `extra_top` inches more above the first row, for what its panels write over their frames."""
    legend_rows = (len(handles) + legend_columns - 1) // legend_columns if handles else 0
    panels_width = fig.get_figwidth()
    # At least 12 inches, so that the title and legend fit; narrower panels stay centred in it.
    width = max(panels_width, 12.0)
    title_lines = textwrap.wrap(title, int(width * 8.2))  # about 0.12 inch a character, bold 14 pt
    title = "\n".join(title_lines)
    lift = 0.25 * (len(title_lines) - 1)  # each extra title line pushes the rest down
    header = 0.95 + lift + 0.22 * legend_rows + 0.3 + extra_top
    bottom = 0.6
    side = (width - panels_width) / 2
    height = fig.tally_panels_height + header + bottom
    fig.set_size_inches(width, height)
    fig.subplots_adjust(top=1 - header / height, bottom=bottom / height, left=(side + 0.9) / width,
                        right=1 - (side + 0.2) / width, hspace=0.4, wspace=0.2)
    fig.suptitle(title, y=1 - 0.12 / height, fontsize=14, fontweight="bold", va="top")
    fig.text(0.5, 1 - (0.5 + lift) / height, subtitle(doc), ha="center", va="center", fontsize=10, color="#333333")
    if handles:
        fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 1 - (0.68 + lift) / height),
                   ncol=legend_columns,
                   fontsize=9.5, frameon=False, columnspacing=1.4, handlelength=1.6)


# ---- bench ----------------------------------------------------------------------------------

# CUB is the peer every strategy is measured beside: drawn in black so it stands out in every group.
CUB_COLOUR = "#111111"
PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#bab0ac",
           "#e15759", "#86bcb6", "#d4a6c8"]
WRONG_COLOUR = "#d62728"
BINNED = ("histogram", "histogram_range", "weighted_histogram")


def strategy_colours(rows):
    """One colour per named strategy that has a right result (a bar), the same in every panel; CUB black."""
    colours = {}
    index = 0
    for row in rows:
        name = row["strategy"]
        if name in colours or name in ("automatic", "all") or not is_right(row):
            continue
        if name == "cub":
            colours[name] = CUB_COLOUR
        else:
            colours[name] = PALETTE[index % len(PALETTE)]
            index += 1
    return colours


def is_right(row):
    return row.get("check") in ("exact", "within bound")


def bench_panels(rows):
    """Panels in order of appearance: (title, groups, strategies, cells). A binned panel has a
    group per distribution; a reduction panel (reduce, count_if, find_first_if) a group per variant."""
    sizes = {r["samples"] for r in rows}
    panels = {}
    for row in rows:
        if row["strategy"] == "all":  # "skipped: uint8 samples reach the bins 0 to 255 only": nothing to draw
            continue
        operation = row.get("operation", "histogram")
        binned = operation in BINNED
        if binned:
            # results written before bins kinds existed: even bins over the exact range
            kind = row.get("bins_kind") or "exact"
            key = (operation, row.get("variant", ""), row["type"], row["bins"], kind, row["samples"])
            group = row["distribution"]
        else:
            key = (operation, "", row["type"], 0, "", row["samples"])
            group = row.get("variant") or operation
        panel = panels.setdefault(key, {"groups": [], "strategies": [], "cells": {}})
        if group not in panel["groups"]:
            panel["groups"].append(group)
        if row["strategy"] not in panel["strategies"]:
            panel["strategies"].append(row["strategy"])
        panel["cells"][(group, row["strategy"])] = row
    out = []
    for (operation, variant, sample_type, bins, kind, samples), panel in panels.items():
        # even bins say their range where it is not the exact one; range bins always say their edges
        range_text = "" if kind == "exact" else ", {} range".format(kind)
        if operation == "histogram":
            title = "{}, {} bins{}".format(sample_type, bins, range_text)
        elif operation == "histogram_range":
            title = "range bins, {} edges: {}, {}".format(kind, sample_type, bins)
        elif operation == "weighted_histogram":
            # "float weights" or "double weights, deterministic": the weights' type and the mode,
            # short enough for a panel's width
            weighted = "{} weights".format(variant.split()[0])
            if "deterministic" in variant:
                weighted += ", deterministic"
            title = "{}: {}, {} bins{}".format(weighted, sample_type, bins, range_text)
        else:
            title = "{}, {}".format(operation, sample_type)
        if len(sizes) > 1:
            title += ", n = " + count_text(samples)
        # automatic first, then the strategies as the run listed them, CUB last (beside all of them)
        order = sorted(panel["strategies"], key=lambda s: (s != "automatic", s == "cub"))
        out.append((title, panel["groups"], order, panel["cells"]))
    return out


def draw_bench(plt, doc):
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D

    rows = doc.get("rows") or []
    if not rows:
        raise BadInput("a bench result with no rows")
    panels = bench_panels(rows)
    if not panels:
        raise BadInput("a bench result whose rows are all skipped: nothing to draw")
    colours = strategy_colours(rows)
    most_groups = max(len(groups) for _, groups, _, _ in panels)
    most_bars = max(len(strategies) for _, _, strategies, _ in panels)
    # Wide panels when there are many bars per group, so that each bar stays a few points wide.
    panel_width = min(9.0, max(4.6, 0.075 * most_groups * most_bars + 1.2))
    if len(panels) == 1:
        panel_width = 10.0  # one panel (advise's one input) takes the figure's width, not a strip in its middle
    most_columns = max(1, int(19 // panel_width))
    fig, axes = new_figure(plt, len(panels), most_columns, panel_width, 3.3)

    wrong_seen = failed_seen = automatic_seen = skipped_seen = False
    label_bars = max(len(groups) * len(strategies) for _, groups, strategies, _ in panels) <= 12
    top = 1.1
    for (title, groups, strategies, cells), ax in zip(panels, axes):
        width = 0.86 / len(strategies)
        for g, group in enumerate(groups):
            for s, name in enumerate(strategies):
                row = cells.get((group, name))
                if row is None:
                    continue
                x = g - 0.43 + width * (s + 0.5)
                if row.get("timed") and is_right(row):
                    value = row["read_fraction"]
                    top = max(top, value * 1.05)
                    if label_bars:  # few bars in every panel: print each value over its bar
                        ax.text(x, value + 0.015, "{:.2f}".format(value), ha="center", va="bottom", fontsize=8,
                                rotation=90 if panel_width / (len(groups) * len(strategies)) < 0.5 else 0)
                    if name == "automatic":
                        # automatic: the colour of the strategy it chose, hatched
                        automatic_seen = True
                        colour = colours.get(row.get("used"), "#cccccc")
                        ax.bar(x, value, width, color=colour, hatch="////", edgecolor="white", linewidth=0)
                    else:
                        ax.bar(x, value, width, color=colours[name], linewidth=0)
                elif row.get("timed"):
                    # timed but wrong: no speed to show; a red cross instead
                    wrong_seen = True
                    ax.plot(x, 0.03, marker="x", color=WRONG_COLOUR, markersize=5, markeredgewidth=1.6)
                elif row.get("check", "").startswith("MISMATCH"):
                    failed_seen = True
                    ax.plot(x, 0.06, marker="X", color=WRONG_COLOUR, markersize=8, markeredgecolor="black",
                            markeredgewidth=0.6)
                elif row.get("check", "").startswith("skipped"):
                    # the strategy cannot run this case (bins beyond its memory...): not a zero speed
                    skipped_seen = True
                    ax.plot(x, 0.025, marker="d", color="#aaaaaa", markersize=3.5, linestyle="")
        ax.axhline(1.0, color="#555555", linestyle="--", linewidth=0.9, zorder=0)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(groups, fontsize=9.5)
        ax.set_xlim(-0.55, len(groups) - 0.45)
        ax.set_title(title, fontsize=11)
        ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.tick_params(axis="y", labelsize=9)
    for ax in axes:
        ax.set_ylim(0, top)
    columns, _ = grid(len(panels), most_columns)
    for i, ax in enumerate(axes):
        if i % columns == 0:
            ax.set_ylabel("fraction of read bandwidth", fontsize=9.5)

    handles, labels = [], []
    for name, colour in colours.items():
        handles.append(Patch(color=colour))
        labels.append("cub (NVIDIA CUB, the peer)" if name == "cub" else name)
    if automatic_seen:
        handles.append(Patch(facecolor="#bbbbbb", hatch="////", edgecolor="white"))
        labels.append("automatic (coloured as the strategy it chose)")
    if wrong_seen:
        handles.append(Line2D([], [], marker="x", color=WRONG_COLOUR, linestyle="", markeredgewidth=1.6))
        labels.append("wrong result, not drawn as a speed")
    if failed_seen:
        handles.append(Line2D([], [], marker="X", color=WRONG_COLOUR, markeredgecolor="black", linestyle=""))
        labels.append("verification FAILED")
    if skipped_seen:
        handles.append(Line2D([], [], marker="d", color="#aaaaaa", linestyle="", markersize=4))
        labels.append("skipped: the strategy cannot run this case")
    handles.append(Line2D([], [], color="#555555", linestyle="--"))
    labels.append("read bandwidth = 1")

    sizes = sorted({r["samples"] for r in rows})
    size_text = "N = " + ", ".join(count_text(n) for n in sizes) + " samples"
    title = "tally {}: fraction of the read bandwidth ({:.0f} GB/s, measured in the same run), {}".format(
        doc.get("command", "bench"), doc.get("read_bytes_per_s", 0) * 1e-9, size_text)
    if doc.get("recommendation"):  # tally advise
        title += "; recommendation: " + doc["recommendation"]
    legend_columns = min(len(handles), max(3, int(fig.get_figwidth() // 3.2)))
    add_header(fig, title, doc, handles, labels, legend_columns)
    return fig


# ---- contention -----------------------------------------------------------------------------

CONTENTION_FIELDS_NOT_DIMENSIONS = {"op", "method", "check", "verdict", "note"}
# Fields that, when rows differ in them, get a panel each rather than a line each.
CONTENTION_PANEL_FIELDS = ("memory",)


def contention_dimensions(rows):
    """The string-valued fields other than op and method in which rows differ (a GPU sweep's
    memory, scope, aggregation...), split into those that make panels and those that make lines."""
    varying = []
    for key in rows[0]:
        if key in CONTENTION_FIELDS_NOT_DIMENSIONS or not isinstance(rows[0][key], str):
            continue
        if len({str(r.get(key)) for r in rows}) > 1:
            varying.append(key)
    return [k for k in varying if k in CONTENTION_PANEL_FIELDS], [k for k in varying if k not in CONTENTION_PANEL_FIELDS]


def short_reason(check):
    """A skipped row's reason, cut to its first clause."""
    why = check[len("skipped"):].lstrip(": ")
    for cut in (";", " ("):
        why = why.split(cut)[0]
    return why.strip()


def reason_kind(why):
    """The reason with its figures as N: rows skipped for one reason at different sizes group as one."""
    return re.sub(r"~?\d[\d.]*x?", "N", why)


def address_span(shown, every):
    """`shown` addresses as a range when they are consecutive among `every` address of the panel,
    else as a list."""
    at = [every.index(a) for a in shown]
    if len(shown) > 1 and at == list(range(at[0], at[0] + len(at))):
        return "{}-{}".format(count_text(shown[0]), count_text(shown[-1]))
    return ", ".join(count_text(a) for a in shown)


def skipped_note(skipped, in_panel, line_of, label_of):
    """One short line per reason for the rows a panel could not run: which lines (when not all of
    them), which address counts (when not all of them), and why."""
    if not skipped:
        return ""
    every_address = sorted({r["addresses"] for r in in_panel})
    every_line = {line_of(r) for r in in_panel}
    reasons = {}
    for r in skipped:
        why = short_reason(r["check"])
        group = reasons.setdefault(reason_kind(why), {"lines": set(), "addresses": set(), "texts": set()})
        group["lines"].add(line_of(r))
        group["addresses"].add(r["addresses"])
        group["texts"].add(why)
    notes = []
    for kind, group in reasons.items():
        parts = []
        if group["lines"] != every_line:
            parts.append(", ".join(sorted(label_of(lk) for lk in group["lines"])))
        if len(group["addresses"]) != len(every_address):
            parts.append("at {} addresses".format(address_span(sorted(group["addresses"]), every_address)))
        why = next(iter(group["texts"])) if len(group["texts"]) == 1 else kind
        note = "not run{}: {}".format(" " + " ".join(parts) if parts else "", why)
        notes.append(textwrap.fill(note, 72))
    return "\n".join(notes)


def draw_contention(plt, doc):
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, NullFormatter

    rows = doc.get("rows") or []
    if not rows:
        raise BadInput("a contention result with no rows")
    panel_fields, line_fields = contention_dimensions(rows)
    # A GPU sweep's method names its memory, scope and aggregation ("shared-block-warp"): when the
    # fields say all the method says, lines are keyed by the fields alone, so that one legend entry
    # serves every panel.
    def dimensions(r):
        return tuple(str(r.get(k)) for k in panel_fields + line_fields)

    method_is_redundant = bool(line_fields) and \
        len({(r["method"],) + dimensions(r) for r in rows}) == len({dimensions(r) for r in rows})

    def line_of(r):
        return (() if method_is_redundant else (r["method"],)) + tuple(str(r.get(k)) for k in line_fields)

    def label_of(lk):
        named = ([] if method_is_redundant else ["method"]) + list(line_fields)
        return ", ".join(str(v) if k == "method" else "{} {}".format(k, v) for k, v in zip(named, lk))

    def panel_of(r):
        return (r["op"],) + tuple(str(r.get(k)) for k in panel_fields)

    panel_keys, line_keys = [], []
    for r in rows:
        if panel_of(r) not in panel_keys:
            panel_keys.append(panel_of(r))
        if line_of(r) not in line_keys and r.get("timed"):
            line_keys.append(line_of(r))
    markers = "osD^v<>ph*"
    if method_is_redundant and len(line_fields) == 2:
        # Colour and marker by the first field, line style by the second. A GPU sweep's fields come
        # as aggregation, then scope: aggregation, which moves the curves most, gets the colours, and
        # scope the line styles (its curves mostly lie on each other, which is the finding).
        firsts = list(dict.fromkeys(lk[0] for lk in line_keys))
        seconds = list(dict.fromkeys(lk[1] for lk in line_keys))
        dashes = ["-", "--", ":", "-."]
        colours = {lk: PALETTE[firsts.index(lk[0]) % len(PALETTE)] for lk in line_keys}
        marks = {lk: markers[firsts.index(lk[0]) % len(markers)] for lk in line_keys}
        styles = {lk: dashes[seconds.index(lk[1]) % len(dashes)] for lk in line_keys}
    else:
        colours = {lk: PALETTE[i % len(PALETTE)] for i, lk in enumerate(line_keys)}
        marks = {lk: markers[i % len(markers)] for i, lk in enumerate(line_keys)}
        styles = {lk: "-" for lk in line_keys}
    fig, axes = new_figure(plt, len(panel_keys), 4 if len(panel_keys) != 3 else 3, 4.6, 3.7)
    failed_seen = False
    first_row_note_lines = 0
    all_rates = [r["ops_per_s"] for r in rows if r.get("timed") and r.get("ops_per_s", 0) > 0]
    scale, unit = (1e9, "G") if all_rates and max(all_rates) >= 1e10 else (1e6, "M")
    for pk, ax in zip(panel_keys, axes):
        in_panel = [r for r in rows if panel_of(r) == pk]
        for lk in line_keys:
            line = sorted((r for r in in_panel if r.get("timed") and line_of(r) == lk), key=lambda r: r["addresses"])
            if not line:
                continue
            ax.plot([r["addresses"] for r in line], [r["ops_per_s"] / scale for r in line], color=colours[lk],
                    marker=marks[lk], linestyle=styles[lk], markersize=4.5, linewidth=1.6)
        for r in in_panel:
            if r.get("check", "").startswith("MISMATCH"):
                failed_seen = True
                ax.plot(r["addresses"], 0.05, marker="X", color=WRONG_COLOUR, markersize=8, markeredgecolor="black",
                        transform=ax.get_xaxis_transform())
        skipped = skipped_note([r for r in in_panel if r.get("check", "").startswith("skipped")], in_panel, line_of,
                               label_of)
        title = ", ".join([pk[0]] + ["{} {}".format(k, v) for k, v in zip(panel_fields, pk[1:])])
        # What the panel could not run goes between its title and its frame, never over the curves.
        note_lines = skipped.count("\n") + 1 if skipped else 0
        if panel_keys.index(pk) < grid(len(panel_keys), 4 if len(panel_keys) != 3 else 3)[0]:
            first_row_note_lines = max(first_row_note_lines, note_lines)
        ax.set_title(title, fontsize=11, pad=6 + 11 * note_lines)
        if skipped:
            ax.text(0.5, 1.015, skipped, transform=ax.transAxes, fontsize=7.5, color="#555555", ha="center",
                    va="bottom", linespacing=1.1)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "{:g}".format(v)))
        ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
        ax.grid(True, which="minor", axis="y", color="#f0f0f0", linewidth=0.4)
        ax.set_xlabel("distinct addresses", fontsize=9.5)
        ax.tick_params(labelsize=9)
    columns, _ = grid(len(panel_keys), 4 if len(panel_keys) != 3 else 3)
    for i, ax in enumerate(axes):
        if i % columns == 0:
            ax.set_ylabel("{}ops/s (log)".format(unit), fontsize=9.5)
    # one y range for every panel, so that panels compare
    lows = [a.get_ylim()[0] for a in axes if a.lines]
    highs = [a.get_ylim()[1] for a in axes if a.lines]
    if lows:
        for ax in axes:
            ax.set_ylim(min(lows), max(highs))
            # within one decade the major ticks are too few: label the minor ones as well
            narrow = max(highs) / min(lows) < 10
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: "{:g}".format(v)) if narrow else NullFormatter())

    handles = [Line2D([], [], color=colours[lk], marker=marks[lk], linestyle=styles[lk], markersize=4.5)
               for lk in line_keys]
    labels = [label_of(lk) for lk in line_keys]
    if failed_seen:
        handles.append(Line2D([], [], marker="X", color=WRONG_COLOUR, markeredgecolor="black", linestyle=""))
        labels.append("verification FAILED")
    first = next((r for r in rows if r.get("timed")), rows[0])
    title = "tally contention: atomic throughput against the number of distinct addresses"
    if "threads" in first and "ops_per_thread" in first:
        title += " ({} threads x {} updates)".format(first["threads"], count_text(first["ops_per_thread"]))
    add_header(fig, title, doc, handles, labels, min(len(handles), 6), extra_top=0.16 * first_row_note_lines)
    return fig


# ---- race -----------------------------------------------------------------------------------

def draw_race(plt, doc):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    rows = doc.get("rows") or []
    if not rows:
        raise BadInput("a race result with no rows")
    experiments = []
    for r in rows:
        if r["experiment"] not in experiments:
            experiments.append(r["experiment"])
    fig, axes = new_figure(plt, len(experiments), 3, 5.2, 3.8)
    # Correct variants in greens, racy ones in reds, the same colour for the same variant name.
    variant_colour = {}
    greens, reds = ["#2ca02c", "#98df8a"], ["#d62728", "#ff9896"]
    lucky_seen = failed_seen = False
    top = max(10, max(max(0, r["lost"]) for r in rows) * 4)
    for experiment, ax in zip(experiments, axes):
        in_panel = [r for r in rows if r["experiment"] == experiment]
        threads = sorted({r["threads"] for r in in_panel})
        variants = []
        for r in in_panel:
            if r["variant"] not in variants:
                variants.append(r["variant"])
        runs = sorted({r["run"] for r in in_panel})
        width = 0.8 / (len(variants) * len(runs))
        for t_index, t in enumerate(threads):
            for v_index, variant in enumerate(variants):
                for run_index, run in enumerate(runs):
                    row = next((r for r in in_panel if r["threads"] == t and r["variant"] == variant
                                and r["run"] == run), None)
                    if row is None:
                        continue
                    correct = bool(row.get("correct"))
                    key = (variant, correct)
                    if key not in variant_colour:
                        palette = greens if correct else reds
                        variant_colour[key] = palette[len([k for k in variant_colour if k[1] == correct]) % 2]
                    colour = variant_colour[key]
                    x = t_index - 0.4 + width * (v_index * len(runs) + run_index + 0.5)
                    lost = max(0, row["lost"])
                    if row.get("check", "").startswith("MISMATCH"):
                        failed_seen = True
                        ax.plot(x, 0, marker="X", color=WRONG_COLOUR, markersize=9, markeredgecolor="black",
                                clip_on=False, zorder=4)
                    if lost > 0:
                        ax.bar(x, lost, width, color=colour, edgecolor="white", linewidth=0.8)  # runs side by side stay apart
                    elif correct:
                        ax.plot(x, 0, marker="o", color=colour, markersize=4, clip_on=False, zorder=3)
                    else:
                        # A racy run that happened to lose nothing: still a wrong program.
                        lucky_seen = True
                        ax.plot(x, 0, marker="o", markerfacecolor="white", markeredgecolor=colour, markersize=5,
                                markeredgewidth=1.4, clip_on=False, zorder=3)
        ax.set_xticks(range(len(threads)))
        # 0 threads: a GPU histogram of the library, which sizes its own grid
        ax.set_xticklabels(["the library's grid" if t == 0 else count_text(t) if t >= 10**6 else "{:,}".format(t)
                            for t in threads], fontsize=9)
        ax.set_xlim(-0.6, len(threads) - 0.4)
        ax.set_yscale("symlog", linthresh=1)
        ax.set_ylim(0, top)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "0" if v == 0 else count_text(v) if v >= 1e6
                                                   else "{:,.0f}".format(v)))
        first = in_panel[0]
        title = experiment if experiment == "counter" else "{}, {} bins".format(experiment, first.get("bins"))
        expected = sorted({r["expected"] for r in in_panel})
        if len(expected) == 1:
            title += " ({} updates a run)".format(count_text(expected[0]))
        ax.set_title(title, fontsize=11)
        on_gpu = doc.get("backend") == "gpu"
        ax.set_xlabel("logical threads, each adds 1" if experiment == "counter" else
                      "GPU threads" if on_gpu else "threads (the OpenMP team)", fontsize=9.5)
        ax.grid(axis="y", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.tick_params(axis="y", labelsize=9)
    columns, _ = grid(len(experiments), 3)
    for i, ax in enumerate(axes):
        if i % columns == 0:
            ax.set_ylabel("updates lost (log; 0 at the axis)", fontsize=9.5)
    handles, labels = [], []
    for (variant, correct), colour in variant_colour.items():
        handles.append(Patch(color=colour))
        labels.append(variant + (": correct, must lose 0" if correct else ": WRONG (a data race)"))
    handles.append(Line2D([], [], marker="o", color="#2ca02c", linestyle="", markersize=4))
    labels.append("correct variant, exact")
    if lucky_seen:
        handles.append(Line2D([], [], marker="o", markerfacecolor="white", markeredgecolor=reds[0], linestyle="",
                              markersize=5, markeredgewidth=1.4))
        labels.append("racy run that lost nothing by luck (still wrong)")
    if failed_seen:
        handles.append(Line2D([], [], marker="X", color=WRONG_COLOUR, markeredgecolor="black", linestyle=""))
        labels.append("verification FAILED")
    title = "tally race: updates lost by racy variants beside their correct ones (one bar per run, none averaged)"
    add_header(fig, title, doc, handles, labels, min(len(handles), 3))
    return fig


# ---- lab ------------------------------------------------------------------------------------

# Verdicts in the order of the legend: (prefix of the row's verdict, colour, legend text).
VERDICTS = [("holds", "#59a14f", "holds"), ("partly", "#f28e2b", "partly"),
            ("does not hold", "#9d9d9d", "does not hold here"), ("MISMATCH", WRONG_COLOUR, "MISMATCH (a wrong result)")]
CLAIM_WRAP = 52  # characters a line of a claim's label
CLAIM_LINES = 3  # lines at most; longer claims end in "..."


def verdict_style(verdict):
    """(colour, short text) of a row's verdict: "holds", "partly: ...", "does not hold here (...)", "MISMATCH: ..."."""
    for prefix, colour, _ in VERDICTS:
        if verdict.startswith(prefix):
            return colour, "no" if prefix == "does not hold" else prefix
    return "#cccccc", verdict[:20]


def claim_label(number, row):
    """#3  races [gpu]  and the claim, wrapped to a few lines."""
    lines = textwrap.wrap(row["claim"], CLAIM_WRAP)
    if len(lines) > CLAIM_LINES:
        lines = lines[:CLAIM_LINES]
        lines[-1] = lines[-1][:CLAIM_WRAP - 3].rstrip() + "..."
    lesson = row.get("lesson", row.get("seed", "?"))  # older results call the field "seed"
    return "{}. {} [{}]: {}".format(number, lesson, row.get("backend", "?"), "\n".join(lines))


def draw_lab(plt, doc):
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    rows = doc.get("rows") or []
    if not rows:
        raise BadInput("a lab result with no rows")
    numbered = list(enumerate(rows, 1))  # the numbers of the printed table
    speedups = [(i, r) for i, r in numbered if r["unit"] == "x"]
    losses = [(i, r) for i, r in numbered if r["unit"] != "x"]
    groups = [g for g in (speedups, losses) if g]
    row_height = 0.5
    heights = [row_height * len(g) + 0.9 for g in groups]
    fig, axes = plt.subplots(len(groups), 1, figsize=(13.0, sum(heights)), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
    fig.tally_panels_height = sum(heights)
    axes = [row[0] for row in axes]
    for group, ax in zip(groups, axes):
        ratio = group is speedups
        ys = list(range(len(group)))
        figures = [float(r["figure"]) for _, r in group]
        shown = [f for f, (_, r) in zip(figures, group) if not r["verdict"].startswith("MISMATCH") and f > 0]
        if ratio:
            low, high = (min(shown + [1.0]), max(shown + [1.0])) if shown else (1.0, 1.0)
            logarithmic = high / low >= 10
            if logarithmic:
                ax.set_xscale("log")
                # room for the value written after the longest bar: a quarter of the axis, whatever its span
                left = low / 1.6
                right = high * max(2.6, (high / left) ** 0.3)
            else:
                left, right = 0.0, high * 1.3
            base = 1.0 if logarithmic else 0.0  # log: bars grow from 1x, left for slower, right for faster
        else:
            left, right, base = 0.0, 118.0, 0.0  # a fraction lost: 0 to 100%, room for the value after 100%
            ax.set_xticks(range(0, 101, 20))
        for y, f, (_, r) in zip(ys, figures, group):
            colour, short = verdict_style(r["verdict"])
            if r["verdict"].startswith("MISMATCH") or (ratio and f <= 0):
                ax.plot(left if not ratio or not logarithmic else 1.0, y, marker="X", color=WRONG_COLOUR,
                        markersize=10, markeredgecolor="black", clip_on=False, zorder=4)
                ax.text(1.0 if ratio and logarithmic else right * 0.02, y, "   MISMATCH", va="center", fontsize=9,
                        color=WRONG_COLOUR, fontweight="bold")
                continue
            value = f if ratio else 100.0 * f
            ax.barh(y, value - base, left=base, height=0.62, color=colour, linewidth=0)
            text = "{:.2f}x".format(f) if ratio else ("{:.3g}% lost".format(value) if f > 0 else "0 lost (luck)")
            ax.text(max(value, base), y, "  {}  ({})".format(text, short), va="center", fontsize=9)
        ax.set_xlim(left, right)
        ax.set_yticks(ys)
        ax.set_yticklabels([claim_label(i, r) for i, r in group], fontsize=8.5, linespacing=1.0)
        ax.set_ylim(len(group) - 0.5, -0.5)  # the first claim on top, as in the table
        ax.grid(axis="x", which="major", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.tick_params(axis="x", labelsize=9)
        if ratio:
            ax.axvline(1.0, color="#333333", linestyle="--", linewidth=1.0, zorder=3)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "{:g}x".format(v)))
            ax.set_xlabel("speedup of the variant the claim favours (its time over the other's; 1x: no difference"
                          + (", log scale)" if logarithmic else ")"), fontsize=9.5)
            ax.set_title("claims about speed", fontsize=11, loc="left")
        else:
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "{:g}%".format(v)))
            ax.set_xlabel("updates the racy variant lost (its correct variant must lose none)", fontsize=9.5)
            ax.set_title("claims about data races", fontsize=11, loc="left")
    handles = [Patch(color=colour) for _, colour, _ in VERDICTS]
    labels = [text for _, _, text in VERDICTS]
    if speedups:
        handles.append(Line2D([], [], color="#333333", linestyle="--"))
        labels.append("1x: no faster")
    title = "tally lab: each claim beside the figure measured here ({} claims)".format(len(rows))
    add_header(fig, title, doc, handles, labels, len(handles))
    # the claims' labels take the left of the figure
    fig.subplots_adjust(left=4.6 / fig.get_figwidth(), right=1 - 0.3 / fig.get_figwidth(), hspace=0.3)
    return fig


# advise writes bench rows (its candidates on one input): drawn as a bench.
DRAW = {"bench": draw_bench, "advise": draw_bench, "contention": draw_contention, "race": draw_race,
        "lab": draw_lab}


def main(argv):
    if len(argv) != 3:
        print("usage: tally_plot.py RESULTS.json OUT.png|OUT.svg", file=sys.stderr)
        return EXIT_BAD_INPUT
    json_path, out_path = argv[1], argv[2]
    try:
        extension = os.path.splitext(out_path)[1].lower()
        if extension not in FORMATS:
            raise BadInput("the output '{}' must end in .png or .svg".format(out_path))
        try:
            with open(json_path) as f:
                doc = json.load(f)
        except OSError as e:
            raise BadInput("cannot read '{}': {}".format(json_path, e.strerror))
        except ValueError as e:
            raise BadInput("'{}' is not JSON: {}".format(json_path, e))
        kind = result_kind(doc)
        if kind not in DRAW:
            raise BadInput("'{}' is a result of kind '{}', which has no picture (known: {})".format(
                json_path, kind, ", ".join(DRAW)))
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            print("tally plot: matplotlib is missing for {} ({}): python3 -m pip install matplotlib".format(
                sys.executable, e), file=sys.stderr)
            return EXIT_NO_MATPLOTLIB
        try:
            fig = DRAW[kind](plt, doc)
        except (KeyError, TypeError) as e:
            raise BadInput("'{}' looks like a {} result but a row lacks a field or has a wrong one ({}: {})".format(
                json_path, kind, type(e).__name__, e))
        try:
            fig.savefig(out_path, dpi=110, metadata={"Date": None} if extension == ".svg" else None)
        except OSError as e:
            print("tally plot: cannot write '{}': {}".format(out_path, e.strerror or e), file=sys.stderr)
            return EXIT_CANNOT_WRITE
        plt.close(fig)
    except BadInput as e:
        print("tally plot: {}".format(e), file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
