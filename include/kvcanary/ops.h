// The public operations: plan, verify (and the fused verify), write, scatter and SWA translation.
#pragma once

#include "kvcanary/context.h"
#include "kvcanary/fused_verify.h"
#include "kvcanary/plan.h"
#include "kvcanary/scatter.h"
#include "kvcanary/verify.h"
#include "kvcanary/write.h"
