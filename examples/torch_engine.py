"""A PyTorch serving engine with a paged KV cache, kvcanary installed, and faults injected.

A 4-layer decoder serves a seeded workload with continuous batching: a vLLM-layout paged KV cache
(block size 16), a block table, a slot mapping per forward, reference-counted blocks shared
through a prefix cache, LRU eviction. kvcanary (``kvcanary.runtime``) verifies every request's
records around every forward. Each fault class of ``--faults`` is injected once; the run prints
what was injected and detected, and exits 0 only when every fault was detected and every
violation is explained by one (``--faults none``: only when there was no violation).

``--canary off`` is the negative control: the same workload runs without and with the faults,
unchecked, and the run reports how many generated tokens the faults changed (exit 0 when some
did; with ``--faults none``, when none did).

    python3 examples/torch_engine.py --device cpu --faults all
    python3 examples/torch_engine.py --canary off

needs torch, and kvcanary importable (pip-installed, or PYTHONPATH=<build>/python).
"""

from __future__ import annotations

import argparse
import sys
import time

from torch_engine.engine import RunConfig, run
from torch_engine.faults import FAULT_KINDS
from torch_engine import report


def parse_faults(text: str) -> tuple:
    if text == "none":
        return ()
    if text == "all":
        return FAULT_KINDS
    kinds = tuple(k for k in text.split(",") if k)
    unknown = [k for k in kinds if k not in FAULT_KINDS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(
            f"must be none, all or a comma list of {', '.join(FAULT_KINDS)}, got '{text}'")
    return kinds


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=RunConfig.steps)
    parser.add_argument("--canary", choices=("on", "off"), default="on")
    parser.add_argument("--real-data", choices=("all", "partial", "none"), default="all",
                        help="KV bytes each record fingerprints: all, the first 16 of a token, "
                             "or none (a negative control: kv_flip then goes undetected)")
    parser.add_argument("--faults", type=parse_faults, default=FAULT_KINDS,
                        help=f"none, all (default) or a comma list of {', '.join(FAULT_KINDS)}")
    parser.add_argument("--verbose", action="store_true",
                        help="print the runtime's log lines (a WARNING per violation) as they come")
    return parser.parse_args(argv)


def run_checked(args: argparse.Namespace) -> int:
    config = RunConfig(device=args.device, seed=args.seed, steps=args.steps, canary=True,
                       real_data=args.real_data, faults=args.faults, verbose=args.verbose)
    start = time.perf_counter()
    result = run(config)
    print(f"torch engine on {args.device}: canary mode log, real-data {args.real_data}, "
          f"seed {args.seed}; faults {len(args.faults)} of {len(FAULT_KINDS)}"
          f"{' (' + ', '.join(args.faults) + ')' if args.faults else ''}\n")
    if args.faults:
        print("\n".join(report.fault_table(result)) + "\n")
    print("\n".join(report.false_positive_lines(result)))
    print("\n".join(report.coverage(result)))
    print("\n".join(report.runtime_log(result)))
    print(f"wall: {time.perf_counter() - start:.2f} s\n")
    ok, text = report.verdict(result)
    if not args.faults:
        ok = ok and result.violations == 0
        text = f"{'PASS' if ok else 'FAIL'}: no faults, {result.violations} violations reported"
    print(text)
    return 0 if ok else 1


def run_negative_control(args: argparse.Namespace) -> int:
    results = []
    for faults in ((), args.faults):
        results.append(run(RunConfig(device=args.device, seed=args.seed, steps=args.steps,
                                     canary=False, real_data=args.real_data, faults=faults)))
    clean, faulty = results
    differ = report.differing_tokens(clean.requests, faulty.requests)
    print(f"torch engine on {args.device}: canary off (negative control), seed {args.seed}")
    for inj in faulty.injections:
        if inj.step < 0:
            print(f"  {inj.kind}: not injected")
            continue
        victims = sum(differ[v.rid] for v in inj.victims)
        print(f"  {inj.kind}: step {inj.step}: {inj.target}; {victims} tokens of its victims "
              f"differ")
    print(f"clean run: {clean.tokens_generated} tokens generated; with faults: "
          f"{faulty.tokens_generated} ({sum(r.aborted for r in faulty.requests)} requests aborted "
          f"at the faults' horizon)")
    tokens, requests = sum(differ.values()), sum(1 for n in differ.values() if n)
    print(f"generated tokens that differ: {tokens} (in {requests} requests)")
    ok = tokens > 0 if args.faults else tokens == 0
    expectation = "the faults corrupt outputs" if args.faults else "the runs are identical"
    print(f"{'PASS' if ok else 'FAIL'}: {expectation}, and no canary ran to say so"
          if args.faults else f"{'PASS' if ok else 'FAIL'}: {expectation}")
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("torch_engine: --device cuda: no CUDA device is available", file=sys.stderr)
            return 2
    return run_checked(args) if args.canary == "on" else run_negative_control(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
