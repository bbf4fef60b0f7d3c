//go:build !gw_unobserved

package pipeline

// observing is false only in a build tagged gw_unobserved, which leaves
// out what the gateway does to observe a call beyond counting it (the
// token, cost, overhead, refusal, cache and upstream-error metrics, the
// access log fields and placeholders, Server-Timing, the span's
// attributes), so that scripts/hotpath.sh can measure what observing
// costs on the same code. Release builds never set the tag.
const observing = true
