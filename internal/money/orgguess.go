package money

import "sync/atomic"

// orgGuessSlots is how many accounts' organizations a gate remembers at
// once (by a hash of the account's id: one account may take another's
// place).
const orgGuessSlots = 4096

// orgGuess is the organization an account was last seen in ("" for none)
// and the organization's scope in the Locks (orgScope).
type orgGuess struct{ account, org, scope string }

// orgGuesses remember the organization each account was last seen in, so
// that a call takes its organization's lock without reading the account
// first. A guess is never trusted: the account is read again under the
// locks, and a call whose account is no longer in the organization it
// locked takes the locks again (see Gate.ReserveFor). An account not
// remembered is read before the locks.
type orgGuesses struct {
	slots [orgGuessSlots]atomic.Pointer[orgGuess]
}

// slot is account's place (FNV-1a of its id).
func (gs *orgGuesses) slot(account string) *atomic.Pointer[orgGuess] {
	h := uint32(2166136261)
	for i := 0; i < len(account); i++ {
		h ^= uint32(account[i])
		h *= 16777619
	}
	return &gs.slots[h%orgGuessSlots]
}

// get returns the organization account was last seen in and its scope;
// nil when it is not remembered.
func (gs *orgGuesses) get(account string) *orgGuess {
	if g := gs.slot(account).Load(); g != nil && g.account == account {
		return g
	}
	return nil
}

// put remembers that account is in org and returns what it remembers.
func (gs *orgGuesses) put(account, org string) *orgGuess {
	s := gs.slot(account)
	if g := s.Load(); g != nil && g.account == account && g.org == org {
		return g
	}
	g := &orgGuess{account: account, org: org}
	if org != "" {
		g.scope = orgScope(org)
	}
	s.Store(g)
	return g
}

// guesses returns the gate's orgGuesses, made the first time.
func (g *Gate) guesses() *orgGuesses {
	if gs := g.orgs.Load(); gs != nil {
		return gs
	}
	g.orgs.CompareAndSwap(nil, new(orgGuesses))
	return g.orgs.Load()
}
