// The Savina suite in Go, the twin of bench/savina/*.c: goroutines and
// channels, GOMAXPROCS = --workers (default 2). One program for the suite:
// --bench NAME picks the benchmark (a go build per benchmark would build the
// same package eight times). The options, parameters and output line are
// those of bench/savina/common/savina.h and specs.c; mallocs_per_msg counts
// the heap objects the Go runtime allocated (runtime.MemStats.Mallocs).
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"syscall"
	"time"
)

type params struct {
	n, actors, workers, reps, warmup uint64
	quick                            bool
}

// A benchmark: its defaults (as in specs.c) and one run, which returns the
// messages it sent and whether its result checked out.
type bench struct {
	n, nQuick, actors, actorsQuick uint64
	run                            func(p *params) (msgs uint64, ok bool)
}

var benches = map[string]bench{
	"pingpong":   {40000, 10000, 2, 2, pingpong},
	"counting":   {1000000, 100000, 2, 2, counting},
	"threadring": {100000, 20000, 500, 500, threadring},
	"fjthrput":   {10000, 2000, 60, 60, fjthrput},
	"big":        {20000, 2000, 120, 120, big},
	"chameneos":  {200000, 20000, 100, 100, chameneos},
	"fib":        {22, 18, 1, 1, fib},
	"fibpool":    {25, 18, 8, 8, fibpool},
}

type sample struct {
	elapsed time.Duration
	mallocs uint64
	msgs    uint64
}

func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

func measure(b bench, p *params) (sample, bool) {
	m0 := mallocs()
	t0 := time.Now()
	msgs, ok := b.run(p)
	s := sample{time.Since(t0), 0, msgs}
	s.mallocs = mallocs() - m0
	return s, ok
}

func main() {
	name := flag.String("bench", "", "the benchmark: pingpong, counting, threadring, fjthrput, big, chameneos, fib, fibpool")
	n := flag.Uint64("n", 0, "the benchmark's size (see bench/savina/common/specs.c)")
	actors := flag.Uint64("actors", 0, "its actors, where it has that parameter")
	workers := flag.Uint64("workers", 2, "GOMAXPROCS")
	reps := flag.Uint64("reps", 0, "measured runs (default 3; --quick 1)")
	warmup := flag.Int64("warmup", -1, "unmeasured runs first (default 1; --quick 0)")
	quick := flag.Bool("quick", false, "small parameters, one run")
	flag.Parse()
	b, found := benches[*name]
	if !found {
		fmt.Fprintf(os.Stderr, "savina go: no benchmark %q\n", *name)
		os.Exit(2)
	}
	p := params{n: *n, actors: *actors, workers: *workers, reps: *reps, quick: *quick}
	p.n = pick(p.n, b.n, b.nQuick, p.quick)
	p.actors = pick(p.actors, b.actors, b.actorsQuick, p.quick)
	p.reps = pick(p.reps, 3, 1, p.quick)
	p.warmup = uint64(*warmup)
	if *warmup < 0 {
		p.warmup = pick(0, 1, 0, p.quick)
	}
	runtime.GOMAXPROCS(int(p.workers))
	os.Exit(report(*name, b, &p))
}

// v unless zero, else the default or, under --quick, the quick default.
func pick(v, def, quickDef uint64, quick bool) uint64 {
	if v != 0 {
		return v
	}
	if quick {
		return quickDef
	}
	return def
}

func report(name string, b bench, p *params) int {
	var samples []sample
	for i := uint64(0); i < p.warmup+p.reps; i++ {
		s, ok := measure(b, p)
		if !ok {
			fmt.Fprintf(os.Stderr, "savina %s: run failed: wrong result\n", name)
			fmt.Printf("savina name=%s runtime=go check=FAILED\n", name)
			return 1
		}
		if i >= p.warmup {
			samples = append(samples, s)
		}
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i].elapsed < samples[j].elapsed })
	m := samples[len(samples)/2]
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	secs := m.elapsed.Seconds()
	fmt.Printf("savina name=%s runtime=go msgs_per_s=%.0f elapsed_s=%.4f rss_mib=%.1f "+
		"mallocs_per_msg=%.3f msgs=%d n=%d actors=%d reps=%d check=ok\n",
		name, float64(m.msgs)/secs, secs, float64(ru.Maxrss)/1024, float64(m.mallocs)/float64(m.msgs),
		m.msgs, p.n, p.actors, p.reps)
	return 0
}
