"""The run's report: the fault table (as ``kvcanary sim`` prints it), coverage, and the verdict."""

from __future__ import annotations

from .engine import RunResult
from .faults import Injection
from .workload import Request


def describe_row(row) -> str:
    """``HEAD_K_FULL verify_chain_hash+verify_position``: the launch tag and the failed checks."""
    import kvcanary

    try:
        tag = kvcanary.CanaryLaunchTag(row.kernel_kind).name
    except ValueError:
        tag = f"tag {row.kernel_kind}"
    reasons = [reason.name.lower().removesuffix("_mismatch") for reason in kvcanary.FailReason
               if row.fail_reason_bits & reason]
    return f"{tag} {'+'.join(reasons)}"


def _fault_row(inj: Injection) -> str:
    if inj.step < 0:
        return f"| {inj.kind} | not injected | – | – | – | – | 0 | no victim qualified |"
    if inj.detected_step < 0:
        return f"| {inj.kind} | {inj.step} | – | – | – | – | 0 | {inj.target} |"
    row = inj.detected_row
    return (f"| {inj.kind} | {inj.step} | {inj.detected_step} | {inj.detected_step - inj.step} "
            f"| {row.slot_idx} | {describe_row(row)} | {inj.rows_explained} | {inj.target} |")


def fault_table(result: RunResult) -> list[str]:
    lines = ["| fault | injected step | detected step | latency | slot | reason | rows explained "
             "| target |",
             "|---|--:|--:|--:|--:|---|--:|---|"]
    lines += [_fault_row(inj) for inj in result.injections]
    lines += ["", "latency: steps from the injection to the step whose end_step reported its first "
              "violation. slot, reason: that violation's."]
    return lines


def coverage(result: RunResult) -> list[str]:
    finished = [r for r in result.requests if r.row == 0 and (r.output or r.aborted)]
    aborted = sum(1 for r in result.requests if r.aborted)
    lines = [f"coverage: {result.steps} steps, {result.forwards} forwards, "
             f"{len(finished) - aborted} requests finished, {aborted} aborted by quarantine, "
             f"{result.tokens_generated} tokens generated, {result.cache_hits} prefix-cache block "
             f"hits, {result.evictions} evictions"]
    if result.canary_stats is not None:
        stats = result.canary_stats
        lines.append(f"canary: {result.violations} violations reported, "
                     f"{sum(stats['protected_tokens'].values())} records verified or written")
    return lines


def runtime_log(result: RunResult) -> list[str]:
    """How many lines the runtime logged, and the first violation as an operator sees it."""
    warnings = [text for level, text in result.canary_log if level == "WARNING"]
    lines = [f"runtime log: {len(result.canary_log)} lines, {len(warnings)} warnings "
             "(--verbose prints them all)"]
    if warnings:
        lines += ["the first warning:", *("  " + line for line in warnings[0].splitlines())]
    return lines


def false_positive_lines(result: RunResult, limit: int = 20) -> list[str]:
    lines = [f"false positives: {len(result.false_positives)}"]
    for step, row in result.false_positives[:limit]:
        lines.append(f"  step {step}: slot {row.slot_idx} position {row.position} "
                     f"{describe_row(row)}")
    return lines


def verdict(result: RunResult) -> tuple[bool, str]:
    """PASS when every fault was injected and detected and every violation is explained."""
    missed = [inj.kind for inj in result.injections if inj.detected_step < 0]
    fps = len(result.false_positives)
    total = len(result.injections)
    text = (f"{total - len(missed)} of {total} injected faults detected, {fps} false positives"
            + (f" (missed: {', '.join(missed)})" if missed else ""))
    ok = not missed and fps == 0
    return ok, ("PASS: " if ok else "FAIL: ") + text


def differing_tokens(clean: list[Request], faulty: list[Request]) -> dict[int, int]:
    """Request id -> generated tokens that differ between two runs of one workload (positions
    both runs generated; a request aborted by quarantine stops early)."""
    return {a.rid: sum(1 for x, y in zip(a.output, b.output) if x != y)
            for a, b in zip(clean, faulty)}
