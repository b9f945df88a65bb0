/* What tests/workloads/otel_provider.c allocates, for the tests' truth. */
#pragma once

#define OTEL_RATE 524288.0 /* allocscope's default --rate */
#define OTEL_BLOCKS 4000
static const unsigned long otel_sizes[3] = {256, 20000, 300000};
