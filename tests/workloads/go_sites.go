// Known allocation sites in Go, for allocscope's tests: each site makes byte
// slices of one size class (the last a large object, a span of its own)
// into a package-level ring, so that every one escapes to the heap; frames
// main.main;main.outer;main.site_*. Prints each site's calls and size, then
// "done"; the loop's own time on stderr ("loop N ns", for benchmarks).
// With "wait": prints "ready" and waits for SIGUSR1 before its loop, and
// after "done" for another, then prints "rate R" (its MemProfileRate: the
// program links no runtime/pprof, so its runtime's is 0 unless set).
// Usage: go_sites [ITERATIONS [wait]]
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

const ring = 64

type site struct {
	name  string
	size  int
	every int // called once every `every` iterations
	calls int
}

var (
	small, medium, large, huge [ring][]byte
	sites                      = []*site{{"site_small", 48, 1, 0}, {"site_medium", 1024, 4, 0},
		{"site_large", 8192, 32, 0}, {"site_huge", 40960, 128, 0}}
)

//go:noinline
func site_small(i int) { small[i%ring] = make([]byte, 48) }

//go:noinline
func site_medium(i int) { medium[i%ring] = make([]byte, 1024) }

//go:noinline
func site_large(i int) { large[i%ring] = make([]byte, 8192) }

//go:noinline
func site_huge(i int) { huge[i%ring] = make([]byte, 40960) }

//go:noinline
func outer(i int) {
	calls := []func(int){site_small, site_medium, site_large, site_huge}
	for k, s := range sites {
		if i%s.every == 0 {
			calls[k](i)
			s.calls++
		}
	}
}

func main() {
	iterations := 400000
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n <= 0 {
			fmt.Fprintln(os.Stderr, "usage: go_sites [ITERATIONS]")
			os.Exit(2)
		}
		iterations = n
	}
	wait := len(os.Args) > 2 && os.Args[2] == "wait"
	usr1 := make(chan os.Signal, 1)
	if wait {
		signal.Notify(usr1, syscall.SIGUSR1)
		fmt.Println("ready")
		<-usr1
	}
	start := time.Now()
	for i := 0; i < iterations; i++ {
		outer(i)
	}
	fmt.Fprintf(os.Stderr, "loop %d ns\n", time.Since(start).Nanoseconds())
	for _, s := range sites {
		fmt.Printf("main.%s %d %d\n", s.name, s.calls, s.size)
	}
	fmt.Println("done")
	if wait {
		<-usr1
		fmt.Println("rate", runtime.MemProfileRate)
	}
}
