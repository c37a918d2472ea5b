package templating

import (
	"fmt"
	"slices"
	"strings"
)

// graph is a directed graph over strings: node -> successors.
type graph map[string][]string

func (g graph) add(from, to string) {
	g[from] = append(g[from], to)
}

// rings finds cycles: it returns, for every node that lies on a cycle, one
// ring through it, as the list of its nodes in edge order starting at the
// ring's smallest node. Nodes on one ring share it. The result is
// deterministic whatever the order of g's maps and slices. O(V+E) to find the
// strongly connected components, plus one breadth-first search per ring.
func (g graph) rings() map[string][]string {
	nodes := make([]string, 0, len(g))
	for n, succ := range g {
		nodes = append(nodes, n)
		slices.Sort(succ)
		g[n] = slices.Compact(succ)
	}
	slices.Sort(nodes)

	out := make(map[string][]string)
	for _, scc := range g.components(nodes) {
		in := make(map[string]bool, len(scc))
		for _, n := range scc {
			in[n] = true
		}
		if len(scc) == 1 && !slices.Contains(g[scc[0]], scc[0]) {
			continue
		}
		slices.Sort(scc)
		for _, start := range scc {
			if out[start] != nil {
				continue
			}
			ring := g.shortestRing(start, in)
			for _, n := range ring {
				if out[n] == nil {
					out[n] = ring
				}
			}
		}
	}
	return out
}

// components returns the strongly connected components of g (Tarjan's
// algorithm, iterative so that long chains do not grow the stack).
func (g graph) components(nodes []string) [][]string {
	index := make(map[string]int, len(nodes))
	low := make(map[string]int, len(nodes))
	onStack := make(map[string]bool, len(nodes))
	var stack []string
	var out [][]string
	type frame struct {
		node string
		next int // index of the next successor to visit
	}
	for _, root := range nodes {
		if _, seen := index[root]; seen {
			continue
		}
		call := []frame{{node: root}}
		index[root], low[root] = len(index), len(index)
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if succ := g[f.node]; f.next < len(succ) {
				w := succ[f.next]
				f.next++
				if _, seen := index[w]; !seen {
					index[w], low[w] = len(index), len(index)
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{node: w})
				} else if onStack[w] {
					low[f.node] = min(low[f.node], index[w])
				}
				continue
			}
			v := f.node
			call = call[:len(call)-1]
			if len(call) > 0 {
				parent := call[len(call)-1].node
				low[parent] = min(low[parent], low[v])
			}
			if low[v] == index[v] {
				var scc []string
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					scc = append(scc, w)
					if w == v {
						break
					}
				}
				out = append(out, scc)
			}
		}
	}
	return out
}

// shortestRing returns a shortest cycle through start within the component
// in, rotated to begin at its smallest node. start lies on a cycle within
// in (a component of more than one node, or with a self-loop), so the
// breadth-first search comes back to it before the queue runs out.
func (g graph) shortestRing(start string, in map[string]bool) []string {
	parent := map[string]string{}
	queue := []string{start}
	for i := 0; ; i++ {
		v := queue[i]
		for _, w := range g[v] {
			if !in[w] {
				continue
			}
			if w == start {
				ring := []string{v}
				for ring[len(ring)-1] != start {
					ring = append(ring, parent[ring[len(ring)-1]])
				}
				slices.Reverse(ring)
				m := 0
				for i, n := range ring {
					if n < ring[m] {
						m = i
					}
				}
				return append(ring[m:], ring[:m]...)
			}
			if _, seen := parent[w]; !seen {
				parent[w] = v
				queue = append(queue, w)
			}
		}
	}
}

// maxRingShown bounds the nodes a ring's message names, so that a ring of
// thousands of objects gives messages of bounded size.
const maxRingShown = 10

// ringString writes a ring closed on its first node: "a -> b -> a"; a ring
// longer than maxRingShown is shortened: "a -> … -> j -> (5 more) -> a".
func ringString(ring []string) string {
	if len(ring) > maxRingShown {
		shown := strings.Join(ring[:maxRingShown], " -> ")
		return fmt.Sprintf("%s -> (%d more) -> %s", shown, len(ring)-maxRingShown, ring[0])
	}
	return strings.Join(append(slices.Clone(ring), ring[0]), " -> ")
}
