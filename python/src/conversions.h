// The conversions behind every def of binding.cpp: free functions named <Type>_<Method> that turn
// Python arguments (SGLang's dataclasses, DLPack tensors, ints) into the C++ argument structs of
// include/kvcanary/*.h and call the op. They hold no kvcanary logic: validation, messages and
// semantics are the ops' own (spec/kernels.md §11).
//
// Each launcher imports its tensors into an ImportScope, releases the GIL for the op and returns
// when the op returns (CPU: the work is done; CUDA: the work is enqueued on `stream`).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>

namespace kvcanary::python {

// kvcanary::Error -> ValueError, or KvCanaryTypeError (a ValueError and a TypeError) for the kType
// category. Adds KvCanaryTypeError to `module`.
void Error_Register(pybind11::module_& module);

// launch_canary_plan_kernels (spec §7.1-§7.2).
void Plan_Launch(pybind11::handle verify_plan_out, pybind11::handle write_plan_out,
                 pybind11::handle req_pool_indices, pybind11::handle prefix_lens,
                 pybind11::handle extend_seq_lens, pybind11::handle req_to_token,
                 pybind11::handle swa_window_size, pybind11::handle full_to_swa_index_mapping,
                 pybind11::handle verify_capacity, pybind11::handle req_to_verify_expected_tokens,
                 pybind11::handle req_to_verify_expected_tokens_valid_lens,
                 pybind11::handle kv_token_id_vs_position_offset,
                 pybind11::handle verify_offsets_scratch, pybind11::handle req_to_token_stride0,
                 pybind11::handle stream);

// launch_plan_offsets_kernel (spec §7.4).
void PlanOffsets_Launch(pybind11::handle req_pool_indices, pybind11::handle prefix_lens,
                        pybind11::handle extend_seq_lens, pybind11::handle req_to_token,
                        pybind11::handle full_to_swa_index_mapping,
                        pybind11::handle out_verify_offsets_scratch,
                        pybind11::handle out_write_offsets,
                        pybind11::handle out_write_seed_slot_indices,
                        pybind11::handle out_verify_num_valid, pybind11::handle out_verify_enable,
                        pybind11::handle out_write_num_valid_reqs, pybind11::handle swa_window_size,
                        pybind11::handle verify_capacity, pybind11::handle req_to_token_stride0,
                        pybind11::handle lut_len, pybind11::handle stream);

// launch_plan_entries_kernel (spec §7.4).
void PlanEntries_Launch(pybind11::handle req_pool_indices, pybind11::handle prefix_lens,
                        pybind11::handle req_to_token, pybind11::handle full_to_swa_index_mapping,
                        pybind11::handle verify_offsets_scratch, pybind11::handle verify_enable,
                        pybind11::handle req_to_verify_expected_tokens,
                        pybind11::handle req_to_verify_expected_tokens_valid_lens,
                        pybind11::handle out_verify_slot_indices,
                        pybind11::handle out_verify_expected_tokens,
                        pybind11::handle out_verify_expected_positions,
                        pybind11::handle out_verify_prev_slot_indices,
                        pybind11::handle kv_token_id_vs_position_offset,
                        pybind11::handle swa_window_size, pybind11::handle stream);

// launch_swa_translate_kernel (spec §7.3).
void SwaTranslate_Launch(pybind11::handle slot_indices, pybind11::handle full_to_swa_index_mapping,
                         pybind11::handle out_slot_indices, pybind11::handle stream);

// launch_canary_verify_kernel (spec §8). `context` and `plan` are read by attribute name, so any
// object with SGLang's field names works; `paired_context` may be None.
void Verify_Launch(pybind11::handle context, pybind11::handle plan,
                   pybind11::handle check_verify_expected_token, pybind11::handle paired_context,
                   pybind11::handle stream);

// launch_canary_write_kernel (spec §9).
// FusedVerify (kvcanary): verify with its entries derived from the plan inputs.
void FusedVerify_Launch(pybind11::handle context, pybind11::handle req_pool_indices,
                        pybind11::handle prefix_lens, pybind11::handle req_to_token,
                        pybind11::handle swa_window_size,
                        pybind11::handle full_to_swa_index_mapping,
                        pybind11::handle req_to_verify_expected_tokens,
                        pybind11::handle req_to_verify_expected_tokens_valid_lens,
                        pybind11::handle kv_token_id_vs_position_offset,
                        pybind11::handle verify_offsets_scratch, pybind11::handle verify_num_valid,
                        pybind11::handle verify_enable, pybind11::handle verify_capacity,
                        pybind11::handle check_verify_expected_token,
                        pybind11::handle paired_context, pybind11::handle req_to_token_stride0,
                        pybind11::handle stream);

void Write_Launch(pybind11::handle context, pybind11::handle plan, pybind11::handle input_ids,
                  pybind11::handle positions, pybind11::handle out_cache_loc,
                  pybind11::handle enable_write_input_assert,
                  pybind11::handle expected_input_tokens, pybind11::handle expected_input_positions,
                  pybind11::handle paired_context, pybind11::handle stream);

// launch_scatter_req_token_ids_kernel (spec §10).
void Scatter_Launch(pybind11::handle flat_in, pybind11::handle offsets,
                    pybind11::handle req_pool_indices, pybind11::handle pool_out,
                    pybind11::handle stream);

// RealKvSource construction checks R1-R7 (spec §11); throws the first failure.
void RealKvSource_Validate(pybind11::handle tensor, pybind11::handle page_size,
                           pybind11::handle num_bytes_per_token, pybind11::handle read_bytes);

// real_kv_hash(real_kv_sources, slot_idx, real_kv_hash_mode) of spec §4.3, read now (CPU only).
uint64_t RealKvSource_Hash(pybind11::handle real_kv_sources, pybind11::handle slot_idx,
                           pybind11::handle real_kv_hash_mode);

// compute_slot_hash(canary_buf, slot_idx) of spec §4.2 (CPU only); canary_buf is uint8 [N, stride]
// or its int64 view [N, stride / 8].
uint64_t CanaryBuf_SlotHash(pybind11::handle canary_buf, pybind11::handle slot_idx);

}  // namespace kvcanary::python
