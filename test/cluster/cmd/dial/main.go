// Command dial is the NetworkPolicy step's probe pod: it opens a TCP
// connection to each ADDR (host:port) and prints one line per address,
// "ADDR connected" or "ADDR refused: ERROR", then exits 0. A policy that
// drops rather than rejects shows as a timeout (-timeout, 3 s). With
// -retry, a refused address is tried again until it connects or that long
// has passed: an enforcer learns a new pod's address (for a rule that
// selects it) only after the pod has started.
//
//	dial [-timeout D] [-retry D] ADDR...
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	timeout := flag.Duration("timeout", 3*time.Second, "how long to wait for each connection")
	retry := flag.Duration("retry", 0, "how long to keep trying a refused address")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: dial [-timeout D] ADDR...")
		os.Exit(2)
	}
	for _, addr := range flag.Args() {
		deadline := time.Now().Add(*retry)
		for {
			c, err := net.DialTimeout("tcp", addr, *timeout)
			if err == nil {
				c.Close()
				fmt.Printf("%s connected\n", addr)
				break
			}
			if time.Now().After(deadline) {
				fmt.Printf("%s refused: %v\n", addr, err)
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}
