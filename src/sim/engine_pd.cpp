// PD disaggregation: the prefill engine's side and the decode engine's side of a KV transfer.
// The transfer moves pages of every buffer in the spliced buf-info list, so the canary records
// travel with the KV exactly as an engine's transfer carries them.
#include <algorithm>

#include "kvcanary/error.h"
#include "sim/engine.h"

namespace kvcanary::sim {

std::vector<runtime::CanaryManager::BufferInfo> Engine::TransferList() const {
  std::vector<runtime::CanaryManager::BufferInfo> list;
  for (int kv = 0; kv < 2; ++kv) {  // K/V split list: every layer's K, then every layer's V
    for (int layer = 0; layer < options_.num_layers; ++layer) {
      const TensorView tensor = pool_->Layer(layer, kv);
      list.push_back({tensor.data(), options_.num_slots * options_.bytes_per_token,
                      options_.bytes_per_token});
    }
  }
  if (canary_) canary_->SpliceBufInfo(runtime::GroupKind::kFull, list, /*page_size=*/1);
  return list;
}

TransferPacket Engine::BuildTransfer(const Request& req, int64_t first_token) const {
  TransferPacket packet;
  packet.spec = req.spec;
  packet.tokens = req.tokens;
  packet.tokens.push_back(first_token);
  packet.num_pages = static_cast<int64_t>(req.spec.prompt.size());
  packet.page_dropped.assign(packet.num_pages, false);
  for (const auto& entry : TransferList()) {
    std::vector<uint8_t> pages(packet.num_pages * entry.item_bytes);
    for (int64_t page = 0; page < packet.num_pages; ++page) {
      runtime::CopyBytesAsync(pages.data() + page * entry.item_bytes,
                              static_cast<const char*>(entry.data) + req.slots[page] * entry.item_bytes,
                              entry.item_bytes, device_, stream_->handle());
    }
    packet.items.push_back(std::move(pages));
  }
  runtime::SynchronizeStream(device_, stream_->handle());
  return packet;
}

std::vector<TransferPacket> Engine::TakeTransfers() {
  std::vector<TransferPacket> taken;
  taken.swap(transfers_);
  return taken;
}

Request* Engine::AdmitTransfer(const TransferPacket& packet, int64_t step) {
  std::optional<Request*> admitted = scheduler_->AdmitPrefilled(packet.spec, packet.tokens, step);
  if (!admitted) return nullptr;
  Request* req = *admitted;
  const std::vector<runtime::CanaryManager::BufferInfo> list = TransferList();
  if (list.size() != packet.items.size()) {
    ThrowError("kv-canary sim: the two PD engines splice different buffer lists (", list.size(),
               " vs ", packet.items.size(), " entries)");
  }
  for (int64_t page = 0; page < packet.num_pages; ++page) {
    // A dropped page: the slot keeps whatever it held before.
    if (!packet.page_dropped[page]) CopyTransferPage(packet, *req, page);
  }
  return req;
}

void Engine::CopyTransferPage(const TransferPacket& packet, const Request& req, int64_t page) {
  const std::vector<runtime::CanaryManager::BufferInfo> list = TransferList();
  for (size_t e = 0; e < list.size(); ++e) {
    runtime::CopyBytesAsync(static_cast<char*>(list[e].data) + req.slots[page] * list[e].item_bytes,
                            packet.items[e].data() + page * list[e].item_bytes,
                            list[e].item_bytes, device_, stream_->handle());
  }
  runtime::SynchronizeStream(device_, stream_->handle());
  slot_contents_[req.slots[page]] = {packet.tokens[page], page};
}

}  // namespace kvcanary::sim
