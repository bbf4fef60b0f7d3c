package dsync

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The parts of the io_uring interface (linux/io_uring.h) a Syncer uses.
const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000

	opFsync        = 3 // IORING_OP_FSYNC
	fsyncDatasync  = 1 // IORING_FSYNC_DATASYNC
	registerEvents = 4 // IORING_REGISTER_EVENTFD

	// entries is the ring's size: a Syncer has one sync in flight.
	entries = 4
)

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqOffsets
	cqOff                                                                  cqOffsets
}

// sqOffsets is struct io_sqring_offsets.
type sqOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// cqOffsets is struct io_cqring_offsets.
type cqOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// sqe is struct io_uring_sqe (64 bytes).
type sqe struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	spliceFDIn  int32
	addr3       uint64
	pad         uint64
}

// cqe is struct io_uring_cqe (16 bytes).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// Syncer syncs files through an io_uring of its own, one sync at a time.
type Syncer struct {
	mu     sync.Mutex
	ring   int
	events *os.File // the eventfd the kernel signals with each completion
	sqMem  []byte
	cqMem  []byte
	sqes   []byte
	p      params
	seq    uint64
	op     uint8 // the operation submitted: opFsync (tests submit one the kernel refuses)
	broken error
	// onGiveUp hears why, when the ring is given up after New.
	onGiveUp func(error)
}

// errClosed is the ring of a closed Syncer: it syncs the plain way.
var errClosed = errors.New("dsync: closed")

// enterTries bounds the submissions retried while the kernel reports a
// passing shortage (EAGAIN, EBUSY, ENOMEM) before the ring is given up.
const enterTries = 100

// New sets up a ring; an error means io_uring is not available here.
func New() (*Syncer, error) {
	s := &Syncer{ring: -1, op: opFsync}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, entries, uintptr(unsafe.Pointer(&s.p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("dsync: io_uring_setup: %w", errno)
	}
	s.ring = int(fd)
	if err := s.setUp(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Syncer) setUp() error {
	p := &s.p
	var err error
	if s.sqMem, err = unix.Mmap(s.ring, offSQRing, int(p.sqOff.array+p.sqEntries*4), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("dsync: mapping the submission ring: %w", err)
	}
	if s.cqMem, err = unix.Mmap(s.ring, offCQRing, int(p.cqOff.cqes+p.cqEntries*uint32(unsafe.Sizeof(cqe{}))), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("dsync: mapping the completion ring: %w", err)
	}
	if s.sqes, err = unix.Mmap(s.ring, offSQEs, int(p.sqEntries*uint32(unsafe.Sizeof(sqe{}))), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("dsync: mapping the submission entries: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("dsync: eventfd: %w", err)
	}
	// Non-blocking, so os.NewFile puts it in the runtime's poller.
	s.events = os.NewFile(uintptr(efd), "io_uring completions")
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(s.ring), registerEvents, uintptr(unsafe.Pointer(&efd)), 1, 0, 0)
	if errno != 0 {
		return fmt.Errorf("dsync: registering the eventfd: %w", errno)
	}
	return nil
}

// u32 is the ring's shared counter at off of mem.
func u32(mem []byte, off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&mem[off])) }

