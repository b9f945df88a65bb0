// Small Go objects of known sizes, for allocscope's tests: what Go 1.27's
// compiler allocates through the runtime's allocators specialized by size
// (runtime.mallocgcSmallNoScanSC5, mallocgcSmallScanNoHeaderSC4,
// mallocgcTinySC2, ...) rather than mallocgc. Each site makes one kind into
// a package-level ring, so that every one escapes to the heap: a 48-byte
// object without pointers, a 32-byte one holding pointers, an 8-byte one
// (the tiny allocator packs two in a 16-byte block) and a 48-byte slice of
// a constant length; frames main.main;main.outer;main.site_*. Prints each
// site's calls and size, then "done" (as go_sites does).
// Usage: go_small [ITERATIONS]
package main

import (
	"fmt"
	"os"
	"strconv"
)

const ring = 64

type noscan48 [6]uint64

type scan32 struct {
	a, b *int
	c, d uint64
}

type site struct {
	name  string
	size  int
	calls int
}

var (
	plain   [ring]*noscan48
	linked  [ring]*scan32
	tiny    [ring]*uint64
	slices  [ring][]byte
	sites   = []*site{{"site_plain", 48, 0}, {"site_linked", 32, 0}, {"site_tiny", 8, 0}, {"site_slice", 48, 0}}
	anchors = [2]int{}
)

//go:noinline
func site_plain(i int) { plain[i%ring] = new(noscan48) }

//go:noinline
func site_linked(i int) { linked[i%ring] = &scan32{a: &anchors[0], b: &anchors[1]} }

//go:noinline
func site_tiny(i int) { tiny[i%ring] = new(uint64) }

//go:noinline
func site_slice(i int) { slices[i%ring] = make([]byte, 48) }

//go:noinline
func outer(i int) {
	site_plain(i)
	site_linked(i)
	site_tiny(i)
	site_slice(i)
	for _, s := range sites {
		s.calls++
	}
}

func main() {
	iterations := 1000000
	if len(os.Args) > 1 {
		n, err := strconv.Atoi(os.Args[1])
		if err != nil || n <= 0 {
			fmt.Fprintln(os.Stderr, "usage: go_small [ITERATIONS]")
			os.Exit(2)
		}
		iterations = n
	}
	for i := 0; i < iterations; i++ {
		outer(i)
	}
	for _, s := range sites {
		fmt.Printf("main.%s %d %d\n", s.name, s.calls, s.size)
	}
	fmt.Println("done")
}
