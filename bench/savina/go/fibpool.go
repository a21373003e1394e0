// fibpool: see bench/savina/fibpool.c. A member never blocks on its
// requests: it keeps a join per request it split, completed by the two
// results (continuation passing), and a send to a full mailbox moves to a
// goroutine of its own, so that two members never wait on each other.
package main

// A request for fib(n) (result == false) or a result, for join `tag` of
// member `to` (-1: the root).
type fibMsg struct {
	result bool
	n      uint64 // the argument, or the result's value
	to     int
	tag    uint64
}

type join struct {
	to  int
	tag uint64
	sum uint64
	got int
}

func send(ch chan fibMsg, m fibMsg) {
	select {
	case ch <- m:
	default:
		go func() { ch <- m }()
	}
}

func fibMember(me int, boxes []chan fibMsg, root chan fibMsg) {
	pending := map[uint64]*join{}
	next, tags := me, uint64(0)
	reply := func(to int, tag, v uint64) {
		m := fibMsg{true, v, to, tag}
		if to < 0 {
			root <- m
		} else {
			send(boxes[to], m)
		}
	}
	for m := range boxes[me] {
		switch {
		case m.result:
			j := pending[m.tag]
			j.sum += m.n
			if j.got++; j.got == 2 {
				delete(pending, m.tag)
				reply(j.to, j.tag, j.sum)
			}
		case m.n < 2:
			reply(m.to, m.tag, m.n)
		default:
			tags++
			pending[tags] = &join{to: m.to, tag: m.tag}
			for i := uint64(1); i <= 2; i++ {
				next = (next + 1) % len(boxes)
				send(boxes[next], fibMsg{false, m.n - i, me, tags})
			}
		}
	}
}

func fibpool(p *params) (uint64, bool) {
	boxes := make([]chan fibMsg, p.actors)
	for i := range boxes {
		boxes[i] = make(chan fibMsg, mailbox)
	}
	root := make(chan fibMsg, 1)
	for i := range boxes {
		go fibMember(i, boxes, root)
	}
	boxes[0] <- fibMsg{false, p.n, -1, 0}
	r := <-root
	for _, b := range boxes {
		close(b)
	}
	return 2 * fibCalls(p.n), r.n == fibValue(p.n)
}
