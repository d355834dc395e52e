#!/usr/bin/env bash
# Writes the committed seed corpus, tests/fuzz/corpus/<target>/ (docs/fuzzing.md). The targets
# decode sizes and values one byte each (fuzz_tensors.h), so a run of one byte value is a
# well-formed call whose sizes and values are all about that byte: zeros are the empty batch, 01, 03
# and 05 a few rows of small valid-looking indices, f5 the int64 extremes. The parser targets start
# from a few typical values. Re-run after changing how a target decodes its bytes.
set -euo pipefail
cd "$(dirname "$0")"

# repeat HEX COUNT: COUNT copies of the byte HEX.
repeat() { head -c "$2" /dev/zero | tr '\0' "\\$(printf '%03o' "0x$1")"; }

for source in fuzz_*.cpp; do
  target=$(basename "${source}" .cpp)
  mkdir -p "corpus/${target}"
  # Seeds written below are rewritten; a reproducer kept as regression-* stays.
  find "corpus/${target}" -type f ! -name 'regression-*' -delete
done

for target in fuzz_plan fuzz_plan_offsets fuzz_plan_entries fuzz_verify fuzz_fused_verify \
    fuzz_fused_stage fuzz_write fuzz_scatter fuzz_swa_translate fuzz_spin_wait; do
  repeat 00 64 >"corpus/${target}/zeros"
  repeat 03 512 >"corpus/${target}/threes"
  repeat 05 2048 >"corpus/${target}/fives"
  repeat 01 256 >"corpus/${target}/ones"
  { repeat 04 1024; repeat f5 64; } >"corpus/${target}/fours_then_extremes"
done

# The targets that decode a forward's plan inputs: a kind byte of 6 mod 8 gives a paged block
# table (fuzz_args.h), 06 with int32 ids and block size 6, 0e with int64 ids and block size 14.
for target in fuzz_plan fuzz_plan_offsets fuzz_plan_entries fuzz_fused_verify fuzz_fused_stage; do
  repeat 06 1024 >"corpus/${target}/paged_sixes"
  repeat 0e 1024 >"corpus/${target}/paged_fourteens"
done

# fuzz_verify_records_now: a shape byte, a length byte, then the three columns' values.
repeat 00 64 >corpus/fuzz_verify_records_now/zeros
repeat 03 128 >corpus/fuzz_verify_records_now/threes
{ printf '\x00\x08'; repeat 05 8; repeat 02 8; repeat 04 8; } >corpus/fuzz_verify_records_now/eight
{ printf '\x01\x04'; repeat 05 4; repeat f5 5; repeat 02 4; } >corpus/fuzz_verify_records_now/extremes

# fuzz_config: NAME-INDEX bytes are read from the end, values (backslash-terminated) from the front.
printf 'log\\ 1\\ 64\\ 0.5\\ full\\ \x01\x03\x02\x0f\x14' >corpus/fuzz_config/typical
printf 'raise\\ all\\ -1\\ nan\\ 18446744073709551615\\ \x00\x01\x04\x10\x16' >corpus/fuzz_config/edges
printf ' On \\ 1e400\\  \\ swa\\ \x05\x11\x0b\x14' >corpus/fuzz_config/spaces

# fuzz_sim_options: the scenario name first, then the overrides.
for scenario in default swa offload pd soak all; do
  printf '%s\\ \x02\x01\x00\x03\x07' "${scenario}" >"corpus/fuzz_sim_options/${scenario}"
done

# fuzz_record_blob: control bytes are read from the end (shape, key, sizing, blob kind, change,
# position, flip), the blob's payload from the front. A 4 x 2 blob for key n16-k0: well formed, with
# a payload byte flipped, cut short; then raw bytes (a header-like start) for key page-3.
{ repeat 11 256; printf '\x05\x00\x01\x00\x00\x02'; } >corpus/fuzz_record_blob/well_formed
{ repeat 11 256; printf '\x40\x30\x01\x01\x00\x00\x02'; } >corpus/fuzz_record_blob/flipped
{ repeat 11 256; printf '\x90\x02\x01\x00\x00\x02'; } >corpus/fuzz_record_blob/cut_short
{ printf 'KVCL\x01\x00\x04\x00\x02\x00\x00\x00\x20\x00\x00\x00'; repeat 00 272; printf '\x00\x00\x01\x02'; } \
  >corpus/fuzz_record_blob/raw_header
