package metrictest

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// threadClock reads the CPU time of the calling OS thread, so that time
// the scheduler gives other processes on a busy machine is not counted.
// Lock the goroutine to its thread while using it.
type threadClock struct{}

const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID

func (threadClock) lock()   { runtime.LockOSThread() }
func (threadClock) unlock() { runtime.UnlockOSThread() }

func (threadClock) now() time.Duration {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic("metrictest: clock_gettime(CLOCK_THREAD_CPUTIME_ID): " + errno.Error())
	}
	return time.Duration(ts.Nano())
}
