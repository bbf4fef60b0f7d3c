//go:build gw_unobserved

package pipeline

// observing: see observing.go.
const observing = false
