package pipeline

import (
	"slices"
	"sort"
	"strings"
)

// buildGraph computes the workflow graph the way Screwdriver's workflow-parser does:
// nodes "~pr", "~commit", then each job followed by the nodes its requires name; for each
// job, one edge per distinct tilde require (OR, src with the tilde dropped for jobs and
// stages) and one edge with join=true per distinct plain require.
func buildGraph(spec *Spec) Graph {
	g := Graph{Nodes: []Node{}, Edges: []Edge{}}
	index := map[string]int{}
	addNode := func(name string) {
		if _, ok := index[name]; ok {
			return
		}
		index[name] = len(g.Nodes)
		g.Nodes = append(g.Nodes, Node{Name: name})
	}
	addNode("~pr")
	addNode("~commit")
	for _, name := range spec.JobOrder {
		addNode(name)
		for _, r := range spec.Jobs[name].Requires {
			addNode(nodeName(r))
		}
	}
	for i := range g.Nodes {
		if j, ok := spec.Jobs[g.Nodes[i].Name]; ok {
			g.Nodes[i].StageName = j.Stage
			g.Nodes[i].Virtual = j.Settings.VirtualJob
		}
	}
	for _, name := range spec.JobOrder {
		var or, and []string
		for _, r := range spec.Jobs[name].Requires {
			if strings.HasPrefix(r, "~") {
				if !slices.Contains(or, r) {
					or = append(or, r)
				}
			} else if !slices.Contains(and, r) {
				and = append(and, r)
			}
		}
		for _, r := range or {
			g.Edges = append(g.Edges, Edge{Src: nodeName(r), Dest: name})
		}
		for _, r := range and {
			g.Edges = append(g.Edges, Edge{Src: r, Dest: name, Join: true})
		}
	}
	return g
}

// findCycle returns one directed cycle of the graph as a node path whose first and last
// entries are the same node, or nil when the graph is acyclic.
func findCycle(g Graph) []string {
	adj := map[string][]string{}
	for _, e := range g.Edges {
		adj[e.Src] = append(adj[e.Src], e.Dest)
	}
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	type frame struct {
		node string
		next int
	}
	for _, n := range g.Nodes {
		if color[n.Name] != white {
			continue
		}
		stack := []frame{{node: n.Name}}
		color[n.Name] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next < len(adj[top.node]) {
				d := adj[top.node][top.next]
				top.next++
				switch color[d] {
				case grey:
					var path []string
					for i := len(stack) - 1; i >= 0; i-- {
						path = append([]string{stack[i].node}, path...)
						if stack[i].node == d {
							break
						}
					}
					return append(path, d)
				case white:
					color[d] = grey
					stack = append(stack, frame{node: d})
				}
				continue
			}
			color[top.node] = black
			stack = stack[:len(stack)-1]
		}
	}
	return nil
}

// Next is a job to consider after an upstream job (or trigger) succeeded.
type Next struct {
	// Job is the downstream job.
	Job string `json:"job"`
	// Join is false for an OR edge: start Job now. True for an AND edge: start Job once
	// every one of its JoinParents has succeeded in the same event.
	Join bool `json:"join,omitempty"`
}

// jobIndex maps job names to their position in JobOrder, for stable result ordering.
func (s *Spec) jobIndex() map[string]int {
	idx := make(map[string]int, len(s.JobOrder))
	for i, n := range s.JobOrder {
		idx[n] = i
	}
	return idx
}

func (s *Spec) sortNext(out []Next) []Next {
	idx := s.jobIndex()
	sort.SliceStable(out, func(a, b int) bool { return idx[out[a].Job] < idx[out[b].Job] })
	return out
}

// downstream collects the jobs with an edge from node src. If a job has both an OR and a
// join edge from src (e.g. requires [~a, a]) the OR edge wins: the job starts at once.
func (s *Spec) downstream(src string) []Next {
	var out []Next
	pos := map[string]int{}
	for _, e := range s.Graph.Edges {
		if e.Src != src {
			continue
		}
		if at, ok := pos[e.Dest]; ok {
			out[at].Join = out[at].Join && e.Join
			continue
		}
		pos[e.Dest] = len(out)
		out = append(out, Next{Job: e.Dest, Join: e.Join})
	}
	return s.sortNext(out)
}

// NextJobs returns the jobs to consider after a build of job succeeded in an event
// (for a matrix job: after all its permutations succeeded). For each downstream job D:
// Join false means J→D is an OR edge (requires "~J"): start D now. Join true means an
// AND edge (requires "J"): start D once all of JoinParents(D) succeeded in the same
// event. Stage setup/teardown jobs are ordinary jobs here ("stage@x:setup"). Results
// follow JobOrder; an unknown job has no next jobs.
func (s *Spec) NextJobs(job string) []Next {
	if _, ok := s.Jobs[job]; !ok {
		return nil
	}
	return s.downstream(job)
}

