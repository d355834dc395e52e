// Umbrella header: everything public in kvcanary.
#pragma once

#include "kvcanary/checked.h"
#include "kvcanary/error.h"
#include "kvcanary/format.h"
#include "kvcanary/hash.h"
#include "kvcanary/ops.h"
#include "kvcanary/tensor.h"
#include "kvcanary/version.h"
