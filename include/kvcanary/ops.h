// The public operations: plan, verify (and the fused verify), write, scatter, SWA translation and
// the jitter fuzzer's spin-wait.
#pragma once

#include "kvcanary/context.h"
#include "kvcanary/fused_stage.h"
#include "kvcanary/fused_verify.h"
#include "kvcanary/plan.h"
#include "kvcanary/scatter.h"
#include "kvcanary/spin_wait.h"
#include "kvcanary/verify.h"
#include "kvcanary/write.h"
