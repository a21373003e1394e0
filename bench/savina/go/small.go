// pingpong, counting, threadring, fjthrput: see bench/savina/*.c for what
// each does and counts.
package main

import (
	"math"
	"sync"
)

// The capacity of a channel that stands for an actor's mailbox (Savina's
// mailboxes are unbounded; a Go channel is not, so a fast sender waits).
const mailbox = 1024

func pingpong(p *params) (uint64, bool) {
	ping, pong := make(chan uint64), make(chan uint64)
	go func() {
		for v := range ping {
			pong <- v
		}
	}()
	ok := true
	for i := uint64(1); i <= p.n; i++ {
		ping <- i
		ok = ok && <-pong == i
	}
	close(ping)
	return 2 * p.n, ok
}

// counting's messages: an increment, or a retrieve (reply != nil).
type countMsg struct {
	reply chan uint64
}

func counting(p *params) (uint64, bool) {
	counter := make(chan countMsg, mailbox)
	go func() {
		count := uint64(0)
		for m := range counter {
			if m.reply != nil {
				m.reply <- count
				return
			}
			count++
		}
	}()
	reply := make(chan uint64)
	go func() {
		for i := uint64(0); i < p.n; i++ {
			counter <- countMsg{}
		}
		counter <- countMsg{reply}
	}()
	return p.n + 2, <-reply == p.n
}

func threadring(p *params) (uint64, bool) {
	ring := make([]chan uint64, p.actors)
	for i := range ring {
		ring[i] = make(chan uint64, 1)
	}
	passes := make(chan uint64, p.actors)
	done := make(chan struct{})
	for i := range ring {
		go func(in, next chan uint64) {
			count := uint64(0)
			for left := range in {
				if left == 0 {
					close(done)
					break
				}
				count++
				next <- left - 1
			}
			passes <- count
		}(ring[i], ring[(i+1)%len(ring)])
	}
	ring[0] <- p.n
	<-done
	for _, c := range ring {
		close(c)
	}
	sum := uint64(0)
	for range ring {
		sum += <-passes
	}
	return p.n, sum == p.n
}

func fjthrput(p *params) (uint64, bool) {
	workers := make([]chan float64, p.actors)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := true
	for i := range workers {
		workers[i] = make(chan float64, mailbox)
		wg.Add(1)
		go func(in chan float64) {
			defer wg.Done()
			got, good := uint64(0), true
			for theta := range in {
				s := math.Sin(theta)
				good = good && s*s > 0
				got++
			}
			mu.Lock()
			ok = ok && good && got == p.n
			mu.Unlock()
		}(workers[i])
	}
	go func() {
		for i := uint64(0); i < p.n; i++ {
			for _, w := range workers {
				w <- 37.2
			}
		}
		for _, w := range workers {
			close(w)
		}
	}()
	wg.Wait()
	return p.actors * p.n, ok
}
