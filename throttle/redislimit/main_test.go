package redislimit

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

// parallelTests is how many parallel tests run at once unless -parallel
// says otherwise. The tests mostly wait, on redis-server, on child
// processes, on a cluster forming, not on the CPU, so go test's default
// of GOMAXPROCS leaves a 2-core machine idle: issue 12 needs 20 passes of
// the package within go test's 10 minutes on such a machine under load.
const parallelTests = 8

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		os.Exit(worker())
	}
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", strconv.Itoa(parallelTests)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	goleak.VerifyTestMain(m)
}
