#!/usr/bin/env python3
"""Checks that the sample `kvcanary sim` output quoted in the docs is what the command prints now.

Usage: check_sim_samples.py KVCANARY_BIN DOC.md [DOC.md ...]

In each document, finds the fenced blocks that quote a run (a block holding a line that starts with
"scenario NAME on cpu:"), and runs `kvcanary sim --scenario NAME --progress off` once per scenario
quoted. Every document must quote the default scenario; other scenarios are checked where quoted.
A line `...` in a block marks lines the document left out, so a block is a list of segments. In
each segment every non-blank line must appear in the real output, in the same order, and table
rows that follow each other in the segment must follow each other in the output, row for row.
Segments must appear in order. The `speed:` line is skipped: timings depend on the machine.
Exits 0 when every quoted line matches, 1 with the first mismatch of each document otherwise.
"""
import subprocess
import sys

SAMPLE_PREFIX = "scenario "
SAMPLE_DEVICE = " on cpu:"
REQUIRED_SCENARIO = "default"
ELISION = "..."
SKIPPED_PREFIXES = ("$ ", "speed:")


def fenced_blocks(text):
    """The contents of each ``` block of a markdown text, as lists of lines."""
    blocks, current = [], None
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line.rstrip())
    return blocks


def segments(block):
    """The block's quoted lines, cut at each `...` line, without blanks and skipped lines."""
    result, current = [], []
    for line in block:
        if line.strip() == ELISION:
            result.append(current)
            current = []
        elif line.strip() and not line.startswith(SKIPPED_PREFIXES):
            current.append(line)
    result.append(current)
    return [segment for segment in result if segment]


def match_segment(segment, output, start):
    """Index after the segment's last line in `output` from `start`, or an error message."""
    previous = None
    for line in segment:
        try:
            index = output.index(line, start)
        except ValueError:
            return None, f"quoted line not in the output (in order): {line!r}"
        is_row = line.startswith("|")
        if is_row and previous is not None and previous[1] and index != previous[0] + 1:
            return None, f"table row {line!r} does not follow {output[previous[0]]!r} in the output"
        previous = (index, is_row)
        start = index + 1
    return start, None


def quoted_scenario(block):
    """The scenario a fenced block quotes the output of, or None."""
    for line in block:
        if line.startswith(SAMPLE_PREFIX) and SAMPLE_DEVICE in line:
            return line[len(SAMPLE_PREFIX):line.index(SAMPLE_DEVICE)]
    return None


def check_document(path, output_of):
    """Error messages for one document (empty when every quoted line matches). output_of(name)
    is the output of the named scenario, as lines."""
    with open(path, encoding="utf-8") as handle:
        blocks = [(quoted_scenario(block), block) for block in fenced_blocks(handle.read())]
    blocks = [(name, block) for name, block in blocks if name is not None]
    if not any(name == REQUIRED_SCENARIO for name, _ in blocks):
        mark = SAMPLE_PREFIX + REQUIRED_SCENARIO + SAMPLE_DEVICE
        return [f"{path}: no sample block starting with {mark!r}"]
    errors = []
    for number, (name, block) in enumerate(blocks, 1):
        output = output_of(name)
        if isinstance(output, str):
            errors.append(f"{path}: sample block {number}: {output}")
            continue
        start, rows, error = 0, 0, None
        for segment in segments(block):
            start, error = match_segment(segment, output, start)
            if error:
                errors.append(f"{path}: sample block {number}: {error}")
                break
            rows += sum(line.startswith("|") for line in segment)
        if not error and rows == 0:
            errors.append(f"{path}: sample block {number} quotes no table row")
    return errors


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    outputs = {}

    def output_of(name):
        """The scenario's output lines, run once; an error message when the run failed."""
        if name not in outputs:
            run = subprocess.run([argv[1], "sim", "--scenario", name, "--progress", "off"],
                                 capture_output=True, text=True)
            outputs[name] = ([line.rstrip() for line in run.stdout.splitlines()]
                             if run.returncode == 0 else
                             f"kvcanary sim --scenario {name} exited {run.returncode}:\n"
                             f"{run.stdout}\n{run.stderr}")
        return outputs[name]

    errors = [error for path in argv[2:] for error in check_document(path, output_of)]
    for error in errors:
        print(error)
    if errors:
        for name, output in outputs.items():
            if not isinstance(output, str):
                print(f"real output of {name}:\n" + "\n".join(output))
        return 1
    print(f"every quoted line of {len(argv) - 2} document(s) matches the real output")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
