package pipeline

import (
	"strconv"
	"strings"
)

// locate finds the YAML value a problem is about: the job (a job under
// "jobs", a stage under "stages", or "shared"), then the dotted field path
// inside it ("requires[1]", "annotations.screwdriver.cd/timeout"), as deep as
// the document goes. It returns nil when nothing matches (the problem is
// then about the file as a whole).
func locate(root *value, job, field string) *value {
	if root == nil || root.line == 0 && root.kind != kMap {
		return nil
	}
	base := root
	if job != "" {
		base = nil
		for _, section := range []string{"jobs", "stages"} {
			if sec, ok := root.get(section); ok && sec.kind == kMap {
				if v, ok := sec.get(job); ok {
					base = v
					break
				}
			}
		}
		if base == nil {
			if v, ok := root.get(job); ok { // "shared"
				base = v
			}
		}
		if base == nil {
			return nil
		}
	}
	if v := descend(base, field); v != nil && v.line > 0 {
		return v
	}
	return nil
}

// descend follows a dotted path with [n] indexes from v, matching the
// longest key at each mapping (keys may hold dots: screwdriver.cd/...), and
// stops at the deepest value that exists.
func descend(v *value, path string) *value {
	for path != "" && v != nil {
		switch {
		case v.kind == kMap:
			best := -1
			for i, k := range v.keys {
				if path == k || strings.HasPrefix(path, k+".") || strings.HasPrefix(path, k+"[") {
					if best < 0 || len(k) > len(v.keys[best]) {
						best = i
					}
				}
			}
			if best < 0 {
				return v
			}
			path = strings.TrimPrefix(path[len(v.keys[best]):], ".")
			v = v.vals[best]
		case v.kind == kSeq && strings.HasPrefix(path, "["):
			end := strings.IndexByte(path, ']')
			if end < 0 {
				return v
			}
			n, err := strconv.Atoi(path[1:end])
			if err != nil || n < 0 || n >= len(v.items) {
				return v
			}
			path = strings.TrimPrefix(path[end+1:], ".")
			v = v.items[n]
		default:
			return v
		}
	}
	return v
}
