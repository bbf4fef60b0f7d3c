package cached

import (
	"sync/atomic"
	"time"
)

// commits tells an observer of each batch of charges made durable.
type commits struct {
	fn atomic.Pointer[func(time.Duration, int)]
}

// ObserveCommits has fn hear of every batch of charges made durable from
// now on: how long its write took (the charge log's write and sync, or
// the backend's transaction) and how many charges it held. fn is called
// once the batch's callers are answered; nil stops it.
func (c *commits) ObserveCommits(fn func(d time.Duration, charges int)) {
	if fn == nil {
		c.fn.Store(nil)
		return
	}
	c.fn.Store(&fn)
}

// observe tells the observer, if any, of a batch of n charges made
// durable in d (none: nothing to tell).
func (c *commits) observe(d time.Duration, n int) {
	if fn := c.fn.Load(); fn != nil && n > 0 {
		(*fn)(d, n)
	}
}
