// Known allocation sites in Go with known bytes in use at the end, for
// allocscope's tests of Go's own heap sampling (it links runtime/pprof, so
// its runtime samples at MemProfileRate). Each site makes byte slices of one
// size class (the last a large object), keeps its first `keep` for the
// program's life and lets the others go; frames
// main.main;main.outer;main.site_*. At the end: a full collection, the
// program's own heap profile written to PROFILE (when given), then each
// site's "main.site_X calls size kept" and "done"; "loop N ns" on stderr.
// With "wait", it then waits for SIGTERM or SIGINT (its heap as it was).
// Usage: go_heap [ITERATIONS [PROFILE [wait]]]
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"
)

const ring = 16

type site struct {
	name        string
	size, every int
	keep        int
	calls       int
	kept        [][]byte
	recent      [ring][]byte // dropped ones, alive a while (as real garbage is)
}

var sites = []*site{{name: "site_small", size: 1024, every: 1, keep: 16384},
	{name: "site_medium", size: 8192, every: 4, keep: 2048},
	{name: "site_large", size: 32768, every: 16, keep: 256},
	{name: "site_huge", size: 40960, every: 64, keep: 160}}

func (s *site) take(b []byte) {
	if len(s.kept) < s.keep {
		s.kept = append(s.kept, b)
	} else {
		s.recent[s.calls%ring] = b
	}
	s.calls++
}

//go:noinline
func site_small() { sites[0].take(make([]byte, 1024)) }

//go:noinline
func site_medium() { sites[1].take(make([]byte, 8192)) }

//go:noinline
func site_large() { sites[2].take(make([]byte, 32768)) }

//go:noinline
func site_huge() { sites[3].take(make([]byte, 40960)) }

//go:noinline
func outer(i int) {
	calls := []func(){site_small, site_medium, site_large, site_huge}
	for k, s := range sites {
		if i%s.every == 0 {
			calls[k]()
		}
	}
}

func main() {
	iterations := 200000
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n <= 0 {
			fmt.Fprintln(os.Stderr, "usage: go_heap [ITERATIONS [PROFILE [wait]]]")
			os.Exit(2)
		}
		iterations = n
	}
	start := time.Now()
	for i := 0; i < iterations; i++ {
		outer(i)
	}
	fmt.Fprintf(os.Stderr, "loop %d ns\n", time.Since(start).Nanoseconds())
	for _, s := range sites {
		s.recent = [ring][]byte{}
	}
	runtime.GC() // sweeps too: every dropped block's record is freed
	if len(os.Args) > 2 && os.Args[2] != "" {
		f, err := os.Create(os.Args[2])
		if err == nil {
			err = pprof.WriteHeapProfile(f)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "go_heap:", err)
			os.Exit(1)
		}
	}
	for _, s := range sites {
		fmt.Printf("main.%s %d %d %d\n", s.name, s.calls, s.size, len(s.kept))
	}
	fmt.Println("done")
	if len(os.Args) > 3 && os.Args[3] == "wait" {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
	}
	runtime.KeepAlive(sites)
}
