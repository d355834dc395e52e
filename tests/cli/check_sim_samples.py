#!/usr/bin/env python3
"""Checks that the sample `kvcanary sim` output quoted in the docs is what the command prints now.

Usage: check_sim_samples.py KVCANARY_BIN DOC.md [DOC.md ...]

Runs `kvcanary sim --progress off` (the default scenario) once, then, in each document, finds the
fenced blocks that quote it (a block holding a line that starts with "scenario default on cpu:").
A line `...` in a block marks lines the document left out, so a block is a list of segments. In
each segment every non-blank line must appear in the real output, in the same order, and table
rows that follow each other in the segment must follow each other in the output, row for row.
Segments must appear in order. The `speed:` line is skipped: timings depend on the machine.
Exits 0 when every quoted line matches, 1 with the first mismatch of each document otherwise.
"""
import subprocess
import sys

SAMPLE_MARK = "scenario default on cpu:"
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


def check_document(path, output):
    """Error messages for one document (empty when every quoted line matches)."""
    with open(path, encoding="utf-8") as handle:
        blocks = [block for block in fenced_blocks(handle.read())
                  if any(line.startswith(SAMPLE_MARK) for line in block)]
    if not blocks:
        return [f"{path}: no sample block starting with {SAMPLE_MARK!r}"]
    errors = []
    for number, block in enumerate(blocks, 1):
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
    run = subprocess.run([argv[1], "sim", "--progress", "off"], capture_output=True, text=True)
    if run.returncode != 0:
        print(f"kvcanary sim exited {run.returncode}:\n{run.stdout}\n{run.stderr}")
        return 1
    output = [line.rstrip() for line in run.stdout.splitlines()]
    errors = [error for path in argv[2:] for error in check_document(path, output)]
    for error in errors:
        print(error)
    if errors:
        print("real output:\n" + "\n".join(output))
        return 1
    print(f"every quoted line of {len(argv) - 2} document(s) matches the real output")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
