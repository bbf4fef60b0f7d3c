// Package idhash keys an id (a request id, a decision id) by 128 bits of
// its hash, so that the sets and maps holding many of them hold no
// pointer for the garbage collector to trace.
package idhash

import "hash/maphash"

// Key is an id's hash. Two of 100,000 ids share one with odds of about 1
// in 10^28; a holder that must tell ids apart for certain keeps the id
// too and compares it.
type Key [2]uint64

var seeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// Of returns id's key (the same for the life of the process).
func Of(id string) Key {
	return Key{maphash.String(seeds[0], id), maphash.String(seeds[1], id)}
}
