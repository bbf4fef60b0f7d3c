package caddymodule

import (
	"sync"
	"testing"
)

// Requests may still enter an old config while its cleanup waits for them
// to drain; the wait ends when the last one leaves, and only then.
func TestInflightDrain(t *testing.T) {
	f := newInflight()
	f.enter()
	done := f.drained()
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() { defer wg.Done(); f.enter(); f.leave() }()
	}
	wg.Wait()
	select {
	case <-done:
		t.Fatal("drained while a request was in flight")
	default:
	}
	f.leave()
	<-done
	// A late request after the drain does not close the channel twice.
	f.enter()
	f.leave()
	if f.drained() != done {
		t.Fatal("a second drain made a new channel")
	}
	empty := newInflight()
	<-empty.drained()
}
