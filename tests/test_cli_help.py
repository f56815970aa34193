"""Every `--help` teaches without drifting: each command and subcommand prints its help and exits 0
with a description and examples, no help text quotes a measured figure (measurements live in
docs/results.md, where they carry their command and date), and an unknown --hw names the short names."""

from __future__ import annotations

import argparse
import re

import pytest

from codesign.cli import COMMANDS, build_parser, main
from codesign.errors import ConfigError
from codesign.hw.config import HwConfig

# a number with a unit of time, size, ratio or quality: what a measurement looks like in prose
MEASURED = re.compile(r"\b\d[\d,]*(\.\d+)?\s?(CPU-s|ms|µs|us|s|sec|seconds|min|minutes|h|MB|KB|GB|dB|%|x|MHz|GMAC/s)(?![\w/^-])")


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    out = []

    def walk(name: str, parser: argparse.ArgumentParser) -> None:
        out.append((name, parser))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(f"{name} {sub}".strip(), child)

    walk("", build_parser())
    return out


PARSERS = _parsers()


def test_every_command_and_subcommand_has_help():
    names = {n for n, _ in PARSERS}
    assert {c for c, _ in COMMANDS} <= names and "board serve" in names and "export autotvm" in names


@pytest.mark.parametrize("name", [c for c, _ in COMMANDS])
def test_help_exits_0_with_a_description_and_examples(name, capsys):
    with pytest.raises(SystemExit) as done:
        main([*name.split(), "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    parser = dict(PARSERS)[name]
    assert parser.description and parser.description.strip().split("\n")[0]
    assert "codesign " + name in (parser.epilog or ""), f"{name}: no example in the epilog"
    assert text.startswith("usage: codesign " + name)


def test_no_help_text_quotes_a_measured_figure():
    found = []
    for name, parser in PARSERS:
        texts = [parser.description or "", parser.epilog or ""]
        texts += [a.help or "" for a in parser._actions if isinstance(a.help, str)]
        texts += [getattr(a, "help", "") or "" for a in parser._actions
                  if isinstance(a, argparse._SubParsersAction) for a in a._choices_actions]
        found += [f"{name or 'codesign'}: {m.group(0)!r}" for t in texts for m in MEASURED.finditer(t)]
    assert not found, found


def test_the_top_help_lists_run_as_the_whole_network_and_no_research_tuner():
    top = build_parser().format_help()
    assert "offloaded layers" not in top and "--tuner ppo" not in top and "end to end" in top


def test_tune_plot_says_it_takes_a_path():
    tune = dict(PARSERS)["tune"]
    (plot,) = [a for a in tune._actions if "--plot" in a.option_strings]
    assert plot.metavar == "FILE.png" and "path" in plot.help


def test_an_unknown_hw_names_the_short_names():
    with pytest.raises(ConfigError, match="hardware name .pynq_9x9. is unknown: give a short name.*pynq_1x16.*pynq_4x8.*pynq_1x16_i8w8a32_15_15_18_17"):
        HwConfig.resolve("pynq_9x9")
    assert HwConfig.resolve("pynq_1x16").name == HwConfig.resolve("pynq_1x16_i8w8a32_15_15_18_17").name
