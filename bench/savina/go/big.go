// big, chameneos, fib, fibpool: see bench/savina/*.c for what each does and
// counts.
package main

// big's messages: a ping from actor `from`, or a pong.
type bigMsg struct {
	ping bool
	from int
}

func big(p *params) (uint64, bool) {
	w := int(p.actors)
	boxes := make([]chan bigMsg, w)
	for i := range boxes {
		// At most every other actor's ping and one pong: never full.
		boxes[i] = make(chan bigMsg, w+1)
	}
	answered := make(chan uint64, w)
	finished := make(chan struct{}, w)
	for i := range boxes {
		go bigActor(p, i, boxes, answered, finished)
	}
	for range boxes {
		<-finished
	}
	sum := uint64(0)
	for _, b := range boxes {
		close(b)
	}
	for range boxes {
		sum += <-answered
	}
	return 2 * p.actors * p.n, sum == p.actors*p.n
}

func bigActor(p *params, me int, boxes []chan bigMsg, answered chan<- uint64, finished chan<- struct{}) {
	rng := uint64(0x9e3779b97f4a7c15) * uint64(me+1)
	w := uint64(len(boxes))
	sent, count := uint64(0), uint64(0)
	next := func() {
		if sent == p.n {
			finished <- struct{}{}
			return
		}
		sent++
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		boxes[(uint64(me)+1+rng%(w-1))%w] <- bigMsg{true, me}
	}
	next()
	for m := range boxes[me] {
		if m.ping {
			count++
			boxes[m.from] <- bigMsg{false, me}
		} else {
			next()
		}
	}
	answered <- count
}

// chameneos' messages to the mall: a request to meet, or (faded) a count.
type mallMsg struct {
	from   int
	colour int
	faded  bool
	count  uint64
}

// ... and to a chameneos: meet `other`, change colour, or stop.
type chamMsg struct {
	kind   int // chamMeet, chamChange, chamStop
	other  int
	colour int
}

const (
	chamMeet = iota
	chamChange
	chamStop
)

func complement(a, b int) int {
	if a == b {
		return a
	}
	return 3 - a - b
}

func chameneos(p *params) (uint64, bool) {
	c := int(p.actors)
	mall := make(chan mallMsg, c)
	boxes := make([]chan chamMsg, c)
	for i := range boxes {
		boxes[i] = make(chan chamMsg, c)
	}
	for i := range boxes {
		go chameneosActor(i, i%3, mall, boxes)
	}
	left, met, faded, waiting := p.n, uint64(0), 0, -1
	for faded < c {
		m := <-mall
		switch {
		case m.faded:
			met += m.count
			faded++
		case left == 0:
			boxes[m.from] <- chamMsg{chamStop, 0, 0}
		case waiting < 0:
			waiting = m.from
		default:
			left--
			boxes[waiting] <- chamMsg{chamMeet, m.from, m.colour}
			waiting = -1
		}
	}
	return 4 * p.n, met == 2*p.n
}

func chameneosActor(me, colour int, mall chan<- mallMsg, boxes []chan chamMsg) {
	meetings := uint64(0)
	mall <- mallMsg{from: me, colour: colour}
	for m := range boxes[me] {
		switch m.kind {
		case chamMeet:
			colour = complement(colour, m.colour)
			boxes[m.other] <- chamMsg{chamChange, me, colour}
		case chamChange:
			colour = m.colour
		case chamStop:
			mall <- mallMsg{faded: true, count: meetings}
			return
		}
		meetings++
		mall <- mallMsg{from: me, colour: colour}
	}
}

func fibValue(n uint64) uint64 {
	a, b := uint64(0), uint64(1)
	for i := uint64(0); i < n; i++ {
		a, b = b, a+b
	}
	return a
}

func fibCalls(n uint64) uint64 { return 2*fibValue(n+1) - 1 }

// A goroutine per call, answering on out.
func fibCall(n uint64, out chan<- uint64) {
	if n < 2 {
		out <- n
		return
	}
	sub := make(chan uint64, 2)
	go fibCall(n-1, sub)
	go fibCall(n-2, sub)
	out <- <-sub + <-sub
}

func fib(p *params) (uint64, bool) {
	out := make(chan uint64, 1)
	go fibCall(p.n, out)
	return 2 * fibCalls(p.n), <-out == fibValue(p.n)
}