// Datasync makes f's written data durable, as fdatasync(2) does, with the
// calling goroutine parked in the poller meanwhile. A nil Syncer, or one
// whose ring has failed (not the sync: the ring itself), syncs the plain
// way.
func (s *Syncer) Datasync(f *os.File) error {
	if s == nil {
		return plain(f)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken != nil {
		return plain(f)
	}
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var res int32
	var ringErr error
	// Control holds f's descriptor open until the sync is done.
	err = raw.Control(func(fd uintptr) { res, ringErr = s.sync(int32(fd)) })
	if err != nil {
		return err
	}
	if ringErr != nil {
		s.giveUp(ringErr)
		return plain(f)
	}
	if res >= 0 {
		return nil
	}
	errno := unix.Errno(-res)
	switch errno {
	case unix.EINVAL, unix.EOPNOTSUPP, unix.ENOSYS:
		// The ring may be what cannot do it (a sandbox that takes the ring
		// but not the operation): if the plain call can, the ring is
		// given up, and the file's data is durable all the same.
		if err := plain(f); err != nil {
			return err
		}
		s.giveUp(fmt.Errorf("dsync: the ring refused a sync the plain call made: %w", errno))
		return nil
	}
	return errno
}

// giveUp has every later sync take the plain way, for the reason why, and
// tells the OnGiveUp function. Called under s.mu.
func (s *Syncer) giveUp(why error) {
	s.broken = why
	if s.onGiveUp != nil {
		s.onGiveUp(why)
	}
}

// OnGiveUp has fn hear why, once, if the ring is given up from now on (a
// nil Syncer never calls it). From then on each sync is plain, holding
// its thread and Go processor. fn must not call the Syncer.
func (s *Syncer) OnGiveUp(fn func(why error)) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onGiveUp = fn
}

// Plain reports whether the Syncer syncs the plain way (it has no ring, or
// gave it up), and why.
func (s *Syncer) Plain() error {
	if s == nil {
		return errors.New("dsync: no ring")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken
}

// sync submits one fsync of fd and waits for its completion; res is the
// sync's result (a negated errno on failure), err a failure of the ring.
func (s *Syncer) sync(fd int32) (res int32, err error) {
	p := &s.p
	s.seq++
	tail := *u32(s.sqMem, p.sqOff.tail) // only this Syncer writes the tail
	mask := *u32(s.sqMem, p.sqOff.ringMask)
	slot := tail & mask
	*(*sqe)(unsafe.Pointer(&s.sqes[uintptr(slot)*unsafe.Sizeof(sqe{})])) = sqe{opcode: s.op, fd: fd, opFlags: fsyncDatasync, userData: s.seq}
	*u32(s.sqMem, p.sqOff.array+slot*4) = slot
	atomic.StoreUint32(u32(s.sqMem, p.sqOff.tail), tail+1)
	for try := 1; ; try++ {
		// An error means nothing was submitted: the entry stays queued for
		// the next try.
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(s.ring), 1, 0, 0, 0, 0)
		switch errno {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN, unix.EBUSY, unix.ENOMEM:
			if try < enterTries {
				runtime.Gosched()
				continue
			}
			fallthrough
		default:
			return 0, fmt.Errorf("dsync: io_uring_enter: %w", errno)
		}
		if n != 1 {
			return 0, errors.New("dsync: io_uring_enter took no entry")
		}
		break
	}
	var buf [8]byte
	for {
		head := *u32(s.cqMem, p.cqOff.head)
		if head != atomic.LoadUint32(u32(s.cqMem, p.cqOff.tail)) {
			c := *(*cqe)(unsafe.Pointer(&s.cqMem[uintptr(p.cqOff.cqes)+uintptr(head&*u32(s.cqMem, p.cqOff.ringMask))*unsafe.Sizeof(cqe{})]))
			atomic.StoreUint32(u32(s.cqMem, p.cqOff.head), head+1)
			if c.userData == s.seq {
				return c.res, nil
			}
			continue // an earlier sync's, left behind by a ring failure
		}
		// The eventfd counts completions posted; reading resets it, and
		// the goroutine waits in the poller until the next.
		if _, err := s.events.Read(buf[:]); err != nil {
			return 0, fmt.Errorf("dsync: waiting for the completion: %w", err)
		}
	}
}

// plain is fdatasync(2), retried when interrupted.
func plain(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// Close releases the ring; a Datasync after it syncs the plain way.
func (s *Syncer) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.broken = errClosed
	for _, m := range [][]byte{s.sqMem, s.cqMem, s.sqes} {
		if m != nil {
			_ = unix.Munmap(m)
		}
	}
	s.sqMem, s.cqMem, s.sqes = nil, nil, nil
	if s.events != nil {
		s.events.Close()
	}
	if s.ring >= 0 {
		unix.Close(s.ring)
		s.ring = -1
	}
	return nil
}
