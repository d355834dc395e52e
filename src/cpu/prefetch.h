// A software prefetch the compiler cannot drop. GCC 12 at -O2 deletes an inlined loop whose only
// statements are __builtin_prefetch calls (the verify's real-KV strip prefetch compiled to no
// instruction at all); an asm statement with the line as a memory operand is always kept. The
// operand only names the address: nothing is loaded, so any address is safe, even past the end.
#pragma once

namespace kvcanary::cpu {

inline void PrefetchLine(const void* address) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(address)));
#else
  __builtin_prefetch(address);
  asm volatile("" : : "r"(address));
#endif
}

}  // namespace kvcanary::cpu
