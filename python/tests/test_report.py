"""format_violation against SGLang's reporter vectors, byte for byte."""

import numpy as np
import pytest

import kvcanary
from kvcanary import format_violation
from kvcanary.report import format_violation as format_violation_from_module

VERIFY_MESSAGE = """\
kv_canary violation: launch_tag=HEAD_K_FULL fail_reason=verify_chain_hash+verify_position+verify_real_kv_hash slot_idx=17 position=42 stored_token=111 expected_token=-1 stored_chain_hash=0x1111111111111111 expected_aux=0x2222222222222222
KV cache canary violation detected (kernel_kind=HEAD_K_FULL, slot_idx=17, position=42)
canary_kind:       per_forward_head_k_full
  fail_reasons: verify_chain_hash verify_position verify_real_kv_hash
  stored:   token_id=111   position=42 prev_hash=0x1111111111111111
  expected: prev_hash=0x2222222222222222
  total_violations=1 ring_overflow=False step_when_pumped=7"""

WRITE_MESSAGE = """\
kv_canary violation: launch_tag=TAIL_K_FULL fail_reason=write_token slot_idx=5 position=43 stored_token=999 expected_token=888 stored_chain_hash=0x3333333333333333 expected_aux=0x000000000000002b
KV cache canary violation detected (kernel_kind=TAIL_K_FULL, slot_idx=5, position=43)
canary_kind:       per_forward_tail_k_full
  fail_reasons: write_token
  actual:   token_id=999   position=43 prev_hash=0x3333333333333333
  expected: token_id=888   position=43
  total_violations=1 ring_overflow=False step_when_pumped=3"""


def test_verify_row():
    row = [0, 17, 42, 111, -1, 0x1111111111111111, 0x2222222222222222, 7]
    assert format_violation(row, 1, False, 7) == VERIFY_MESSAGE
    assert format_violation_from_module is format_violation


def test_write_row():
    row = [2, 5, 43, 999, 888, 0x3333333333333333, 43, 8]
    assert format_violation(row, 1, False, 3) == WRITE_MESSAGE


def test_sweep_token_check_row():
    row = [10, 4, 3, 44, 45, -775092142951646884, -775092142951646884, 32]
    lines = format_violation(row, 2, False, 8).split("\n")
    assert lines[0] == (
        "kv_canary violation: launch_tag=SWEEP_K_SWA fail_reason=verify_token slot_idx=4 "
        "position=3 stored_token=44 expected_token=45 stored_chain_hash=0xf53e51cd772bb95c "
        "expected_aux=0xf53e51cd772bb95c")
    assert lines[1] == (
        "KV cache canary violation detected (kernel_kind=SWEEP_K_SWA, slot_idx=4, position=3)")
    assert lines[2] == "canary_kind:       sweep_k_swa"
    assert lines[3] == "  fail_reasons: verify_token"
    assert lines[4] == "  stored:   token_id=44   position=3 prev_hash=0xf53e51cd772bb95c"
    assert lines[5] == "  expected: token_id=45 prev_hash=0xf53e51cd772bb95c"
    assert lines[6] == "  total_violations=2 ring_overflow=False step_when_pumped=8"
    assert len(lines) == 7


def test_write_position_row_with_negative_chain():
    row = [8, 53504, 512, 1299, 1299, -1, 8448, 16]
    lines = format_violation(row, 1, False, 0).split("\n")
    assert lines[0] == (
        "kv_canary violation: launch_tag=TAIL_K_SWA fail_reason=write_position slot_idx=53504 "
        "position=512 stored_token=1299 expected_token=1299 stored_chain_hash=0xffffffffffffffff "
        "expected_aux=0x0000000000002100")
    assert lines[2] == "canary_kind:       per_forward_tail_k_swa"
    assert lines[4] == "  actual:   token_id=1299   position=512 prev_hash=0xffffffffffffffff"
    assert lines[5] == "  expected: token_id=1299   position=8448"


def test_unknown_tag_and_no_bits():
    lines = format_violation([9999, 1, 2, 3, 4, 5, 6, 0], 5, True, 11).split("\n")
    assert "launch_tag=unknown(9999) fail_reason=none " in lines[0]
    assert lines[1].startswith("KV cache canary violation detected (kernel_kind=unknown(9999),")
    assert lines[2] == "canary_kind:       unknown(9999)"
    assert lines[3] == "  fail_reasons: none"
    assert lines[5] == "  expected: prev_hash=0x0000000000000006"
    assert lines[6] == "  total_violations=5 ring_overflow=True step_when_pumped=11"


def test_unknown_bits_have_no_label():
    lines = format_violation([4, 1, 2, 3, 4, 5, 6, 64 | 2 | (1 << 63)], 1, False, 1).split("\n")
    assert "fail_reason=verify_position " in lines[0]
    assert lines[2] == "canary_kind:       sweep_k_full"
    assert lines[3] == "  fail_reasons: verify_position"


@pytest.mark.parametrize("kind", ["list", "numpy", "torch"])
def test_rows_from_a_ring(kind):
    """A row read straight from a violation ring formats like the list."""
    row = [2, 5, 43, 999, 888, 0x3333333333333333, 43, 8]
    if kind == "numpy":
        row = np.array([row], dtype=np.int64)[0]
    elif kind == "torch":
        torch = pytest.importorskip("torch")
        row = torch.tensor([row], dtype=torch.int64)[0]
    assert format_violation(row, np.int64(1), np.bool_(False), 3) == WRITE_MESSAGE


def test_first_line_parses_with_the_tooling_pattern():
    import re

    message = format_violation([0, 17, 42, 111, -1, 1, 2, 7], 1, False, 7)
    match = re.search(r"launch_tag=(\S+) fail_reason=(\S+)", message.split("\n")[0])
    assert match.group(1) == "HEAD_K_FULL"
    assert match.group(2).split("+") == [
        "verify_chain_hash", "verify_position", "verify_real_kv_hash"]
    assert kvcanary.CanaryLaunchTag[match.group(1)] == 0