// JoinParents returns the AND parents of job: its requires written without a tilde, in
// written order, deduplicated. For requires [~a, b, c] they are [b, c] (a alone, or b
// and c together, start the job). Parents may be remote ("sd@pipeline:job"), which the
// caller must resolve outside this event. Nil when the job has no join.
func (s *Spec) JoinParents(job string) []string {
	j, ok := s.Jobs[job]
	if !ok {
		return nil
	}
	var out []string
	for _, r := range j.Requires {
		if !strings.HasPrefix(r, "~") && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// JoinSatisfied reports whether every join parent of job is in succeeded (the jobs that
// succeeded in the event). A job without join parents is never satisfied by a join.
func (s *Spec) JoinSatisfied(job string, succeeded map[string]bool) bool {
	parents := s.JoinParents(job)
	if len(parents) == 0 {
		return false
	}
	for _, p := range parents {
		if !succeeded[p] {
			return false
		}
	}
	return true
}

// StartJobs returns the jobs an SCM event starts: those with a tilde require of the
// event's kind whose filter accepts ref. ref is the branch for commit events, the PR's
// target branch for pr and pr-closed events, and the tag or release name for tag and
// release events (ignored for subscribe). A ":branch" filter must equal ref, a
// ":/regex/" filter must match somewhere in ref (RE2 syntax). Without a filter, commit,
// pr and pr-closed triggers fire only for the pipeline's own branch (defaultBranch; an
// empty defaultBranch accepts any ref) while tag and release triggers fire for every
// tag/release. Results follow JobOrder.
func (s *Spec) StartJobs(kind EventKind, ref, defaultBranch string) []string {
	var out []string
	for _, name := range s.JobOrder {
		for _, r := range s.Jobs[name].Requires {
			req, err := ParseRequire(r)
			if err == nil && req.OR && req.matches(kind, ref, defaultBranch) {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

// RemoteTriggers returns the remote jobs the spec subscribes to, as "sd@<pipeline>:<job>"
// (no tilde), sorted and deduplicated: both remote OR triggers (~sd@p:j) and remote join
// parents (sd@p:j).
func (s *Spec) RemoteTriggers() []string {
	var out []string
	for _, name := range s.JobOrder {
		for _, r := range s.Jobs[name].Requires {
			req, err := ParseRequire(r)
			if err == nil && req.Kind == RequireRemote {
				name := strings.TrimPrefix(r, "~")
				if !slices.Contains(out, name) {
					out = append(out, name)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// SubscribedJobs returns the jobs that require the remote job remote ("sd@p:j" or
// "~sd@p:j", same result): Join false for "~sd@p:j" (start when that remote job
// succeeds), true for "sd@p:j" (a join parent, see JoinParents). Results follow JobOrder.
func (s *Spec) SubscribedJobs(remote string) []Next {
	remote = strings.TrimPrefix(remote, "~")
	var out []Next
	for _, name := range s.JobOrder {
		or, and := false, false
		for _, r := range s.Jobs[name].Requires {
			switch r {
			case "~" + remote:
				or = true
			case remote:
				and = true
			}
		}
		if or || and {
			out = append(out, Next{Job: name, Join: !or})
		}
	}
	return out
}

// StageJobs returns the jobs of a stage: its setup job, its member jobs in the order the
// stage lists them, then its teardown job. Nil for an unknown stage.
func (s *Spec) StageJobs(stage string) []string {
	st, ok := s.Stages[stage]
	if !ok {
		return nil
	}
	out := make([]string, 0, len(st.Jobs)+2)
	out = append(out, st.Setup)
	out = append(out, st.Jobs...)
	return append(out, st.Teardown)
}

// Detached reports whether the job has no requires: it runs only when started by hand,
// by its schedule (buildPeriodically) or as a restart.
func (j *Job) Detached() bool { return len(j.Requires) == 0 }

// DetachedJobs returns the detached jobs in JobOrder.
func (s *Spec) DetachedJobs() []string {
	var out []string
	for _, n := range s.JobOrder {
		if s.Jobs[n].Detached() {
			out = append(out, n)
		}
	}
	return out
}

// PeriodicJobs returns the jobs with a buildPeriodically annotation, in JobOrder.
func (s *Spec) PeriodicJobs() []string {
	var out []string
	for _, n := range s.JobOrder {
		if s.Jobs[n].Settings.PeriodicCron != "" {
			out = append(out, n)
		}
	}
	return out
}
